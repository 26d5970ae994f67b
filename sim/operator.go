package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// The operator: etcd-nomad's commands as actions of the model, each
// through the pure fence the command applies (cmd/etcd-nomad pause.go,
// recover.go, tls.go):
//
//   - pause / resume: the pause in Consul KV that every member's planner
//     obeys (planner's paused);
//   - recover -from MEMBER [-accept-data-loss]: under a free lock, the
//     record and every listed instance's /status, planner.OperatorRecovery,
//     the record written;
//   - recover -from snapshot:NAME|latest [-member M] [-accept-data-loss]:
//     the snapshot and its chain fetched and verified first (a read error
//     refuses, nothing recorded, as datadir.VerifyInstall does in $TMPDIR;
//     so does a chain short of its listed end, a damaged segment, unless
//     -accept-data-loss: then the snapshot is restored up to its verified
//     end), then the same under the lock with
//     planner.OperatorSnapshotRecovery, the restorer by default
//     planner.Restorer;
//   - recover -keep-running: under a free lock, the record and every
//     listed instance's /status, planner.OperatorKeepRunning, the record
//     of the running cluster written;
//   - tls rotate-ca: see rotation.go (planner.RotationPhaseDone,
//     RotationNext, and the members' planner.FollowRotation).
//
// An impatient operator runs one at any step of the fault phase
// (Config.OperatorRate), with a random member, snapshot and
// -accept-data-loss: the fences must keep every invariant whatever it
// runs. And when a run ends stuck for an operator, the operator reads
// what the product says (every instance's /status, the store's
// snapshots) and takes the way out (wayOut); the run then gets a second
// quiet phase that must end healthy. A command run with -accept-data-loss
// loses only the writes of the members its refusal without it named
// (planner.LossError) beyond its source: the write check excuses those
// and no other (acceptedLoss).
//
// The operator reaches every process on partition side 0 that is not
// stalled; its command runs in one step (under the lock, nothing comes
// between its reads and its compare-and-set write).
type operator struct {
	rng *rand.Rand
	// recorded counts the impatient operator's commands that wrote a
	// record or a pause.
	recorded int
	// accepted are the losses the operator accepted (-accept-data-loss).
	accepted []acceptedLoss
	// lossSeen: the write check excused a loss the operator accepted.
	lossSeen bool
	// wayOut is the command the operator ran once the run was stuck;
	// noWayOut why none applied.
	wayOut, noWayOut, wayOutFor string
	// pauseSeq numbers pauses: a scheduled resume lifts only its own.
	pauseSeq int
	// rotating: a 'tls rotate-ca' runs (rotation.go).
	rotating bool
	// rotated counts the CA rotations the operator's command completed.
	rotated int
	// resumed: the way out began with a resume (a pause Consul's restore
	// brought back); the operator looks again after it.
	resumed bool
}

// acceptedLoss is one member's data an operator's recovery set aside with
// -accept-data-loss: the writes of br up to rev beyond what the source
// (src at srcRev) holds are the operator's to lose.
type acceptedLoss struct {
	member string
	br     *branch
	rev    int64
	src    *branch
	srcRev int64
}

// operatorView is what the recover command reads under the lock: the
// record and the /status of every instance the provider lists.
func (w *World) operatorView() planner.OperatorView {
	var v planner.OperatorView
	if r := w.coord.record; r != nil {
		rc := *r
		v.Record = &rc
	}
	for _, n := range w.listed() {
		if !w.operatorReaches(n) {
			v.Silent = append(v.Silent, n.name)
			continue
		}
		v.Answered = append(v.Answered, w.status(n))
	}
	// As the command's storeView: the newest of the record's lineage,
	// the highest epoch in the store, and the newest outside the
	// lineage (Beyond). AnyLineage (or OperatorSeesAll) gives the
	// newest of all as Latest, as the model did before review rev18c
	// N4.
	lineage := func(s *snapshot) bool {
		return v.Record == nil || w.cfg.Defects.AnyLineage || w.cfg.Defects.OperatorSeesAll || ofLineage(v.Record, s)
	}
	if i := w.newest(lineage); i >= 0 {
		s := &w.store[i]
		v.Latest = &planner.SnapshotInfo{Name: s.name, Revision: s.chainEnd(nil), Epoch: s.epoch}
	}
	if i := w.newest(func(s *snapshot) bool { return !lineage(s) }); i >= 0 {
		s := &w.store[i]
		v.Beyond = &planner.SnapshotInfo{Name: s.name, Revision: s.chainEnd(nil), Epoch: s.epoch, ClusterID: s.clusterID}
	}
	for i := range w.store {
		v.SnapshotEpoch = max(v.SnapshotEpoch, w.store[i].epoch)
	}
	w.nextID++
	v.NewToken = "tok" + itoa(int(w.nextID))
	return v
}

func (w *World) operatorReaches(n *node) bool {
	return n.up && n.side == 0 && w.now >= n.stalledUntil
}

var errLockHeld = errors.New("take the cluster lock: held by a member (the command waits, then gives up)")

// opRecoverFrom is 'etcd-nomad recover -from MEMBER': it returns what it
// recorded, or the fence's refusal.
func (w *World) opRecoverFrom(from string, accept bool) (string, error) {
	if w.coord.holder != nil {
		return "", errLockHeld
	}
	v := w.operatorView()
	v.From, v.AcceptLoss = from, accept
	fence := w.cfg.Defects.Planner.OperatorRecovery
	rec, err := fence(v)
	if err != nil {
		return "", err
	}
	src := w.byName[from]
	if accept && src != nil && src.data != nil {
		v.AcceptLoss = false
		w.acceptLoss(v, fence, src.data.branch, src.data.rev)
	}
	w.setRecord(rec)
	return fmt.Sprintf("recorded epoch %d %s: a recovery from %s's data (token %s epoch %d)%s", rec.Epoch, rec.Token, from, rec.LastConfirmedToken, rec.LastConfirmedEpoch, acceptFlag(accept)), nil
}

// opRecoverSnapshot is 'etcd-nomad recover -from snapshot:NAME' (name
// "latest": the newest, snapshot.Later) with -member member ("" for the
// default).
func (w *World) opRecoverSnapshot(name, member string, accept bool) (string, error) {
	i := -1
	if name == "latest" {
		i = w.newest(func(*snapshot) bool { return true })
	} else {
		for j := range w.store {
			if w.store[j].name == name {
				i = j
			}
		}
	}
	if i < 0 {
		return "", fmt.Errorf("the store holds no full snapshot %q", name)
	}
	s := &w.store[i]
	// verifyRestore: the snapshot and its whole chain, fetched, verified
	// and replayed in $TMPDIR before anything is recorded.
	if k := len(s.chain); k > 0 && w.op.rng.IntN(100) < readErrorPct {
		return "", fmt.Errorf("fetch delta %s: read error: not restorable, nothing recorded", s.chain[w.op.rng.IntN(k)].name)
	}
	end, damaged := s.verifiedEnd(nil)
	if listed := s.chainEnd(nil); end < listed && (!accept || w.cfg.Defects.OperatorShortChainRefused) {
		return "", fmt.Errorf("delta %s of snapshot %s fails its checksum: the chain verifies up to revision %d, not %d: nothing recorded", damaged, s.name, end, listed)
	}
	if w.coord.holder != nil {
		return "", errLockHeld
	}
	v := w.operatorView()
	v.Snapshot, v.AcceptLoss, v.From = &planner.SnapshotInfo{Name: s.name, Revision: end, Epoch: s.epoch}, accept, member
	if v.From == "" {
		v.From = planner.Restorer(v)
	}
	fence := w.cfg.Defects.Planner.OperatorSnapshotRecovery
	rec, err := fence(v)
	if err != nil {
		return "", err
	}
	if accept {
		v.AcceptLoss = false
		w.acceptLoss(v, fence, s.branch, end)
		if listed := s.chainEnd(nil); end < listed {
			// The command warned: the chain verifies only up to end,
			// the changes after it are lost (-accept-data-loss). They
			// are the operator's to lose wherever a copy of them lies,
			// a set-aside copy included, which no command sees (sim
			// seed 121: an earlier restore set aside the data that held
			// them, then a segment of its chain was damaged).
			w.op.accepted = append(w.op.accepted, acceptedLoss{member: "snapshot " + s.name + "'s damaged chain", br: s.branch, rev: listed, src: s.branch, srcRev: end})
			w.logf("operator", "  accepts losing snapshot %s's chain beyond its verified end %d (listed %d)", s.name, end, listed)
		}
	}
	w.setRecord(rec)
	return fmt.Sprintf("recorded epoch %d %s: a recovery from snapshot %s (revision %d) restored by %s%s", rec.Epoch, rec.Token, s.name, end, rec.Seeder, acceptFlag(accept)), nil
}

// opKeepRunning is 'etcd-nomad recover -keep-running'.
func (w *World) opKeepRunning() (string, error) {
	if w.coord.holder != nil {
		return "", errLockHeld
	}
	rec, err := w.cfg.Defects.Planner.OperatorKeepRunning(w.operatorView())
	if err != nil {
		return "", err
	}
	w.setRecord(rec)
	return fmt.Sprintf("recorded the running cluster %x (token %s epoch %d)", rec.ClusterID, rec.Token, rec.Epoch), nil
}

func acceptFlag(accept bool) string {
	if accept {
		return " (-accept-data-loss)"
	}
	return ""
}

// acceptLoss notes the losses an operator accepts: the members the fence
// names when run without -accept-data-loss (v), with the content their
// data holds now, beyond the source's (src at srcRev).
func (w *World) acceptLoss(v planner.OperatorView, fence func(planner.OperatorView) (planner.Record, error), src *branch, srcRev int64) {
	_, err := fence(v)
	var le *planner.LossError
	if !errors.As(err, &le) {
		return
	}
	for _, name := range le.Members {
		n := w.byName[name]
		if n == nil || n.data == nil || !n.data.wal || n.data.branch == nil {
			continue
		}
		w.op.accepted = append(w.op.accepted, acceptedLoss{member: name, br: n.data.branch, rev: n.data.rev, src: src, srcRev: srcRev})
		w.logf("operator", "  accepts losing %s's writes (revision %d) beyond the source's %d", name, n.data.rev, srcRev)
	}
	for _, name := range le.Snapshots {
		for i := range w.store {
			if s := &w.store[i]; s.name == name {
				end, _ := s.verifiedEnd(nil)
				w.op.accepted = append(w.op.accepted, acceptedLoss{member: "snapshot " + name, br: s.branch, rev: end, src: src, srcRev: srcRev})
				w.logf("operator", "  accepts losing snapshot %s's writes (revision %d) beyond the source's %d", name, end, srcRev)
			}
		}
	}
	if name, ok := v.Record.Source.Snapshot(); ok && le.ReplacedRevision > 0 {
		// The replaced record's restore was verified to
		// ReplacedRevision: its writes up to there (in whatever copy
		// holds them now, its seeder's set-aside data) beyond the source
		// (sim seed 121).
		for i := range w.store {
			if s := &w.store[i]; s.name == name {
				w.op.accepted = append(w.op.accepted, acceptedLoss{member: "the replaced restore of " + name, br: s.branch, rev: le.ReplacedRevision, src: src, srcRev: srcRev})
				w.logf("operator", "  accepts losing the replaced restore of %s's writes (revision %d) beyond the source's %d", name, le.ReplacedRevision, srcRev)
			}
		}
	}
}

// lossAccepted reports whether every write of b in (have, exists] is one
// an operator accepted to lose: each accepted loss covers the writes of b
// its member's data held beyond its source.
func (w *World) lossAccepted(b *branch, have, exists int64) bool {
	cur := have
	for cur < exists {
		next := cur
		for _, a := range w.op.accepted {
			if lo, hi := level(a.src, a.srcRev, b), level(a.br, a.rev, b); lo <= cur && hi > next {
				next = hi
			}
		}
		if next == cur {
			return false
		}
		cur = next
	}
	w.op.lossSeen = true
	return true
}

// opPause is 'etcd-nomad pause'; the impatient operator resumes after a
// while (its resume lifts only this pause).
func (w *World) opPause(resumeAfter time.Duration) string {
	w.op.pauseSeq++
	seq := w.op.pauseSeq
	w.coord.pause = fmt.Sprintf("operator pause %d", seq)
	w.schedule(resumeAfter, "operator resume", func(w *World) string {
		if w.coord.pause != fmt.Sprintf("operator pause %d", seq) {
			return "pause already lifted"
		}
		w.coord.pause = ""
		return "etcd-nomad resume: pause lifted"
	})
	return fmt.Sprintf("etcd-nomad pause: %s (resume in %s)", w.coord.pause, fmtDur(resumeAfter))
}

// impatient runs a command at random, at any step of the fault phase.
func (w *World) impatient() {
	if w.cfg.NoOperator || w.quiet || w.cfg.OperatorRate < 0 || w.op.rng.Float64() >= w.cfg.OperatorRate {
		return
	}
	r := w.op.rng
	accept := r.IntN(4) == 0
	var what string
	var err error
	switch k := r.IntN(100); {
	case k < 20:
		what = w.opPause(time.Duration(5+r.IntN(56)) * time.Second)
	case k < 25:
		if w.coord.pause == "" {
			return
		}
		w.coord.pause, what = "", "etcd-nomad resume: pause lifted"
	case k < 35:
		if !w.cfg.RotateCA {
			return
		}
		what = w.opRotateCA()
	case k < 55 && k >= 50:
		what, err = w.opKeepRunning()
		what = "recover -keep-running: " + errOr(err, what)
	case k < 60:
		var names []string
		for _, n := range w.listed() {
			names = append(names, n.name)
		}
		if len(names) == 0 {
			return
		}
		from := names[r.IntN(len(names))]
		what, err = w.opRecoverFrom(from, accept)
		what = "recover -from " + from + ": " + errOr(err, what)
	default:
		if len(w.store) == 0 {
			return
		}
		name := "latest"
		if r.IntN(3) == 0 {
			name = w.store[r.IntN(len(w.store))].name
		}
		member := ""
		if l := w.listed(); len(l) > 0 && r.IntN(2) == 0 {
			member = l[r.IntN(len(l))].name
		}
		what, err = w.opRecoverSnapshot(name, member, accept)
		what = "recover -from snapshot:" + name + ": " + errOr(err, what)
	}
	if err == nil {
		w.op.recorded++
	}
	w.logf("operator", "impatient: %s", what)
}

// wayOut is the operator's answer to a run stuck for an operator (why):
// read every instance's /status and the store's listing, then recover
// from the highest revision known — the members holding data (learners
// cannot seed) and the newest snapshot with its chain, highest revision
// first — the first the fence accepts; if every one is refused, the same
// again with -accept-data-loss (the refusal named what is lost). ok is
// false when no command applies (what says why each was refused).
func (w *World) wayOut(why string) (what string, ok bool) {
	if w.coord.pause != "" {
		// status says PAUSED: resume first, and see.
		w.coord.pause = ""
		w.logf("operator", "etcd-nomad resume (stuck: %s)", why)
		return "etcd-nomad resume", true
	}
	type option struct {
		rev  int64
		name string
		run  func(accept bool) (string, error)
	}
	var opts []option
	for _, n := range w.listed() {
		st := w.status(n)
		if !w.operatorReaches(n) || st.Token == "" || st.Learner {
			continue
		}
		name := n.name
		opts = append(opts, option{st.Revision, "recover -from " + name, func(accept bool) (string, error) { return w.opRecoverFrom(name, accept) }})
	}
	if i := w.newest(func(*snapshot) bool { return true }); i >= 0 {
		opts = append(opts, option{w.store[i].chainEnd(nil), "recover -from snapshot:latest", func(accept bool) (string, error) { return w.opRecoverSnapshot("latest", "", accept) }})
	}
	sort.SliceStable(opts, func(i, j int) bool { return opts[i].rev > opts[j].rev })
	var refused []string
	// A cluster that runs with a quorum beside a record that never
	// started: keep it (recover -from refuses beside a quorum).
	did, err := w.opKeepRunning()
	if err == nil {
		w.logf("operator", "way out (stuck: %s): recover -keep-running: %s", why, did)
		return "recover -keep-running", true
	}
	refused = append(refused, "recover -keep-running: "+err.Error())
	for _, accept := range []bool{false, true} {
		for _, o := range opts {
			did, err := o.run(accept)
			for try := 1; err != nil && strings.Contains(err.Error(), "read error") && try < 5; try++ {
				did, err = o.run(accept) // the store failed for a moment: run it again
			}
			if err == nil {
				w.logf("operator", "way out (stuck: %s): %s: %s", why, o.name, did)
				return o.name + acceptFlag(accept), true
			}
			refused = append(refused, o.name+acceptFlag(accept)+": "+err.Error())
		}
	}
	if len(opts) == 0 {
		refused = append(refused, "no member holds data and the store holds no snapshot")
	}
	w.logf("operator", "no way out (stuck: %s): %s", why, strings.Join(refused, "; "))
	return strings.Join(refused, "; "), false
}
