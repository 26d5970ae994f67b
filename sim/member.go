package sim

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// action is one step of carrying a decision out (task/act.go): a crash,
// a lost lock or another member may come between two of them.
type action struct {
	what string
	do   func() (string, error)
}

const never = time.Duration(1 << 62)

// runNode runs one unit of n's supervisor: the next action of the decision
// it is carrying out, or one observe → plan cycle (and the first action).
func (w *World) runNode(n *node) {
	switch {
	case !n.up:
		n.nextAt = never
	case n.leave != nil:
		w.runLeave(n)
	case len(n.pending) > 0:
		w.runPending(n)
	default:
		w.loop(n)
	}
}

func (w *World) loop(n *node) {
	if w.cfg.RotateCA && n.tls == nil {
		// task's setupTLS, before anything else at process start.
		if err := w.setupTLS(n); err != nil {
			if err.Error() != n.lastFail {
				w.logf(n.name, "start: %v", err)
			}
			n.lastFail, n.nextAt = err.Error(), w.now+loopInterval
			return
		}
	}
	o, err := w.observe(n)
	if err != nil {
		w.publishSummaryUnlisted(n)
		w.unlock(n)
		if err.Error() != n.lastFail {
			w.logf(n.name, "observation failed: %v (the loop skips until it succeeds)", err)
		}
		n.lastFail = err.Error()
		n.nextAt = w.now + loopInterval
		w.fenceUnobserved(n)
		return
	}
	n.lastFail = ""
	w.followRotation(n)
	d := w.cfg.Defects.Planner.Plan(o)
	w.checkDecision(o, d)
	u := w.cfg.Defects.Planner.PlanSideJobs(o)
	if u.CheckCA {
		n.caChecked = w.now
		w.restoreCA(n)
	}
	if u.PublishSummary {
		w.publishSummary(n, o) // task's side jobs run before the decision's acts
	}
	if u.Snapshot {
		w.scheduledSnapshot(n)
	}
	if d.NeedsLock {
		err := w.lock(n)
		w.logf(n.name, "%s -> wait (%s) => lock: %s", summary(o), d.Reason, errOr(err, "taken"))
		n.nextAt = w.now + 10*time.Millisecond
		if err != nil {
			n.nextAt = w.now + loopInterval
		}
		return
	}
	acts := w.actions(n, o, d)
	if len(acts) == 0 {
		w.unlock(n)
		if w.trace.verbose || d.Kind != planner.Wait || d.Reason != n.lastReason {
			w.logf(n.name, "%s -> %s (%s)", summary(o), d.Kind, d.Reason)
		}
		n.lastReason = d.Reason
		n.nextAt = w.now + loopInterval
		return
	}
	w.logf(n.name, "%s -> %s (%s)", summary(o), d.Kind, d.Reason)
	n.lastReason = d.Reason
	n.pending, n.pendingWhat = acts, string(d.Kind)
	w.runPending(n)
}

func (w *World) runPending(n *node) {
	a := n.pending[0]
	n.pending = n.pending[1:]
	eff, err := a.do()
	if err != nil {
		w.logf(n.name, "  %s: %s: FAILED: %v", n.pendingWhat, a.what, err)
		n.pending = nil
		if n.pendingWhat == string(planner.Seed) && n.data != nil && !n.data.wal {
			n.data = nil // task's seed: DropMetaWithoutData once it failed
		}
	} else {
		w.logf(n.name, "  %s: %s: %s", n.pendingWhat, a.what, eff)
	}
	switch {
	case len(n.pending) > 0:
		n.nextAt = w.now + w.jitter(20*time.Millisecond, 400*time.Millisecond)
	case err != nil:
		w.unlock(n)
		n.nextAt = w.now + loopInterval
	default:
		w.unlock(n)
		n.nextAt = w.now + w.jitter(10*time.Millisecond, 100*time.Millisecond)
	}
}

func errOr(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

func (w *World) heldLock(n *node) error {
	if n.lockSession == 0 {
		return errLockLost
	}
	return nil
}

// actions turns d into the steps task/act.go takes for it.
func (w *World) actions(n *node, o planner.Observation, d planner.Decision) []action {
	rec := n.record
	switch d.Kind {
	case planner.Seed:
		r := *d.Record
		meta := action{"write metadata", func() (string, error) {
			n.data = &data{cluster: clusterName, name: d.Name, token: r.Token, epoch: r.Epoch}
			return "ok", nil
		}}
		create := action{"create record (create-only, fenced)", func() (string, error) {
			if err := w.heldLock(n); err != nil {
				return "", err
			}
			if rec == nil {
				if err := w.createRecord(n, planner.Record{Token: r.Token, Epoch: r.Epoch, Seeder: r.Seeder}); err != nil {
					return "", err
				}
				return fmt.Sprintf("record %s epoch %d created", r.Token, r.Epoch), nil
			}
			if rec.Token != r.Token && rec.ClusterID == 0 && rec.Source == "" && rec.Seeder != d.Name && r.Epoch == max(rec.Epoch, rec.HighestEpoch)+1 {
				// Taking over a gone seeder's seed (planner
				// takeoverSeed): a CAS over the record read, as
				// task's seed does.
				if err := w.updateRecord(n, planner.Record{Token: r.Token, Epoch: r.Epoch, Seeder: r.Seeder}); err != nil {
					return "", err
				}
				return fmt.Sprintf("record %s epoch %d written over %s's seed", r.Token, r.Epoch, rec.Seeder), nil
			}
			if rec.Token != r.Token || rec.Seeder != d.Name {
				return "", errConflict
			}
			return "resuming", nil
		}}
		// task's seed writes the metadata first, so that /status names
		// the seed from the moment its record exists (sim seed 30200).
		first := []action{meta, create}
		if w.cfg.Defects.SeedRecordBeforeMetadata {
			first = []action{create, meta}
		}
		return append(first,
			action{"re-read the record, start a new one-member cluster", func() (string, error) {
				// As task's seed does (act.go): re-read the record and
				// start only if it still names this seed (sim seeds 5861,
				// 6319: Consul lost its state between the record's
				// creation and the start, and another member, seeing
				// no record and no peer data, seeded epoch 1 too).
				if n.noConsul {
					return "", errConsul
				}
				cur := w.coord.record
				if cur == nil || cur.Token != r.Token {
					return "", fmt.Errorf("record changed before the start: %w", errConflict)
				}
				if !w.cfg.Defects.SeedForgetsItsRecord {
					// task's seed keeps the record it re-read: a
					// seeder Nomad collects before its next
					// observation still beats its summary for it
					// (publishSummaryUnlisted; sim seed 13315).
					rc := *cur
					n.record = &rc
				}
				id := w.id()
				g := w.newGroup(n, w.id(), r.Token, r.Epoch, w.newBranch(nil, 0), 1, &gmember{id: id, name: d.Name, peerURL: n.peerURL}, "seed by "+n.name)
				w.started(n, g, id)
				return "started " + g.String(), nil
			}})
	case planner.Rejoin:
		return []action{{"start with local data", func() (string, error) { return w.startExisting(n) }}}
	case planner.JoinAsLearner:
		var g *group
		var m *gmember
		return []action{
			{"add as learner", func() (string, error) {
				if err := w.heldLock(n); err != nil {
					return "", err
				}
				want := o.Record.ClusterID
				if want == 0 {
					return "", errors.New("join refused: the record names no confirmed cluster id yet")
				}
				var err error
				if g, _, err = w.client(n, false); err != nil {
					return "", err
				}
				if g.clusterID != want {
					return "", fmt.Errorf("join refused: the endpoint serves cluster %x, the record names %x", g.clusterID, want)
				}
				if m, err = w.memberAddLearner(g, n.peerURL); err != nil {
					return "", err
				}
				return fmt.Sprintf("added learner %x to %s", m.id, g), nil
			}},
			{"write metadata", func() (string, error) {
				n.data = &data{cluster: clusterName, name: d.Name, token: o.Record.Token, epoch: o.Record.Epoch, memberID: m.id, clusterID: o.Record.ClusterID}
				return "ok", nil
			}},
			{"start as learner", func() (string, error) { return w.startJoin(n, g, m.id, d.Name) }},
		}
	case planner.ResumeJoin:
		g := n.answered
		return []action{
			{"write metadata", func() (string, error) {
				n.data = &data{cluster: clusterName, name: d.Name, token: o.Record.Token, epoch: o.Record.Epoch, memberID: d.MemberID, clusterID: o.Record.ClusterID}
				return "ok", nil
			}},
			{"start as the added member", func() (string, error) { return w.startJoin(n, g, d.MemberID, d.Name) }},
		}
	case planner.Promote:
		return []action{{"promote", func() (string, error) {
			if err := w.heldLock(n); err != nil {
				return "", err
			}
			g, _, err := w.client(n, true)
			if err != nil {
				return "", err
			}
			if err := w.memberPromote(g, d.MemberID); err != nil {
				return "", err
			}
			return fmt.Sprintf("promoted %x in %s", d.MemberID, g), nil
		}}}
	case planner.RemoveMember:
		return []action{{"remove member", func() (string, error) {
			if err := w.heldLock(n); err != nil {
				return "", err
			}
			w.snapshotBeforeChange(n)
			g, _, err := w.client(n, n.etcd != nil)
			if err != nil {
				return "", err
			}
			if err := w.memberRemove(g, d.MemberID); err != nil {
				return "", err
			}
			return fmt.Sprintf("removed %x from %s", d.MemberID, g), nil
		}}}
	case planner.SetAside:
		return []action{{"stop etcd, set the data dir aside", func() (string, error) {
			w.stopEtcd(n)
			w.setAside(n, "set-aside: "+d.Reason)
			return "ok", nil
		}}}
	case planner.RecordCluster:
		r := *d.Record
		return []action{{"write record (fenced)", func() (string, error) {
			var err error
			if rec == nil {
				err = w.createRecord(n, r)
			} else {
				err = w.updateRecord(n, r)
			}
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("record %s epoch %d cluster %x", r.Token, r.Epoch, r.ClusterID), nil
		}}}
	case planner.RecoverQuorum:
		return w.recoverActions(n, o, d, rec)
	case planner.Wait:
		return nil
	}
	return []action{{"unsupported", func() (string, error) { return "", fmt.Errorf("decision %s not modeled", d.Kind) }}}
}

func (w *World) recoverActions(n *node, o planner.Observation, d planner.Decision, cur *planner.Record) []action {
	next := *d.Record
	record := action{"record the next epoch (CAS, fenced)", func() (string, error) {
		if err := w.heldLock(n); err != nil {
			return "", err
		}
		if cur == nil {
			if d.From != planner.FromSnapshot {
				return "", errors.New("recovery from data without a cluster record")
			}
			// task: a restore with no record at all creates it
			// (create-only), so a second restorer fails here.
			if err := w.createRecord(n, next); err != nil {
				return "", err
			}
			n.record, n.recIndex = &next, w.coord.index
			return fmt.Sprintf("epoch %d created (%s)", next.Epoch, next.Source), nil
		}
		if cur.Token == next.Token {
			return "already recorded", nil
		}
		if err := w.updateRecord(n, next); err != nil {
			return "", err
		}
		n.record, n.recIndex = &next, w.coord.index
		return fmt.Sprintf("epoch %d recorded (%s)", next.Epoch, next.Source), nil
	}}
	stop := action{"stop etcd", func() (string, error) { w.stopEtcd(n); return "ok", nil }}
	if d.From == planner.FromSnapshot {
		var snap *snapshot
		return []action{
			{"fetch snapshot " + d.Snapshot + " and its delta chain, verify", func() (string, error) {
				for i := range w.store {
					if w.store[i].name == d.Snapshot {
						snap = &w.store[i]
					}
				}
				if snap == nil {
					return "", errors.New("no such snapshot")
				}
				return w.fetchChain(n, o, d, cur, snap)
			}},
			record, stop,
			{"install the snapshot, replay its chain", func() (string, error) {
				w.setAside(n, "recovered-over")
				end := n.fetchedEnd
				br := w.newBranch(snap.branch, end)
				n.data = &data{cluster: clusterName, name: n.name, token: next.Token, epoch: next.Epoch, wal: true, restored: true, branch: br, rev: end + revisionBump}
				return fmt.Sprintf("data of epoch %d at revision %d", next.Epoch, end+revisionBump), nil
			}},
		}
	}
	return []action{record, stop,
		{"write metadata (ForceNew)", func() (string, error) {
			if n.data == nil {
				return "", errors.New("read metadata: no data")
			}
			if !n.data.forceNew || n.data.clusterID != 0 {
				n.data.srcToken, n.data.srcEpoch = n.data.token, n.data.epoch
			}
			n.data.token, n.data.epoch, n.data.forceNew, n.data.clusterID = next.Token, next.Epoch, true, 0
			return "ok", nil
		}},
		{"start (ForceNewCluster)", func() (string, error) { return w.startExisting(n) }},
	}
}

// fetchChain is datadir.InstallNextEpoch's steps before the next epoch is
// recorded (task's recoverFromSnapshot): the snapshot and every segment
// of its chain are fetched and verified; a read error is an error (the
// next loop tries again, nothing recorded); a damaged segment ends the
// chain, and a verified end below the revision the recovery was chosen
// for is refused (ChainShortError: the member marks the segment damaged,
// or forgets stale marks, and the planner decides again). A crash during
// the fetch leaves nothing: the fetched copy is not the member's data.
// With InstallChainPrefix, a cut chain installs its prefix instead.
func (w *World) fetchChain(n *node, o planner.Observation, d planner.Decision, cur *planner.Record, snap *snapshot) (string, error) {
	want := planner.InstallWant(o, d, cur)
	if k := len(snap.chain); k > 0 && w.crng.IntN(100) < readErrorPct {
		cut := w.crng.IntN(k)
		if !w.cfg.Defects.InstallChainPrefix {
			return "", fmt.Errorf("fetch delta %s: read error (nothing recorded; the next loop tries again)", snap.chain[cut].name)
		}
		pre := *snap
		pre.chain = snap.chain[:cut]
		end, _ := pre.verifiedEnd(n.damaged)
		n.fetchedEnd = end
		return fmt.Sprintf("read error at delta %s: installs the prefix up to revision %d (want %d)", snap.chain[cut].name, end, want), nil
	}
	end, damaged := snap.verifiedEnd(n.damaged)
	if end < want && !w.cfg.Defects.InstallChainPrefix {
		switch {
		case damaged != "":
			if n.damaged == nil {
				n.damaged = map[string]bool{}
			}
			if n.found == nil {
				n.found = map[string]bool{}
			}
			n.damaged[damaged], n.found[damaged] = true, true
		case len(n.damaged) > 0:
			n.damaged, n.found = nil, nil
		}
		return "", fmt.Errorf("chain of %s verifies up to revision %d, below the %d it was chosen for (damaged %q): not installed, nothing recorded", snap.name, end, want, damaged)
	}
	n.fetchedEnd = end
	return fmt.Sprintf("revision %d (want %d, %d deltas)", end, want, len(snap.chain)), nil
}

// scheduledSnapshot is task/backup's Scheduled, the leader's check of the
// store: the next is due snapshotCheckEvery later, whatever this one
// does. It saves a snapshot when the record n holds is confirmed and names
// the incarnation n's data runs (snapshotSource; otherwise the save is
// refused), n's side holds the quorum, and the store holds no snapshot of
// that incarnation (snapshotDue: the first one, at once; the interval's
// are the 30 s schedule's).
func (w *World) scheduledSnapshot(n *node) {
	n.snapshotCheckAt = w.now + snapshotCheckEvery
	r, d := n.record, n.data
	if n.etcd == nil || r == nil || d == nil || r.ClusterID == 0 || r.Token != d.token || r.Epoch != d.epoch || r.ClusterID != d.clusterID {
		return
	}
	g := n.etcd.group
	if g.quorum != n.side || w.newest(func(s *snapshot) bool { return s.clusterID == r.ClusterID && s.epoch == r.Epoch }) >= 0 {
		return
	}
	name := w.takeSnapshot(g)
	w.logf(n.name, "  scheduled snapshot: the store holds none of this incarnation: %s (revision %d)", name, g.committed)
}

// preStopSnapshotFresh is task/backup's: a voter that stops beside others
// saves a snapshot unless the store's newest of its incarnation is this
// recent.
const preStopSnapshotFresh = 10 * time.Minute

// stopSnapshot is task's stopSnapshot (backup.BeforeStop) as n stops
// without having left the membership: from an observation of its running
// server (Consul and a quorum answer), the last voter always saves one; a
// voter beside others (a leader known) saves one unless the store's newest
// of the record's incarnation is under preStopSnapshotFresh old. The save
// is of the incarnation the record confirms for n's data (snapshotSource).
func (w *World) stopSnapshot(n *node, leaving bool) {
	if n.etcd == nil || n.noConsul || n.data == nil {
		return
	}
	g, r, d := n.etcd.group, w.coord.record, n.data
	if r == nil || r.ClusterID == 0 || r.Token != d.token || r.Epoch != d.epoch || r.ClusterID != d.clusterID {
		return
	}
	if g.quorum != n.side {
		// As task: no save without a quorum. LeaveSnapshotWithoutQuorum
		// models the tempting fix of review rev18e F4 (a voter leaving
		// for good saves its own data, which goes with its allocation),
		// which loses writes: its full snapshot outranks the older
		// snapshot whose delta chain reaches further (sim seed 870).
		if self := g.member(n.etcd.memberID); !w.cfg.Defects.LeaveSnapshotWithoutQuorum || !leaving || self == nil || self.learner {
			return
		}
		w.nextID++
		s := snapshot{name: "snap-" + itoa(int(w.nextID)), branch: d.branch, rev: d.rev, epoch: d.epoch, created: w.now + n.skew, clusterID: d.clusterID, taker: n.peerURL}
		w.store = append(w.store, s)
		w.logf(n.name, "  snapshot of its own data, leaving without a quorum: %s (revision %d)", s.name, s.rev)
		return
	}
	voters, self := 0, g.member(n.etcd.memberID)
	for _, m := range g.members {
		if !m.learner {
			voters++
		}
	}
	if self == nil || self.learner {
		return
	}
	if voters > 1 {
		if i := w.newest(func(s *snapshot) bool { return s.clusterID == r.ClusterID && s.epoch == r.Epoch }); i >= 0 && w.now+n.skew-w.store[i].created < preStopSnapshotFresh {
			return
		}
	}
	name := w.takeSnapshot(g)
	w.logf(n.name, "  snapshot before stopping (%d voter(s)): %s (revision %d)", voters, name, g.committed)
}

func (w *World) snapshotBeforeChange(n *node) {
	if n.etcd == nil || n.etcd.group.quorum != n.side || w.now-n.lastSnapshot < time.Minute && n.lastSnapshot > 0 {
		return
	}
	n.lastSnapshot = w.now
	w.takeSnapshot(n.etcd.group)
}

// started records that n runs member id of g.
func (w *World) started(n *node, g *group, id uint64) {
	n.etcd = &etcdProc{group: g, memberID: id}
	n.startFailures = 0
	d := n.data
	d.wal, d.group, d.branch, d.memberID, d.clusterID = true, g, g.branch, id, g.clusterID
	if m := g.member(id); m != nil {
		m.name = d.name
	}
	w.tlsStarted(n)
	w.refreshGroup(g)
}

// startExisting starts etcd on the data dir: a restored snapshot starts a
// new cluster, a ForceNew flag (only for this member's own unconfirmed
// recovery, as task allows it) a one-member fork, else the member rejoins.
func (w *World) startExisting(n *node) (string, error) {
	d := n.data
	if d == nil || !d.wal || n.etcd != nil {
		n.startFailures++
		return "", errors.New("start etcd: no data")
	}
	switch {
	case d.restored:
		id := w.id()
		g := w.newGroup(n, w.id(), d.token, d.epoch, d.branch, d.rev, &gmember{id: id, name: d.name, peerURL: n.peerURL}, "restore by "+n.name)
		d.restored = false
		w.started(n, g, id)
		return "started restored " + g.String(), nil
	case d.forceNew:
		r := n.record
		if r != nil && r.ClusterID == 0 && r.Source == planner.FromData && r.Seeder == d.name && r.Token == d.token && r.Epoch == d.epoch && d.group != nil {
			learner := learnerOf(d)
			g := w.newGroup(n, d.group.clusterID, d.token, d.epoch, w.newBranch(d.branch, d.rev), d.rev, &gmember{id: d.memberID, name: d.name, peerURL: n.peerURL, learner: learner}, "ForceNewCluster by "+n.name)
			w.started(n, g, d.memberID)
			return "started ForceNewCluster " + g.String(), nil
		}
		// task's start: DropForceNew names the data's own incarnation
		// again when the recovery never started.
		if d.clusterID == 0 && d.srcToken != "" && !w.cfg.Defects.ForceNewDropKeepsEpoch {
			d.token, d.epoch = d.srcToken, d.srcEpoch
		}
		d.forceNew, d.srcToken, d.srcEpoch = false, "", 0
	}
	if d.group == nil {
		n.startFailures++
		return "", errors.New("start etcd: data of no cluster")
	}
	w.started(n, d.group, d.memberID)
	return "rejoined " + d.group.String(), nil
}

// startJoin starts n empty as member id of g: etcd needs a reachable
// member of g to fetch the cluster, and the member to be in it.
func (w *World) startJoin(n *node, g *group, id uint64, name string) (string, error) {
	if g == nil || g.member(id) == nil {
		n.startFailures++
		return "", fmt.Errorf("start etcd (failure %d): member %x not in the cluster", n.startFailures, id)
	}
	ok := false
	for _, p := range w.nodes {
		ok = ok || p != n && p.etcd != nil && p.etcd.group == g && reachable(n, p)
	}
	if !ok {
		n.startFailures++
		return "", fmt.Errorf("start etcd (failure %d): no peer of the cluster reachable", n.startFailures)
	}
	n.data.rev, n.data.branch = 0, g.branch
	w.started(n, g, id)
	return fmt.Sprintf("joined %s as %x", g, id), nil
}

func (w *World) stopEtcd(n *node) {
	if n.etcd != nil {
		g := n.etcd.group
		n.etcd = nil
		w.refreshGroup(g)
	}
}

// setAside renames the data dir away (it is kept, no longer served).
func (w *World) setAside(n *node, why string) {
	if n.data == nil {
		return
	}
	w.checkSetAside(n, why)
	d := n.data
	if d.wal && d.branch != nil {
		held := func(br *branch, rev int64) bool { return br != nil && level(br, rev, d.branch) >= d.rev }
		for _, o := range w.nodes {
			if o != n && o.data != nil && o.data.wal && held(o.data.branch, o.data.rev) {
				d.superseded = true
			}
		}
		for i := range w.store {
			if end, _ := w.store[i].verifiedEnd(nil); held(w.store[i].branch, end) {
				d.superseded = true
			}
		}
	}
	n.aside = append(n.aside, n.data)
	n.data = nil
}

// runLeave is task's graceful stop of a member whose allocation is being
// stopped: hand leadership away and retry the removal under the lock until
// the deadline (invariant 12), or try once (LeaveOnce).
func (w *World) runLeave(n *node) {
	l := n.leave
	exit := func(why string) {
		if !strings.HasPrefix(why, "removed itself") && why != "already removed" {
			w.stopSnapshot(n, why != "superseded") // task's shutdown: leave, then stopSnapshot, then etcd stops
		}
		w.stopEtcd(n)
		w.unlock(n)
		n.up, n.alloc, l.done = false, allocTerminal, true
		// The allocation's disk goes with it.
		n.data, n.aside = nil, nil
		n.nextAt = never
		w.listChanged()
		w.logf(n.name, "leave: %s; stopped (allocation terminal)", why)
	}
	if n.etcd == nil {
		exit("etcd not running")
		return
	}
	if w.now >= l.deadline {
		exit("stop deadline reached")
		return
	}
	retry := func(why string) {
		w.unlock(n)
		if w.cfg.Defects.LeaveOnce && l.tried {
			exit(why + " (leaving after one attempt)")
			return
		}
		w.logf(n.name, "leave: %s; retrying", why)
		n.nextAt = w.now + leaveRetryEvery
	}
	if n.lockSession == 0 {
		if err := w.lock(n); err != nil {
			if w.cfg.Defects.LeaveOnce && w.now-l.start > 5*time.Second {
				exit("lock not taken")
				return
			}
			if !w.cfg.Defects.LeaveLooksUnderLockOnly {
				// task's leaveUnlocked: look without the lock for a
				// newer epoch (the holder may be recording it).
				if o, err := w.lookWhileLeaving(n); err == nil {
					if o.MembersKnown && indexOf(o.Members, o.SelfID) < 0 {
						exit("already removed")
						return
					}
					if d := w.cfg.Defects.Planner.PlanLeave(o); d.Kind == planner.LeaveSuperseded {
						w.logf(n.name, "leave: %s -> %s (%s)", summary(o), d.Kind, d.Reason)
						exit("superseded")
						return
					}
				}
			}
			retry("lock not taken: " + err.Error())
			return
		}
		n.nextAt = w.now + 10*time.Millisecond
		return
	}
	l.tried = true
	o, err := w.observe(n)
	if err != nil {
		retry(err.Error())
		return
	}
	if o.MembersKnown && indexOf(o.Members, o.SelfID) < 0 {
		exit("already removed")
		return
	}
	d := w.cfg.Defects.Planner.PlanLeave(o)
	w.logf(n.name, "leave: %s -> %s (%s)", summary(o), d.Kind, d.Reason)
	if d.Kind == planner.LeaveSuperseded {
		exit("superseded")
		return
	}
	if d.Kind != planner.RemoveMember {
		if o.MembersKnown && voterCount(o.Members) <= 1 {
			exit("last voter stays")
			return
		}
		retry("not removable now")
		return
	}
	if o.LeaderID == o.SelfID {
		for _, m := range o.Members {
			if m.ID != o.SelfID && m.Healthy && !m.Learner {
				if g := n.etcd.group; g.member(m.ID) != nil && g.member(m.ID).active {
					g.leader = m.ID
				}
				break
			}
		}
	}
	g, _, err := w.client(n, true)
	if err == nil {
		err = w.memberRemove(g, d.MemberID)
	}
	if err != nil {
		retry("removal refused: " + err.Error())
		return
	}
	exit(fmt.Sprintf("removed itself (%x)", d.MemberID))
}

func indexOf(ms []planner.Member, id uint64) int {
	for i, m := range ms {
		if m.ID == id {
			return i
		}
	}
	return -1
}

func voterCount(ms []planner.Member) int {
	v := 0
	for _, m := range ms {
		if !m.Learner {
			v++
		}
	}
	return v
}

// summary is an observation in one line for the trace.
func summary(o planner.Observation) string {
	var b strings.Builder
	if o.Running {
		fmt.Fprintf(&b, "run %x", o.SelfID)
		if o.Local.Learner {
			b.WriteString(" learner")
		}
	} else {
		b.WriteString("stopped")
	}
	if o.Local.Empty {
		b.WriteString(" empty")
	} else {
		fmt.Fprintf(&b, " data(e%d %s r%d)", o.Local.Epoch, o.Local.Token, o.Local.Revision)
	}
	if r := o.Record; r != nil {
		fmt.Fprintf(&b, " rec(e%d %s c%x by %s", r.Epoch, r.Token, r.ClusterID, r.Seeder)
		if r.Source != "" {
			b.WriteString(" from " + string(r.Source))
		}
		b.WriteString(")")
	} else {
		b.WriteString(" no-rec")
	}
	if o.HoldsLock {
		b.WriteString(" lock")
	}
	fmt.Fprintf(&b, " inst %d peers %d unr %d", len(o.Instances), len(o.Peers), o.Unreachable)
	if o.MembersKnown {
		h := 0
		for _, m := range o.Members {
			if m.Healthy {
				h++
			}
		}
		fmt.Fprintf(&b, " members %d/%dh c%x", len(o.Members), h, o.MembersClusterID)
	}
	if o.QuorumLostFor > 0 {
		fmt.Fprintf(&b, " qlost %s", fmtDur(o.QuorumLostFor))
	}
	if o.SeederGoneFor > 0 {
		fmt.Fprintf(&b, " seeder-gone %s", fmtDur(o.SeederGoneFor))
	}
	return "[" + b.String() + "]"
}

// fenceUnobserved is task's fenceUnobserved: a running member whose
// observation failed reads the record from Consul all the same, and its
// own server's quorum, and stops its etcd (data and membership kept) when
// planner.PlanUnobserved says its epoch was replaced (sim seed 41704:
// m2-3, collected while it ran, and m1-2, its Nomad client disconnected,
// ran epoch 2 blind beside m0-3's recovery of epoch 3, and a healed
// partition gave epoch 2 its quorum back).
func (w *World) fenceUnobserved(n *node) {
	if n.etcd == nil || n.noConsul || w.coord.record == nil {
		return
	}
	g := n.etcd.group
	m := g.member(n.etcd.memberID)
	rec := *w.coord.record
	o := planner.Observation{
		ClusterName: clusterName,
		Self:        planner.Self{Name: n.name, PeerURL: n.peerURL},
		Running:     true,
		SelfID:      n.etcd.memberID,
		Local:       w.local(n),
		Record:      &rec,
		// task's: its own server answers a linearizable member list.
		MembersKnown: g.quorum >= 0 && g.quorum == n.side && m != nil && !m.learner,
	}
	o.Paused = w.coord.pause
	d := w.cfg.Defects.Planner.PlanUnobserved(o)
	if d.Kind != planner.StopSuperseded {
		n.fenceStreak = 0
		return
	}
	// task's fenceStreak: only the second such loop in a row stops it.
	if n.fenceStreak++; n.fenceStreak < 2 {
		w.logf(n.name, "unobserved: %s -> %s at the next loop if it stays so", summary(o), d.Kind)
		return
	}
	n.fenceStreak = 0
	w.logf(n.name, "unobserved: %s -> %s (%s)", summary(o), d.Kind, d.Reason)
	w.stopEtcd(n)
	w.logf(n.name, "  %s: stop etcd: ok (data kept)", d.Kind)
}
