package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/status"
)

type recoverCommand struct{ ui cli.Ui }

func (c *recoverCommand) Synopsis() string {
	return "Recover a cluster that lost its quorum from the member or the snapshot an operator chooses"
}

func (c *recoverCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad recover -config FILE -from MEMBER [-accept-data-loss]
       etcd-nomad recover -config FILE -from snapshot:NAME|snapshot:latest [-member MEMBER] [-accept-data-loss]
           [-accept-unauthenticated] [-accept-unauthenticated-deltas D,...]
       etcd-nomad recover -config FILE -keep-running [-accept-data-loss]

  Chooses the recovery source when automatic recovery is off
  (recovery_grace = "0s"), paused, or waiting for an operator: member
  MEMBER restarts as a one-member cluster from its own data
  (ForceNewCluster, etcd's cluster id kept) and the others set their data
  aside and join it as learners (after 'etcd-nomad resume' if paused).
  Refused, naming them, while members hold data of another incarnation
  that MEMBER's recovery would set aside and that may hold writes MEMBER
  lacks (an older epoch at a higher revision, another incarnation of
  MEMBER's epoch), unless -accept-data-loss; so too while the store's
  newest snapshot of the cluster record's lineage goes further than
  MEMBER's data, or an object members refuse (no MAC, a MAC that does not
  verify, or a genuine snapshot of another incarnation) reaches past
  MEMBER's revision. With the store not answering, -accept-data-loss
  recovers without comparing, and without raising the new epoch above
  the store's snapshots (the command says so).

  From a snapshot in the definition's store: member -member (by default
  the first answering instance by name) fetches and verifies it (sha256,
  etcd's hash, the delta segments recorded after it, replayed), restores
  it as the next epoch with a new cluster id, and the others set their
  data aside and join it. Unlike 'etcd-nomad snapshot restore', it works
  on members Nomad runs: the member restores it itself, at its next loop.
  Before anything is recorded the command does the same with the
  definition's keys, in $TMPDIR (as large as the database): a snapshot
  that fails its checksum or decryption, or a delta that cannot be read
  or fails its own, is refused, naming it, and nothing is recorded.
  Refused while any member holds data newer than the snapshot (recover
  from that member instead), or the store holds a newer snapshot (of the
  record's lineage, or a genuine one of another incarnation, which only
  its name restores), unless -accept-data-loss: that data is then set
  aside, never deleted.

  The fencing is the automatic path's: under the cluster lock, refused
  while any instance does not answer or any member answers as a healthy
  voter (a quorum), when MEMBER holds no data or a learner's, and when
  another member holds newer data (a newer epoch, or the same incarnation
  at a higher revision); the next epoch, above the record's, every
  member's and every snapshot's in the store that authenticates, is
  recorded (compare-and-set) before MEMBER restarts.

  With -keep-running: a cluster runs with a quorum beside a record of
  another incarnation that never started (Consul brought a recovery
  record back, or the old cluster got its quorum back after 'recover'
  recorded one), and every member waits for an operator. The record is
  rewritten to name the running cluster (its token, epoch and cluster
  id, confirmed), so that its members go on. Refused unless a quorum of
  the instances answers as healthy voters of one cluster and every
  instance answers, while the record is confirmed or names the running
  cluster, and while any member holds data of the recorded incarnation
  (it started) or of an epoch newer than the running one's. The record's
  seeder's data whose start began and never completed (it may hold
  writes acknowledged while it ran) is set aside with -accept-data-loss.

Options:
  -config FILE         cluster definition
  -keep-running        record the cluster that runs with a quorum in
                       place of an unconfirmed record of another
                       incarnation
  -from SOURCE         MEMBER, or snapshot:NAME (snapshot:latest: the newest)
  -member MEMBER       with a snapshot: the member that restores it
  -accept-data-loss    go ahead although members hold newer data (with a
                       snapshot) or another incarnation's data (with a
                       member): set aside, not deleted; with a snapshot,
                       also although deltas of it that do not authenticate
                       hold revisions past the chain end it reaches: not
                       replayed (without it the command refuses, listing
                       them)
  -accept-unauthenticated
                       with snapshot:NAME (never latest): take that snapshot
                       without a MAC, written before snapshots were
                       authenticated; once verified, its metadata is signed
                       in the store (with ETCD_NOMAD_CA_KEK) so that the
                       member restores it. Members never take an
                       unauthenticated snapshot on their own: this is the
                       way out when the store holds only such snapshots. A
                       MAC that does not verify is refused all the same.
                       Deltas without a MAC after it are not taken with it
  -accept-unauthenticated-deltas NAME[,NAME...]
                       with snapshot:NAME (never latest): the deltas without
                       a MAC after the snapshot that you vouch for, by name
                       (the refusal lists them), replayed and signed like
                       the snapshot

  With tls auto and a coordinator other than local, ETCD_NOMAD_CA_KEK must
  be set to restore a snapshot (nomad var get -item ca_kek nomad/jobs/JOB):
  without it a snapshot without a MAC would read as genuine.`)
}

func (c *recoverCommand) Run(args []string) int {
	fs := newClusterFlags("recover")
	from := fs.String("from", "", "")
	member := fs.String("member", "", "")
	acceptLoss := fs.Bool("accept-data-loss", false, "")
	acceptUnauth := fs.Bool("accept-unauthenticated", false, "")
	acceptDeltas := fs.String("accept-unauthenticated-deltas", "", "")
	keepRunning := fs.Bool("keep-running", false, "")
	cl := fs.load(c.ui, c.Help(), args, false)
	if cl == nil {
		return 1
	}
	if *from == "" && !*keepRunning {
		c.ui.Error(c.Help())
		return 1
	}
	ctx, cancel := signalContext()
	defer cancel()
	if *keepRunning {
		if *from != "" || *member != "" || *acceptUnauth || *acceptDeltas != "" {
			c.ui.Error("recover: -keep-running takes no source and no -accept flag but -accept-data-loss: it records the cluster that runs")
			return 1
		}
		rec, err := recordOperatorRecovery(ctx, cl, func(v planner.OperatorView) (planner.Record, error) {
			v.AcceptLoss = *acceptLoss
			return planner.OperatorKeepRunning(v)
		})
		if err != nil {
			c.ui.Error("recover -keep-running: " + err.Error())
			return 1
		}
		what := "in place of the record that never started"
		if rec.HighestEpoch > rec.Epoch {
			what = fmt.Sprintf("carrying epoch %d, whose data is set aside", rec.HighestEpoch)
		}
		c.ui.Output(fmt.Sprintf("recorded the running cluster %x (token %s epoch %d) %s; its members go on at their next loop",
			rec.ClusterID, shortToken(rec.Token), rec.Epoch, what))
		return 0
	}
	if name, ok := strings.CutPrefix(*from, planner.FromSnapshot+":"); ok {
		rec, err := operatorRestore(ctx, c.ui, cl, name, *member, acceptance{snapshot: *acceptUnauth, deltas: *acceptDeltas, loss: *acceptLoss})
		if err != nil {
			c.ui.Error("recover: " + err.Error())
			return 1
		}
		snap, _ := rec.Source.Snapshot()
		c.ui.Output(fmt.Sprintf("recorded epoch %d: a recovery from snapshot %s; %s restores it at its next loop (even while paused), the others set their data aside and join it as learners (after 'etcd-nomad resume' if paused)",
			rec.Epoch, snap, rec.Seeder))
		return 0
	}
	if *member != "" || *acceptUnauth || *acceptDeltas != "" {
		c.ui.Error("recover: -member, -accept-unauthenticated and -accept-unauthenticated-deltas go with -from snapshot:NAME")
		return 1
	}
	rec, err := operatorRecover(ctx, c.ui, cl, *from, *acceptLoss)
	if err != nil {
		c.ui.Error("recover: " + err.Error())
		return 1
	}
	c.ui.Output(fmt.Sprintf("recorded epoch %d: a recovery from %s's data (token %s epoch %d); %s restarts as a one-member cluster at its next loop, the others join it as learners",
		rec.Epoch, *from, shortToken(rec.LastConfirmedToken), rec.LastConfirmedEpoch, *from))
	return 0
}

// operatorRecover records an operator's recovery from member from, under
// the lock, after observing every instance (planner.OperatorRecovery).
// The store's newest snapshot of the record's lineage is compared with
// from's data: one that goes further may hold writes no member holds any
// more (sim seed 75 with the operator), and the command then asks for
// -accept-data-loss; so does an object members refuse (no MAC, a MAC that
// does not verify, or a genuine snapshot of no incarnation of the
// record's lineage) whose chain reaches past from's revision, beside
// which the automatic path waits (invariant 8). The new epoch is
// above every snapshot's that authenticates, of the lineage or not.
func operatorRecover(ctx context.Context, ui cli.Ui, cl *config.Cluster, from string, acceptLoss bool) (planner.Record, error) {
	all, kept, err := storeObjects(ctx, cl)
	if err != nil {
		if !acceptLoss {
			return planner.Record{}, fmt.Errorf("%w: the store's newest snapshot may hold writes %s lacks; run again with -accept-data-loss to recover without comparing", err, from)
		}
		ui.Warn(fmt.Sprintf("%v: recovering from %s without comparing it with the store's snapshots, as -accept-data-loss accepts; the new epoch is not raised above theirs either (the store did not say them): "+
			"a snapshot of a higher epoch stays the newest by epoch, and members restore it over this recovery's writes after a later quorum loss, until one of this epoch is saved", err, from))
		all, kept = nil, nil
	}
	return recordOperatorRecovery(ctx, cl, func(v planner.OperatorView) (planner.Record, error) {
		v.From, v.AcceptLoss = from, acceptLoss
		var of []snapshot.Meta
		v.Latest, v.SnapshotEpoch, of = storeView(v.Record, kept)
		if newer := refusedPast(all, of, v, from); newer != nil {
			what := fmt.Sprintf("the store holds %s (epoch %d, its chain reaching revision %d), which members refuse (%s): it may hold writes %s lacks, and the members' automatic recovery waits beside it",
				newer.Name, newer.Epoch, newer.Revision, refusedWhy(newer, kept, v.Record), from)
			if !acceptLoss && newer.Corrupt != "" {
				// Only its name is known (a delta's base is not): no
				// restore of it can be named.
				return planner.Record{}, fmt.Errorf("%s; nothing restores it without its metadata: if it is genuine, put its metadata back in the store and run again; if not, delete it (the object and its metadata); or run again with -accept-data-loss to recover from %s all the same (it stays in the store): nothing recorded",
					what, from)
			}
			if !acceptLoss {
				take := "recover -from snapshot:" + baseOf(*newer)
				if !slices.ContainsFunc(kept, func(k snapshot.Meta) bool { return k.Name == newer.Name }) {
					take += " with -accept-unauthenticated for a snapshot without a MAC and -accept-unauthenticated-deltas for its deltas without one (the command lists them)"
				}
				return planner.Record{}, fmt.Errorf("%s; if it is genuine, restore it by name (%s; 'etcd-nomad snapshot list' shows it), or run again with -accept-data-loss to recover from %s all the same (it stays in the store): nothing recorded",
					what, take, from)
			}
			ui.Warn(what + ": not taken, as -accept-data-loss accepts")
		}
		// The newest snapshot outside the lineage that authenticates:
		// the record carries what the command saw of it, or its seeder
		// waits for an operator again (planner laterWrites).
		v.Beyond = latestInfo(outside(kept, of))
		return planner.OperatorRecovery(v)
	})
}

// storeObjects lists the definition's store: every object, and those that
// authenticate (what the members would restore themselves); nil without
// a snapshot block.
func storeObjects(ctx context.Context, cl *config.Cluster) (all, kept []snapshot.Meta, err error) {
	if cl.Snapshot == nil {
		return nil, nil, nil
	}
	store, err := backends.StoreWithLog(ctx, cl, hclog.New(&hclog.LoggerOptions{Name: "snapshots", Level: hclog.Warn, Output: os.Stderr}))
	if err != nil {
		return nil, nil, err
	}
	all, err = store.List(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list snapshots: %w", err)
	}
	enc, err := backends.Encryption(cl)
	if err != nil {
		return nil, nil, err
	}
	kept, _ = enc.Authentic(all)
	return all, kept, nil
}

// storeView is what an operator's recovery under rec (the record read
// under the lock) is compared with among kept, the objects that
// authenticate: the objects of rec's lineage (snapshot.Lineage.Of) and
// the newest snapshot among them with its chain end (nil if none), which
// a source older than it needs -accept-data-loss beside and the
// operator is advised to restore; and the highest epoch of any of kept,
// of the lineage or not, which the new epoch is recorded above (invariant
// 9: a genuine snapshot the lineage calls foreign, of an
// incarnation that ran after a record Consul restored, would otherwise
// share the new epoch, and stay the newest by epoch over its writes).
func storeView(rec *planner.Record, kept []snapshot.Meta) (*planner.SnapshotInfo, uint64, []snapshot.Meta) {
	var epoch uint64
	for _, m := range kept {
		epoch = max(epoch, m.Epoch)
	}
	of := kept
	if rec != nil {
		of, _ = snapshot.Lineage{ClusterID: rec.ClusterID, Epoch: rec.Epoch}.Split(kept)
	}
	return latestInfo(of), epoch, of
}

// outside is the objects of kept not in of (those outside the record's
// lineage).
func outside(kept, of []snapshot.Meta) []snapshot.Meta {
	var out []snapshot.Meta
	for _, m := range kept {
		if !slices.ContainsFunc(of, func(o snapshot.Meta) bool { return o.Name == m.Name }) {
			out = append(out, m)
		}
	}
	return out
}

// refusedPast is the newest object of all members refuse (not in of: no
// MAC, a MAC that does not verify, or of no incarnation of the record's
// lineage) whose chain reaches past the revision of from's data, with
// that reach as its revision (newestRefusedAfter); nil if none, or when
// from holds no data (the planner says why not).
func refusedPast(all, of []snapshot.Meta, v planner.OperatorView, from string) *snapshot.Meta {
	for _, p := range v.Answered {
		if p.Name == from && p.Token != "" {
			return newestRefusedAfter(all, of, p.Revision, "")
		}
	}
	return nil
}

// refusedWhy says why members refuse m: it does not authenticate, or it
// does (in kept) and is of no incarnation of rec's lineage.
func refusedWhy(m *snapshot.Meta, kept []snapshot.Meta, rec *planner.Record) string {
	if m.Corrupt != "" {
		return "its metadata cannot be read: " + m.Corrupt
	}
	if slices.ContainsFunc(kept, func(k snapshot.Meta) bool { return k.Name == m.Name }) && rec != nil {
		return (snapshot.Lineage{ClusterID: rec.ClusterID, Epoch: rec.Epoch}).WhyNot(*m)
	}
	return "it does not authenticate: no MAC, or one that does not verify"
}

// baseOf is the snapshot an operator restores to take m: m, or a delta's
// base.
func baseOf(m snapshot.Meta) string {
	if m.Kind == snapshot.KindDelta {
		return m.Base
	}
	return m.Name
}

// latestInfo is the newest full snapshot of list with its chain end, nil
// when it holds none.
func latestInfo(list []snapshot.Meta) *planner.SnapshotInfo {
	full, _, end, ok := snapshot.Newest(list)
	if !ok {
		return nil
	}
	id, _ := strconv.ParseUint(full.ClusterID, 16, 64)
	return &planner.SnapshotInfo{Name: full.Name, Revision: end, Epoch: full.Epoch, ClusterID: id}
}

// operatorRestore records an operator's recovery from snapshot name
// ("latest": the newest), restored by member (by default the first
// answering instance by name), under the lock, after observing every
// instance (planner.OperatorSnapshotRecovery). Before anything is
// recorded, the snapshot and its delta chain are fetched, verified and
// replayed into a scratch copy the way the member installs them
// (datadir.VerifyInstall): a snapshot that fails its checksum or
// decryption, or a chain that cannot be fetched whole, is refused, so
// that no member is set aside for a restore that cannot complete or that
// would stop short of the chain end the recovery was compared at.
func operatorRestore(ctx context.Context, ui cli.Ui, cl *config.Cluster, name, member string, acc acceptance) (planner.Record, error) {
	if cl.Snapshot == nil {
		return planner.Record{}, fmt.Errorf("%s has no snapshot block: there is no store to restore from", cl.File)
	}
	if err := requireSnapshotKey(cl); err != nil {
		return planner.Record{}, err
	}
	store, err := backends.StoreWithLog(ctx, cl, hclog.New(&hclog.LoggerOptions{Name: "snapshots", Level: hclog.Warn, Output: os.Stderr}))
	if err != nil {
		return planner.Record{}, err
	}
	enc, err := backends.Encryption(cl)
	if err != nil {
		return planner.Record{}, err
	}
	if acc.any() && len(enc.MACKey) == 0 && cl.TLS.Mode == config.TLSAuto {
		return planner.Record{}, fmt.Errorf("-accept-unauthenticated signs what you accept so that the member restores it: set %s to the cluster's key (nomad var get -item %s nomad/jobs/JOB)", certs.KEKEnv, jobs.CAKEKKey)
	}
	all, err := store.List(ctx)
	if err != nil {
		return planner.Record{}, fmt.Errorf("list snapshots: %w", err)
	}
	// The record's lineage, for "latest" and a warning on a snapshot of
	// another incarnation named.
	lineage, err := recordLineage(ctx, cl)
	if err != nil {
		return planner.Record{}, err
	}
	full, end, err := chooseRestore(ui, all, &enc, lineage, name, acc)
	if err != nil {
		return planner.Record{}, err
	}
	if full.Cluster != "" && full.Cluster != cl.Name {
		return planner.Record{}, fmt.Errorf("snapshot %s is of cluster %q, not %q", full.Name, full.Cluster, cl.Name)
	}
	got, err := verifyRestore(ctx, ui, store, enc, full, end, acc.loss)
	if short := (*datadir.ChainShortError)(nil); errors.As(err, &short) {
		if a := gatherAsidesPast(ctx, cl, short.End); a != "" {
			err = fmt.Errorf("%w; %s", err, a)
		}
	}
	if err != nil {
		return planner.Record{}, err
	}
	if got.End < end {
		if a := gatherAsidesPast(ctx, cl, got.End); a != "" {
			ui.Warn(a)
		}
	}
	info := &planner.SnapshotInfo{Name: full.Name, Revision: got.End, Epoch: full.Epoch}
	// The newest the members would restore themselves: what authenticates.
	kept, _ := enc.Authentic(all)
	return recordOperatorRecovery(ctx, cl, func(v planner.OperatorView) (planner.Record, error) {
		// Of the record's lineage or not, as the record under the lock
		// has it (snapshot.Lineage.Of): another incarnation's snapshot,
		// which only a name takes, sets members' data aside only with
		// -accept-data-loss. The new epoch is above every snapshot's
		// that authenticates (storeView).
		judged := *info
		if v.Record != nil {
			judged.Foreign = !(snapshot.Lineage{ClusterID: v.Record.ClusterID, Epoch: v.Record.Epoch}).Of(full)
		}
		v.Snapshot, v.AcceptLoss, v.From = &judged, acc.loss, member
		v.Latest, v.SnapshotEpoch, _ = storeView(v.Record, kept)
		if v.From == "" {
			v.From = planner.Restorer(v)
		}
		next, err := planner.OperatorSnapshotRecovery(v)
		if err != nil || len(enc.AcceptNames) == 0 {
			return next, err
		}
		// The member installs it with its own key and no exception: the
		// operator's choice goes into the store as a MAC, once the
		// recovery is decided (a refused one changes nothing in the
		// store) and just before the record is written, under the lock.
		// Only what the operator named and was verified and replayed is
		// signed (the snapshot and the verified chain), deltas first
		// (snapshot.Adopt): a failure leaves the snapshot refused and
		// records nothing.
		var named []snapshot.Meta
		for _, m := range append([]snapshot.Meta{got.Snapshot}, got.Verified...) {
			if enc.AcceptNames[m.Name] {
				named = append(named, m)
			}
		}
		adopted, err := snapshot.Adopt(ctx, store, enc, named)
		if err != nil {
			return planner.Record{}, fmt.Errorf("%w: nothing recorded", err)
		}
		if len(adopted) > 0 {
			ui.Output(fmt.Sprintf("signed the metadata of %d unauthenticated object(s) you accepted: %s", len(adopted), strings.Join(adopted, ", ")))
		}
		return next, nil
	})
}

// verifyRestore fetches snapshot full and its chain, ending at revision
// end, into a scratch directory under $TMPDIR (as large as the database)
// and verifies them as the member that restores them will: all or refuse.
// With acceptLoss a chain that verifies short of end (a delta fails its
// checksum, and no overlapping one bridges it) is taken up to where it
// verifies furthest: the operator accepts losing what follows (else every
// snapshot with a damaged delta was out of the operator's reach: sim, a
// learner holding newer data than any source). It is verified for end
// first, then for that shorter end: a verification for "whatever
// verifies" never went around a damaged delta an overlapping one bridges,
// and lost the writes after it although the store held them (a restore
// is all or refuse).
func verifyRestore(ctx context.Context, ui cli.Ui, store snapshot.Store, enc snapshot.Encryption, full snapshot.Meta, end int64, acceptLoss bool) (datadir.Installed, error) {
	scratch, err := os.MkdirTemp("", "etcd-nomad-recover-")
	if err != nil {
		return datadir.Installed{}, err
	}
	defer os.RemoveAll(scratch)
	ui.Output(fmt.Sprintf("fetching and verifying snapshot %s and the deltas after it (to revision %d) before recording anything", full.Name, end))
	src := datadir.Source{Store: store, Encryption: enc, Name: full.Name, Want: end, Progress: progressPrinter(ui, "fetched")}
	got, err := datadir.VerifyInstall(ctx, filepath.Join(scratch, "etcd"), src)
	var short *datadir.ChainShortError
	if acceptLoss && errors.As(err, &short) && short.End < end {
		ui.Warn(fmt.Sprintf("%v; -accept-data-loss: verifying up to revision %d", err, short.End))
		src.Want = short.End
		got, err = datadir.VerifyInstall(ctx, filepath.Join(scratch, "etcd"), src)
	}
	if err != nil {
		if errors.As(err, &short) {
			return got, err // it says nothing was recorded
		}
		return got, fmt.Errorf("%w: not restorable, nothing recorded", err)
	}
	if n := len(got.Chain); n > 0 {
		ui.Output(fmt.Sprintf("verified snapshot %s (revision %d) and %d deltas after it, replayed to revision %d", full.Name, got.Snapshot.Revision, n, got.End))
	} else {
		ui.Output(fmt.Sprintf("verified snapshot %s (revision %d); no deltas after it", full.Name, got.Snapshot.Revision))
	}
	if got.Gap {
		ui.Warn("the delta chain has a gap: changes after it are not replayed")
	}
	if got.End < end {
		ui.Warn(fmt.Sprintf("the chain verifies only up to revision %d, not %d (%s): restoring up to revision %d, the changes after it are lost (-accept-data-loss)", got.End, end, got.Replay.Stopped, got.End))
	}
	return got, nil
}

// recordOperatorRecovery takes the cluster lock, observes the record and
// every instance under it (no member changes the record meanwhile), lets
// decide choose the next record from that view, and writes it
// (compare-and-set).
func recordOperatorRecovery(ctx context.Context, cl *config.Cluster, decide func(planner.OperatorView) (planner.Record, error)) (planner.Record, error) {
	co, err := backends.OpenClient(cl)
	if err != nil {
		return planner.Record{}, err
	}
	lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
	defer lcancel()
	l, err := co.Lock(lctx, "etcd-nomad-recover")
	if err != nil {
		return planner.Record{}, fmt.Errorf("take the cluster lock: %w", err)
	}
	defer l.Unlock(context.Background())
	cur, err := co.Record(ctx)
	var rec *planner.Record
	switch {
	case err == nil:
		rec = &cur
	case !errors.Is(err, coord.ErrNoRecord):
		return planner.Record{}, err
	}
	st, err := status.Gather(ctx, co)
	if err != nil {
		return planner.Record{}, err
	}
	v := planner.OperatorView{Record: rec, NewToken: coord.NewToken()}
	for _, m := range st.Members {
		if m.Unreachable {
			v.Silent = append(v.Silent, m.Name)
			continue
		}
		v.Answered = append(v.Answered, planner.PeerStatus{Name: m.Name, MemberID: m.MemberID, Token: m.Token, Epoch: m.Epoch,
			Running: m.Running, Learner: m.Learner, Healthy: m.Healthy, Revision: m.Revision, ClusterID: m.ClusterID, ForceNewPending: m.ForceNewPending, Unstarted: m.Unstarted, MetaEpoch: m.MetaEpoch})
	}
	next, err := decide(v)
	if loss := (*planner.LossError)(nil); errors.As(err, &loss) {
		if a := asidesPast(st.Members, cl.Name, loss.Revision); a != "" {
			err = fmt.Errorf("%w; %s", err, a)
		}
	}
	if err != nil {
		return planner.Record{}, err
	}
	next.Index = cur.Index
	if _, err := co.UpdateRecord(ctx, l, next); err != nil {
		return planner.Record{}, fmt.Errorf("record epoch %d: %w", next.Epoch, err)
	}
	return next, nil
}

// asidesPast names the copies of data members set aside (their /status)
// whose data reaches past rev: where the revisions a recovery to rev
// loses may still be (sim seed 121: m0's aside/ held 541..546 while the
// operator was told only the chain's shortfall). "" when none.
func asidesPast(members []status.Member, cluster string, rev int64) string {
	names := status.AsidesBeyond(members, cluster, rev)
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("copies of data set aside (renamed, not deleted) reach past revision %d and may hold the writes after it: %s", rev, strings.Join(names, ", "))
}

// gatherAsidesPast is asidesPast over every member's /status; "" when
// they cannot be asked (the refusal stands without it).
func gatherAsidesPast(ctx context.Context, cl *config.Cluster, rev int64) string {
	co, err := backends.OpenClient(cl)
	if err != nil {
		return ""
	}
	st, err := status.Gather(ctx, co)
	if err != nil {
		return ""
	}
	return asidesPast(st.Members, cl.Name, rev)
}

func shortToken(t string) string {
	if len(t) > 8 {
		return t[:8]
	}
	return t
}
