package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/hashicorp/cli"
	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/status"
)

type snapshotCommand struct{}

func (c *snapshotCommand) Synopsis() string { return "Save, list, verify and restore snapshots" }
func (c *snapshotCommand) Help() string {
	return "Usage: etcd-nomad snapshot save|list|verify|restore -config FILE ...\n\n  Snapshots go to the store of the definition's snapshot block."
}
func (c *snapshotCommand) Run([]string) int { return cli.RunResultHelp }

// snapshotEnv is what every snapshot command needs.
type snapshotEnv struct {
	cl    *config.Cluster
	store snapshot.Store
	enc   snapshot.Encryption
}

func loadSnapshotEnv(ctx context.Context, ui cli.Ui, fs clusterFlags, args []string, help string) (*snapshotEnv, clusterFlags, bool) {
	cl := fs.load(ui, help, args, true)
	if cl == nil {
		return nil, fs, false
	}
	cl.DataDir = os.ExpandEnv(cl.DataDir)
	if err := requireSnapshotKey(cl); err != nil {
		ui.Error(err.Error())
		return nil, fs, false
	}
	store, err := backends.StoreWithLog(ctx, cl, hclog.New(&hclog.LoggerOptions{Name: "snapshots", Level: hclog.Warn, Output: os.Stderr}))
	if err != nil {
		ui.Error(err.Error())
		return nil, fs, false
	}
	enc, err := backends.Encryption(cl)
	if err != nil {
		ui.Error(err.Error())
		return nil, fs, false
	}
	return &snapshotEnv{cl: cl, store: store, enc: enc}, fs, true
}

func progressPrinter(ui cli.Ui, verb string) snapshot.Progress {
	return func(done int64, elapsed time.Duration) {
		rate := float64(done) / max(elapsed.Seconds(), 0.001)
		ui.Output(fmt.Sprintf("  %s %s (%s/s, %s)", verb, humanize.IBytes(uint64(done)), humanize.IBytes(uint64(rate)), elapsed.Round(100*time.Millisecond)))
	}
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

// resolveName turns "latest" into the newest snapshot's name, among those
// that authenticate (a forged snapshot is never "latest") and are of the
// cluster record's lineage (newestOfLineage, as chooseRestore), warning of
// a newer object that does not authenticate.
func resolveName(ctx context.Context, ui cli.Ui, env *snapshotEnv, name string) (string, error) {
	if err := requireSnapshotKey(env.cl); err != nil {
		return "", err // without the key, "latest" would be a store writer's
	}
	if name != "latest" {
		return name, nil
	}
	lineage, err := recordLineage(ctx, env.cl)
	if err != nil {
		return "", err
	}
	all, err := env.store.List(ctx)
	if err != nil {
		return "", err
	}
	list, _ := env.enc.Authentic(all)
	full, end, ok := newestOfLineage(ui, list, lineage)
	if newer := newestRefusedAfter(all, list, end, ""); newer != nil {
		ui.Warn(fmt.Sprintf("\"latest\" is the newest snapshot that authenticates (chain end %d)%s", end, describeRefused(newer)))
	}
	if !ok {
		return "", errors.New("the store holds no snapshot of the cluster record's lineage that authenticates")
	}
	return full.Name, nil
}

type snapshotSaveCommand struct{ ui cli.Ui }

func (c *snapshotSaveCommand) Synopsis() string { return "Save a snapshot of the running cluster" }
func (c *snapshotSaveCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad snapshot save -config FILE

  Streams a snapshot from a healthy member through zstd (and age, when the
  snapshot block has an encryption block) into the store, records its
  sha256, then applies retention (never deleting the newest). The snapshot
  is spooled to $TMPDIR first (as large as the database) so that its
  revision is read from the data itself.

  With TLS auto the stream takes a certificate from the cluster CA, whose
  key Consul keeps sealed: set ETCD_NOMAD_CA_KEK to the cluster's key
  (nomad var get -item ca_kek nomad/jobs/JOB).`)
}

func (c *snapshotSaveCommand) Run(args []string) int {
	ctx, cancel := signalContext()
	defer cancel()
	env, _, ok := loadSnapshotEnv(ctx, c.ui, newClusterFlags("snapshot save"), args, c.Help())
	if !ok {
		return 1
	}
	from, src, err := snapshotSource(ctx, env.cl)
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	c.ui.Output(fmt.Sprintf("saving a snapshot of %s (cluster %s, epoch %d) from %s", env.cl.Name, src.ClusterID, src.Epoch, from.Endpoint))
	m, err := snapshot.Save(ctx, from, env.store, src, env.enc, progressPrinter(c.ui, "read"))
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	c.ui.Output(fmt.Sprintf("saved %s: revision %d, %s (stored %s), sha256 %s", m.Name, m.Revision, humanize.IBytes(uint64(m.Size)), humanize.IBytes(uint64(m.StoredSize)), m.SHA256[:16]))
	if sn := env.cl.Snapshot; sn != nil {
		// Retention ranks the snapshots of the incarnation just saved
		// (snapshot.Prune): another incarnation's is never the newest.
		lineage := snapshot.Lineage{Epoch: src.Epoch}
		lineage.ClusterID, _ = strconv.ParseUint(src.ClusterID, 16, 64)
		removed, err := snapshot.Prune(ctx, env.store, env.enc, lineage, sn.RetainCount, sn.RetainAge, time.Now())
		for _, name := range removed {
			c.ui.Output("retention: deleted " + name)
		}
		if err != nil {
			c.ui.Warn(err.Error())
		}
	}
	return 0
}

// snapshotSource picks the healthy member a snapshot is streamed from
// (the first the status lists) and what the snapshot is of.
func snapshotSource(ctx context.Context, cl *config.Cluster) (snapshot.From, snapshot.Source, error) {
	src := snapshot.Source{Cluster: cl.Name}
	bc, err := backends.OpenClient(cl)
	if err != nil {
		return snapshot.From{}, src, err
	}
	st, err := status.Gather(ctx, bc)
	if err != nil {
		return snapshot.From{}, src, err
	}
	ep, name := "", ""
	for _, m := range st.Members {
		if m.Healthy && ep == "" {
			// Stamped (and MACed) with what the member's own data runs,
			// never the Consul record alone, which a Consul key writer
			// can rewrite: the two must agree.
			ep, name = m.ClientURL, m.Name
			src.ClusterID, src.Epoch = fmt.Sprintf("%x", m.ClusterID), m.Epoch
		}
	}
	if ep == "" {
		return snapshot.From{}, src, errors.New("no healthy member to take a snapshot from")
	}
	if src.ClusterID != st.ClusterID || src.Epoch != st.Epoch {
		return snapshot.From{}, src, fmt.Errorf("the cluster record (cluster id %s, epoch %d) and member %s's data (cluster id %s, epoch %d) disagree (a recovery under way, or a record rewritten): not saving",
			st.ClusterID, st.Epoch, name, src.ClusterID, src.Epoch)
	}
	co, err := backends.Coordinator(cl)
	if err != nil {
		return snapshot.From{}, src, err
	}
	// The stream is the whole database: it takes a certificate from the
	// cluster CA itself, whose key Consul keeps sealed (ETCD_NOMAD_CA_KEK).
	kek, err := clusterca.KEKFromEnv()
	if err != nil {
		return snapshot.From{}, src, err
	}
	tc, _, err := backends.EtcdTLS(ctx, cl, co, kek)
	if errors.Is(err, clusterca.ErrCASealed) {
		err = fmt.Errorf("%w: snapshot save streams the whole database from etcd's client port, which takes a certificate from the cluster CA; "+
			"set %s to the cluster's key (nomad var get -item %s nomad/jobs/<job>)", err, certs.KEKEnv, jobs.CAKEKKey)
	}
	if err != nil {
		return snapshot.From{}, src, err
	}
	return snapshot.From{Endpoint: ep, TLS: tc}, src, nil
}

type snapshotListCommand struct{ ui cli.Ui }

func (c *snapshotListCommand) Synopsis() string { return "List the snapshots in the store" }
func (c *snapshotListCommand) Help() string {
	return "Usage: etcd-nomad snapshot list -config FILE"
}

func (c *snapshotListCommand) Run(args []string) int {
	ctx, cancel := signalContext()
	defer cancel()
	env, _, ok := loadSnapshotEnv(ctx, c.ui, newClusterFlags("snapshot list"), args, c.Help())
	if !ok {
		return 1
	}
	all, err := env.store.List(ctx)
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	// Chains are built from what authenticates, as a restore builds them;
	// a refused object is listed with why.
	list, refused := env.enc.Authentic(all)
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tEPOCH\tREVISION\tSIZE\tSTORED\tENCRYPTED\tCREATED\tDELTAS")
	for _, m := range snapshot.Full(all) {
		if err := refused[m.Name]; err != nil {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%v\t%s\tREFUSED: %v\n", m.Name, m.Epoch, m.Revision, humanize.IBytes(uint64(m.Size)), humanize.IBytes(uint64(m.StoredSize)), m.Encrypted, m.Created.Format(time.RFC3339), errors.Unwrap(err))
			continue
		}
		chain, gap := snapshot.Chain(list, m)
		deltas := "-"
		if n := len(chain); n > 0 {
			deltas = fmt.Sprintf("%d, to revision %d", n, chain[n-1].Revision)
		}
		if gap {
			deltas += " (gap after)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%v\t%s\t%s\n", m.Name, m.Epoch, m.Revision, humanize.IBytes(uint64(m.Size)), humanize.IBytes(uint64(m.StoredSize)), m.Encrypted, m.Created.Format(time.RFC3339), deltas)
	}
	tw.Flush()
	c.ui.Output(strings.TrimRight(b.String(), "\n"))
	return 0
}

type snapshotVerifyCommand struct{ ui cli.Ui }

func (c *snapshotVerifyCommand) Synopsis() string { return "Read a snapshot end to end and check it" }
func (c *snapshotVerifyCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad snapshot verify -config FILE NAME|latest

  Decrypts, decompresses and checks a snapshot: its metadata's MAC (keyed
  from ETCD_NOMAD_CA_KEK), size and sha256 against its record, and etcd's
  own trailing hash. Exits 1 on any mismatch.`)
}

func (c *snapshotVerifyCommand) Run(args []string) int {
	ctx, cancel := signalContext()
	defer cancel()
	env, fs, ok := loadSnapshotEnv(ctx, c.ui, newClusterFlags("snapshot verify"), args, c.Help())
	if !ok || fs.NArg() != 1 {
		if ok {
			c.ui.Error(c.Help())
		}
		return 1
	}
	name, err := resolveName(ctx, c.ui, env, fs.Arg(0))
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	m, err := snapshot.Verify(ctx, env.store, name, env.enc, progressPrinter(c.ui, "verified"))
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	c.ui.Output(fmt.Sprintf("%s: OK (revision %d, %s, sha256 %s)", name, m.Revision, humanize.IBytes(uint64(m.Size)), m.SHA256))
	return 0
}

type snapshotRestoreCommand struct{ ui cli.Ui }

func (c *snapshotRestoreCommand) Synopsis() string {
	return "Seed a new incarnation of the cluster from a snapshot"
}
func (c *snapshotRestoreCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad snapshot restore -config FILE -member NAME [-revision-bump N] [-no-deltas]
           [-accept-data-loss] [-accept-unauthenticated] [-accept-unauthenticated-deltas D,...] NAME|latest

  Seeds a new incarnation of the cluster from a snapshot, on member NAME,
  which must be stopped: the snapshot is fetched and verified (its MAC,
  sha256 and etcd's hash), the member's current data is set aside (never deleted), a
  new data dir is restored with a new cluster token and revisions bumped
  (and marked compacted) so that watchers never see revisions go back, and
  the cluster record moves to the next epoch. The delta segments recorded
  after the snapshot (continuous backup) are replayed over it, verified
  and read back, before the record moves. When the member starts it runs
  the restored data; the other members set their data aside and join as
  learners.

Options:
  -member NAME       the member that seeds (static provider name)
  -revision-bump N   added to every revision; by default derived from the
                     write rate between the store's snapshots and the
                     snapshot's age (4 x rate x age, at least 1000000)
  -no-deltas         restore the full snapshot alone, without the deltas
                     recorded after it
  -accept-unauthenticated
                     restore the snapshot NAME (never latest) without a
                     MAC: written before snapshots were authenticated, or by
                     a member without ETCD_NOMAD_CA_KEK. Only if you know
                     where it came from: anyone who can write the store can
                     write one. A MAC that does not verify is refused all
                     the same. Deltas without a MAC after it are not taken
                     with it
  -accept-unauthenticated-deltas NAME[,NAME...]
                     the deltas without a MAC after the snapshot NAME (never
                     latest) that you vouch for, by name (the refusal lists
                     them)
  -accept-data-loss  restore although deltas of the snapshot that do not
                     authenticate hold revisions past the chain end it
                     reaches: not replayed (without it the command refuses,
                     listing them); or although the store holds a newer
                     genuine snapshot of another incarnation than the
                     cluster record's (taken only by its name), or, for a
                     snapshot NAME, a newer object that does not
                     authenticate

  With tls auto and a coordinator other than local, every snapshot
  command needs ETCD_NOMAD_CA_KEK (nomad var get -item ca_kek
  nomad/jobs/JOB): without it a snapshot without a MAC would read as
  genuine.`)
}

func (c *snapshotRestoreCommand) Run(args []string) int {
	ctx, cancel := signalContext()
	defer cancel()
	fs := newClusterFlags("snapshot restore")
	member := fs.String("member", "", "")
	bump := fs.Uint64("revision-bump", 0, "")
	noDeltas := fs.Bool("no-deltas", false, "")
	accept := fs.Bool("accept-unauthenticated", false, "")
	acceptDeltas := fs.String("accept-unauthenticated-deltas", "", "")
	acceptLoss := fs.Bool("accept-data-loss", false, "")
	env, fs, ok := loadSnapshotEnv(ctx, c.ui, fs, args, c.Help())
	if !ok || fs.NArg() != 1 || *member == "" {
		if ok {
			c.ui.Error(c.Help())
		}
		return 1
	}
	acc := acceptance{snapshot: *accept, deltas: *acceptDeltas, loss: *acceptLoss, noDeltas: *noDeltas}
	if err := restore(ctx, c.ui, env, *member, fs.Arg(0), *bump, acc); err != nil {
		c.ui.Error("restore: " + err.Error())
		return 1
	}
	return 0
}

func restore(ctx context.Context, ui cli.Ui, env *snapshotEnv, member, name string, bump uint64, acc acceptance) error {
	cl := env.cl
	insts, err := backends.Instances(ctx, cl)
	if err != nil {
		return err
	}
	var peerURL string
	scheme := "https"
	if cl.TLS.Mode == config.TLSOff {
		scheme = "http"
	}
	for _, in := range insts {
		if in.Name == member {
			peerURL = in.PeerURL(scheme)
		}
	}
	if peerURL == "" {
		return fmt.Errorf("member %q is not among the provider's instances", member)
	}
	bc, err := backends.OpenClient(cl)
	if err != nil {
		return err
	}
	// What the members' data and metadata name: the new epoch goes
	// above it (planner.HandRestoreEpoch; review rev18c N3), this
	// member's own data dir included, which the restore sets aside.
	// Without the members' answers nothing says that the member is
	// stopped, nor which epochs the others hold: not restoring (review
	// rev19d W2).
	st, err := status.Gather(ctx, bc)
	if err != nil {
		return fmt.Errorf("gather the members' status (to check that %s is stopped and which epochs the others hold): %w; not restoring", member, err)
	}
	var (
		answered []planner.PeerStatus
		silent   []string
	)
	for _, m := range st.Members {
		if m.Name == member && m.Running {
			return fmt.Errorf("member %s is running: stop it first (its data is set aside, never overwritten under a running etcd)", member)
		}
		switch {
		case m.Unreachable || m.MetaError != "":
			// A member whose metadata or data dir cannot be read holds
			// data in an unknown state: silent, as the planner takes it
			// (task's peerStatuses), never empty (review rev19g H2: its
			// epoch went unseen and the restore recorded it again).
			if m.Name != member {
				silent = append(silent, m.Name)
			}
		case m.Cluster != "" && m.Cluster != cl.Name:
			// Another cluster's member at a stale address: its
			// epochs are not this cluster's (review rev19d W1).
		default:
			answered = append(answered, planner.PeerStatus{Name: m.Name, Token: m.Token, Epoch: m.Epoch, MetaEpoch: m.MetaEpoch})
		}
	}
	sort.Strings(silent)
	// With no record, a silent member may hold data of the epoch the
	// restore would record (Consul lost that record): two incarnations
	// of one epoch once it answers again, and its data set aside unasked
	// (review rev19d W2; invariant 8: the automatic path waits for every
	// instance without a record).
	silentWithoutRecord := func(exists bool) error {
		if exists || len(silent) == 0 || acc.loss {
			return nil
		}
		return fmt.Errorf("there is no cluster record and member(s) %s do not answer: they may hold data of a newer epoch than the restore would record; bring them back, or run again with -accept-data-loss to restore all the same (their data is set aside when they come back, not deleted)", strings.Join(silent, ", "))
	}
	if err := silentWithoutRecord(st.ClusterID != "(none yet)"); err != nil {
		return err
	}
	if meta, err := (datadir.Dir{Root: filepath.Join(cl.DataDir, member)}).ReadMeta(); err == nil && (meta.Cluster == cl.Name || meta.Cluster == "") {
		// Its data's epoch or, without data, its metadata's: either way
		// an epoch whose record existed (the backend is not opened: the
		// member's etcd may hold it).
		answered = append(answered, planner.PeerStatus{Name: member, MetaEpoch: meta.Epoch})
	}
	all, err := env.store.List(ctx)
	if err != nil {
		return err
	}
	// The record's lineage, for "latest" and a warning on a snapshot of
	// another incarnation named.
	lineage, err := recordLineage(ctx, cl)
	if err != nil {
		return err
	}
	full, _, err := chooseRestore(ui, all, &env.enc, lineage, name, acc)
	if err != nil {
		return err
	}
	latest := name == "latest"
	name = full.Name
	co, err := backends.Coordinator(cl)
	if err != nil {
		return err
	}
	var (
		l      coord.Lock
		rec    coord.Record
		exists bool
		token  = coord.NewToken()
		epoch  uint64
	)
	defer func() {
		if l != nil {
			l.Unlock(context.Background())
		}
	}()
	// Once the snapshot is fetched and verified: the revision bump, then
	// the next epoch under the lock, which holds until it is recorded.
	next := func(m snapshot.Meta) (datadir.Incarnation, error) {
		if bump == 0 {
			list, err := env.store.List(ctx)
			if err != nil {
				return datadir.Incarnation{}, fmt.Errorf("list snapshots to derive the revision bump (or give -revision-bump): %w", err)
			}
			bump = snapshot.RevisionBump(m, list, time.Now())
			rate, measured := snapshot.WriteRate(list)
			how := fmt.Sprintf("%.0f writes/s measured between snapshots", rate)
			if !measured {
				how = fmt.Sprintf("no rate measurable from the store, %.0f writes/s assumed", snapshot.AssumedWriteRate)
			}
			ui.Output(fmt.Sprintf("revision bump %d: snapshot %s old, %s", bump, time.Since(m.Created).Round(time.Second), how))
		}
		lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
		defer lcancel()
		var err error
		if l, err = co.Lock(lctx, "etcd-nomad-restore"); err != nil {
			return datadir.Incarnation{}, fmt.Errorf("take the cluster lock: %w", err)
		}
		rec, err = co.Record(ctx)
		if err != nil && !errors.Is(err, coord.ErrNoRecord) {
			return datadir.Incarnation{}, err
		}
		exists = err == nil
		if err := silentWithoutRecord(exists); err != nil {
			return datadir.Incarnation{}, err
		}
		if now := (snapshot.Lineage{ClusterID: rec.ClusterID, Epoch: rec.Epoch}); latest && !now.Of(m) {
			// The record moved on since "latest" was chosen: it is no
			// longer of its lineage.
			return datadir.Incarnation{}, fmt.Errorf("%s: the cluster record changed since \"latest\" was chosen; run it again", now.WhyNot(m))
		}
		if epoch, err = planner.HandRestoreEpoch(&rec, m.Epoch, answered); err != nil {
			return datadir.Incarnation{}, fmt.Errorf("record epoch %d, highest_epoch %d, snapshot epoch %d: %w; not restoring", rec.Epoch, rec.HighestEpoch, m.Epoch, err)
		}
		return datadir.Incarnation{Cluster: cl.Name, Name: member, PeerURL: peerURL, Token: token, Epoch: epoch, RevisionBump: bump}, nil
	}
	ui.Output("fetching and verifying " + name)
	src := datadir.Source{Store: env.store, Encryption: env.enc, Name: name, NoDeltas: acc.noDeltas, Progress: progressPrinter(ui, "fetched")}
	got, err := datadir.InstallNextEpoch(ctx, filepath.Join(cl.DataDir, member), src, next, "restored-over")
	if n := len(got.Chain); n > 0 {
		ui.Output(fmt.Sprintf("%d deltas after it, to revision %d", n, got.Chain[n-1].Revision))
	}
	if got.Gap {
		ui.Warn("the delta chain has a gap: changes after it are not replayed")
	}
	if got.Aside != "" {
		ui.Output("set aside the member's previous data: " + got.Aside)
	}
	if err != nil {
		return err
	}
	res, m := got.Replay, got.Snapshot
	if res.Segments > 0 {
		ui.Output(fmt.Sprintf("replayed %d deltas: %d events in %d transactions, %d keys read back, to revision %d", res.Segments, res.Events, res.Txns, res.Keys, res.Last))
	}
	if res.Stopped != "" {
		ui.Warn("the replay stopped early: " + res.Stopped)
	}
	newRec := planner.Record{Token: token, Epoch: epoch, Seeder: member, Source: planner.SnapshotSource(name),
		LastConfirmedToken: rec.LastConfirmedToken, LastConfirmedEpoch: rec.LastConfirmedEpoch, ByHand: true, Index: rec.Index}
	if rec.ClusterID != 0 {
		newRec.LastConfirmedToken, newRec.LastConfirmedEpoch = rec.Token, rec.Epoch
	}
	if exists {
		_, err = co.UpdateRecord(ctx, l, newRec)
	} else {
		_, err = co.CreateRecord(ctx, l, newRec)
	}
	if err != nil {
		return fmt.Errorf("record epoch %d: %w", epoch, err)
	}
	ui.Output(fmt.Sprintf("restored %s (revision %d, bumped by %d) on %s as epoch %d; start %s: the other members will set their data aside and join it as learners", name, m.Revision, bump, member, epoch, member))
	return nil
}
