package backup

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Pruning what was set aside: data is renamed into
// aside/, never deleted on the spot (invariant 7), and Nomad's sticky,
// migrating disk carries a member's directory, and any sibling left by an
// earlier allocation, to every replacement. Without a bound the disk fills.
//
// The rule, applied only while this member runs as a healthy voter of the
// confirmed incarnation the record names, with a healthy quorum (the
// cluster then holds a newer copy of everything its own history holds):
//
//  1. A sibling directory beside this member's (an earlier allocation's,
//     carried along) of this cluster, whose owner is no live instance,
//     whose WAL no etcd holds, and whose member is no longer in the
//     membership (or whose incarnation is not the running one), is moved
//     into aside/ ("carried-NAME"), renamed, not deleted.
//  2. An aside is deleted only when it is not among the asideKeepNewest
//     newest, its metadata is readable, its epoch is not newer than the
//     record's, and a newer copy of its incarnation (cluster, token,
//     epoch) stays: a kept aside of the same incarnation with a higher
//     revision (or as high, set aside later), or, for the running
//     incarnation, this member's own caught-up data.
//
// So the newest copy of every incarnation this member has held stays, and
// so do unreadable asides and the newest asideKeepNewest whatever they
// are: what remains is bounded by asideKeepNewest plus one per incarnation
// (each recovery, or foreign cluster, adds one). An operator deletes those
// by hand when sure.

// asideKeepNewest asides are always kept.
const asideKeepNewest = 2

// asidePruneEvery paces pruning.
const asidePruneEvery = 10 * time.Minute

// aside is one directory under aside/, as pruning sees it.
type aside struct {
	// Name sorts by the time the data was set aside (setAside).
	Name string
	// Meta is the incarnation its data belongs to; MetaOK false when it
	// cannot be read (such an aside is kept).
	Meta   datadir.Meta
	MetaOK bool
	// Revision is the backend's newest revision, 0 if unknown;
	// RevisionErr says why a backend that exists did not read (a corrupt
	// copy: its revision is unknown).
	Revision    int64
	RevisionErr error
}

type incarnationKey struct {
	cluster, token string
	epoch          uint64
}

func (a aside) key() incarnationKey {
	return incarnationKey{a.Meta.Cluster, a.Meta.Token, a.Meta.Epoch}
}

// expendableAsides returns the names of the asides rule 2 deletes, given
// the running incarnation run (confirmed, healthy: the caller checks).
func expendableAsides(asides []aside, run incarnationKey) []string {
	byAge := append([]aside(nil), asides...)
	sort.Slice(byAge, func(i, j int) bool { return byAge[i].Name > byAge[j].Name }) // newest first
	newest := map[incarnationKey]aside{}
	for _, a := range byAge {
		if !a.MetaOK || a.RevisionErr != nil {
			continue
		}
		if n, ok := newest[a.key()]; !ok || a.Revision > n.Revision {
			newest[a.key()] = a // by revision; on a tie the later set-aside (seen first) stays
		}
	}
	var out []string
	for i, a := range byAge {
		switch {
		case i < asideKeepNewest, !a.MetaOK, a.RevisionErr != nil:
			// A copy whose backend does not read (revision unknown) may
			// be the newest of its incarnation's writes: kept, as one
			// whose metadata does not read (invariant 7).
		case a.Meta.Cluster == run.cluster && a.Meta.Epoch > run.epoch:
			// Data of an epoch the record has not reached: never.
		case a.key() == run:
			out = append(out, a.Name) // the member's own data is the newer copy
		case newest[a.key()].Name != a.Name:
			out = append(out, a.Name)
		}
	}
	sort.Strings(out)
	return out
}

// readAsides lists dir's asides with their metadata and revision.
func readAsides(dir string) ([]aside, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []aside
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		a := aside{Name: e.Name()}
		a.Revision, a.RevisionErr = datadir.ReadBackendRevision(filepath.Join(p, "etcd"))
		if b, err := os.ReadFile(filepath.Join(p, datadir.MetaFile)); err == nil && json.Unmarshal(b, &a.Meta) == nil && a.Meta.Cluster != "" {
			a.MetaOK = true
		}
		out = append(out, a)
	}
	return out, nil
}

// StartPruneAsides applies the rule (SideJobs.PruneAsides: this member is a
// healthy voter of the confirmed incarnation) in the background, at most
// every asidePruneEvery: deleting a large directory must not hold the
// loop.
func (b *Backups) StartPruneAsides(o planner.Observation) {
	b.mu.Lock()
	if b.pruning || b.backgroundCtx.Err() != nil {
		b.mu.Unlock()
		return
	}
	b.pruning = true
	b.background.Add(1)
	b.mu.Unlock()
	b.nextAsidePrune = b.now().Add(asidePruneEvery)
	run := incarnationKey{b.cfg.Cluster, o.Record.Token, o.Record.Epoch}
	members, live := map[uint64]bool{}, map[string]bool{}
	for _, mem := range o.Members {
		members[mem.ID] = true
	}
	for _, in := range o.Instances {
		live[in.Name] = true // unknown allocations too: they may come back
	}
	go func() {
		defer b.background.Done()
		defer func() {
			b.mu.Lock()
			b.pruning = false
			b.mu.Unlock()
		}()
		if err := b.pruneAsides(run, func(n string) bool { return live[n] }, func(id uint64) bool { return members[id] }); err != nil {
			b.log.Warn("pruning set-aside data incomplete", "error", err)
		}
	}()
}

// pruneAsides applies rules 1 and 2 for the running incarnation run; the
// planner has allowed it (SideJobs.PruneAsides). live reports the provider's live instances
// by name, member whether a member id is in the membership.
func (b *Backups) pruneAsides(run incarnationKey, live func(string) bool, member func(uint64) bool) error {
	b.carrySiblingsAside(run, live, member)
	asides, err := readAsides(b.dir.AsideDir())
	if err != nil {
		return fmt.Errorf("list %s: %w", b.dir.AsideDir(), err)
	}
	b.asides.warnUnreadable(b.log, asides)
	var errs []error
	for _, name := range expendableAsides(asides, run) {
		p := filepath.Join(b.dir.AsideDir(), name)
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
			continue
		}
		b.log.Info("set-aside data deleted: a newer copy of its incarnation is kept", "dir", p)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d of the asides not deleted: %v", len(errs), errs)
	}
	return nil
}

// carrySiblingsAside is rule 1: the data of earlier members of this
// cluster, carried along beside this member's directory, goes into aside/.
func (b *Backups) carrySiblingsAside(run incarnationKey, live func(string) bool, member func(uint64) bool) {
	parent := filepath.Dir(b.dir.Root)
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || name == filepath.Base(b.dir.Root) || live(name) {
			continue
		}
		sib := datadir.Dir{Root: filepath.Join(parent, name)}
		meta, err := sib.ReadMeta()
		if err != nil || meta.Cluster != run.cluster || datadir.WALInUse(filepath.Join(sib.EtcdDir(), "member", "wal")) {
			continue // not ours to judge, or in use
		}
		if (incarnationKey{meta.Cluster, meta.Token, meta.Epoch}) == run && (meta.MemberID == 0 || member(meta.MemberID)) {
			continue // a member of the running cluster: the leader removes it first
		}
		if err := os.MkdirAll(b.dir.AsideDir(), 0o700); err != nil {
			return
		}
		dst := filepath.Join(b.dir.AsideDir(), time.Now().UTC().Format("20060102T150405.000000000Z")+"-carried-"+name)
		if err := os.Rename(sib.Current(), dst); err != nil {
			b.log.Warn("carried data not set aside", "dir", sib.Current(), "error", err)
			continue
		}
		b.log.Info("data carried from an earlier allocation set aside", "from", sib.Root, "to", dst)
		// Its own asides join this member's, under the same rule.
		olds, _ := os.ReadDir(sib.AsideDir())
		for _, old := range olds {
			if err := os.Rename(filepath.Join(sib.AsideDir(), old.Name()), filepath.Join(b.dir.AsideDir(), old.Name())); err != nil {
				b.log.Warn("carried aside not moved", "dir", old.Name(), "error", err)
			}
		}
		_ = os.Remove(sib.AsideDir())
		b.dropCarriedTLS(sib)
	}
}

// dropCarriedTLS removes what is left of a carried directory once its data
// went aside: its tls/, whose member certificate is re-issued at every
// start, when its saved cluster CA is absent or the same as this member's.
// A directory still holding anything else (another CA) stays.
func (b *Backups) dropCarriedTLS(sib datadir.Dir) {
	theirs, err := os.ReadFile(sib.CAFile())
	ours, oerr := os.ReadFile(b.dir.CAFile())
	if err == nil && (oerr != nil || string(theirs) != string(ours)) {
		b.log.Warn("carried directory kept: it holds another cluster CA", "dir", sib.Root)
		return
	}
	if err := os.RemoveAll(sib.TLSDir()); err != nil {
		return
	}
	if err := os.Remove(sib.Root); err != nil {
		b.log.Warn("carried directory not removed", "dir", sib.Root, "error", err)
	}
}
