package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Invariant names, as a failing run reports them.
const (
	InvSplitBrain  = "two live clusters"
	InvTwoSeeds    = "two seeds of one epoch"
	InvForeignData = "member serves data of another incarnation"
	InvLostWrites  = "acknowledged writes lost"
	InvSetAside    = "newest data set aside while its quorum lives"
	InvNoVoter     = "cluster started without a voter"
	InvLeave       = "graceful departure left a removable voter"
	InvLiveness    = "not healthy after faults stopped"
	InvRefused     = "the correct planner's decision fails planner.Check"
	InvTLS         = "members of one cluster cannot verify each other's certificates"
)

func (w *World) violate(inv, format string, args ...any) {
	if w.failure != nil {
		return
	}
	w.failure = &Violation{Step: w.step, Time: w.now, Invariant: inv, Detail: fmt.Sprintf(format, args...)}
	w.logf("VIOLATION", "%s: %s", inv, w.failure.Detail)
	w.failState = w.State()
}

// checkDecision fails the run when the correct planner (no planner
// defect) decides something planner.Check rejects: planner.Plan runs
// Check on every decision and refuses to act on a violation, so a false
// alarm of the checker would stall a real cluster. (PlanLeave does not
// run Check: see there.)
func (w *World) checkDecision(o planner.Observation, d planner.Decision) {
	if w.cfg.Defects.Planner != (planner.Faults{}) {
		return
	}
	if err := planner.Check(o, d); err != nil {
		w.violate(InvRefused, "%s -> %s (%s): %v", summary(o), d.Kind, d.Reason, err)
	}
}

// check runs the invariants over the whole world after a step.
func (w *World) check() {
	var serving []*group
	for _, g := range w.groups {
		if g.quorum >= 0 {
			serving = append(serving, g)
		}
	}
	if len(serving) > 1 {
		w.violate(InvSplitBrain, "%s and %s both have a quorum", serving[0], serving[1])
		return
	}
	for _, n := range w.nodes {
		if n.etcd == nil || n.etcd.group.quorum != n.side {
			continue
		}
		g := n.etcd.group
		if n.data.token != g.token || n.data.epoch != g.epoch {
			w.violate(InvForeignData, "%s serves %s (token %s) with data of token %s epoch %d", n.name, g, g.token, n.data.token, n.data.epoch)
			return
		}
	}
	if len(serving) == 1 {
		w.checkWrites(serving[0])
	}
	w.checkLeaves()
	w.checkTLS()
}

// checkWrites: the serving cluster holds every acknowledged write that
// still exists in some copy (a data dir, set aside or not, or a snapshot).
// Writes whose every copy is gone (disks lost) are not the system's doing.
func (w *World) checkWrites(g *group) {
	for _, other := range w.groups {
		b := other.branch
		if b.acked == 0 || level(g.branch, g.committed, b) >= b.acked {
			continue
		}
		exists, where := int64(-1), ""
		see := func(br *branch, rev int64, at string) {
			if br == nil {
				return
			}
			if l := min(b.acked, level(br, rev, b)); l > exists {
				exists, where = l, at
			}
		}
		for _, n := range w.nodes {
			if n.gone() {
				// Nomad made its allocation terminal: its disk goes
				// when its client reconnects and is no copy the
				// system may count on (as a lost host's, which the
				// model drops at once); were it still serving with
				// a quorum, the split-brain check would fail first.
				continue
			}
			if n.data != nil && n.data.wal {
				see(n.data.branch, n.data.rev, n.name+"'s data dir")
			}
			for _, a := range n.aside {
				if a.wal && !a.superseded {
					see(a.branch, a.rev, n.name+"'s set-aside data")
				}
			}
		}
		for i := range w.store {
			// The store's copy goes as far as the snapshot's chain
			// verifies (a damaged segment ends it).
			s := &w.store[i]
			end, _ := s.verifiedEnd(nil)
			see(s.branch, end, "snapshot "+s.name+" with its delta chain")
		}
		// A copy at or below b's fork holds none of b's own writes (a
		// learner that joined at revision 0): its parent's are checked
		// as the parent's.
		if have := level(g.branch, g.committed, b); have < exists && exists > b.fork && !w.lossAccepted(b, have, exists) {
			w.violate(InvLostWrites, "%s serves up to revision %d of %s's writes, but revision %d was acknowledged and a copy of it still exists (%s)", g, have, other, exists, where)
			return
		}
	}
}

// checkNewGroup: one seed per epoch (while the other still has a copy),
// and a cluster must have a voter. A copy is what checkWrites counts as
// one, and also the disk of an allocation Nomad made terminal while its
// process runs when something the new cluster's starter could read names
// it (namedCopy): only a terminal allocation's copy nothing names is no
// copy (it goes when its client reconnects; were that cluster serving,
// the split-brain check would fail first), as a lost host's disk, which
// the model drops at once, is none. (With the collectRunning fault on, 14
// runs in 1457 at 3M steps from seed 7 started an epoch again whose only
// copies were on such disks, without a quorum: an empty member with no
// record, no summary and no snapshot that could name them, or a restore
// under an older record Consul brought back, has no way to know of them:
// seeds 28 and 130. Sim seed 180 was not one: live peers named the
// collected voter, and ignoring every terminal copy hid it.)
func (w *World) checkNewGroup(src *node, g *group, why string) {
	if g.voters() == 0 {
		w.violate(InvNoVoter, "%s (%s) has no voter: it can never elect a leader", g, why)
		return
	}
	for _, o := range w.groups {
		if o == g || o.epoch != g.epoch {
			continue
		}
		for _, n := range w.nodes {
			if n == src || n.data == nil || n.data.group != o || !n.data.wal {
				continue
			}
			if !n.gone() {
				w.violate(InvTwoSeeds, "%s (%s) started while %s of the same epoch lives at %s", g, why, o, n.name)
				return
			}
			if by := w.namedCopy(n); by != "" {
				w.violate(InvTwoSeeds, "%s (%s) started while %s of the same epoch lives at %s, whose allocation Nomad made terminal while it runs, and %s names it", g, why, o, n.name, by)
				return
			}
		}
	}
}

// namedCopy says what names n, a node whose allocation Nomad made
// terminal, to a member that could read it: a live member that found it
// answering its probes within the recovery grace (its /status shares
// them), the record (as its seeder, or its cluster's), the summary, or the
// newest snapshot (its taker or its chain's last recorder); "" if nothing
// does.
func (w *World) namedCopy(n *node) string {
	for _, p := range w.nodes {
		if p == n || !p.up || p.gone() {
			continue
		}
		for _, key := range []string{n.name, n.name + " (its summary was rewritten)"} {
			if e, ok := p.healthySeen[key]; ok && w.now-e.at < recoveryGrace {
				return "live member " + p.name + " (it found it answering)"
			}
		}
	}
	if r := w.coord.record; r != nil && (r.Seeder == n.name || r.ClusterID != 0 && r.ClusterID == n.data.group.clusterID) {
		return "the record"
	}
	if s := w.coord.summary; s != nil {
		for _, m := range s.members {
			if m.name == n.name {
				return "the summary"
			}
		}
	}
	if i := w.newest(func(*snapshot) bool { return true }); i >= 0 {
		s := &w.store[i]
		if s.taker == n.peerURL {
			return "snapshot " + s.name + " (its taker)"
		}
		if k := len(s.chain); k > 0 && s.chain[k-1].recorder == n.peerURL {
			return "snapshot " + s.name + " (its chain's last recorder)"
		}
	}
	return ""
}

// checkSetAside: data of a cluster that has a quorum, of a member still in
// it, is never set aside (the newest data while its quorum lives).
func (w *World) checkSetAside(n *node, why string) {
	d := n.data
	if d.group == nil || d.group.quorum < 0 || d.group.member(d.memberID) == nil {
		return
	}
	w.violate(InvSetAside, "%s sets aside its data of %s (member %x, revision %d) while that cluster has a quorum (%s)", n.name, d.group, d.memberID, d.rev, why)
}

// checkLeaves: invariant 12. Once a stopping member's removal has been
// possible for a while (etcd would accept it, the planner's rule allows
// it, the lock and Consul are there), it must be out by its deadline.
func (w *World) checkLeaves() {
	const window = 4 * time.Second
	for _, l := range w.leaves {
		if l.final {
			continue
		}
		if w.now > l.deadline {
			l.final = true
			if m := l.group.member(l.id); l.shouldLeft && m != nil && !m.learner {
				w.violate(InvLeave, "%s stopped as a voter of %s although its removal was possible for %s of its %s", l.node.name, l.group, window, leaveTimeout)
				return
			}
			continue
		}
		ok := w.removable(l)
		switch {
		case !ok:
			l.ok = false
		case !l.ok:
			l.ok, l.okSince = true, w.now
		case w.now-l.okSince >= window:
			l.shouldLeft = true
		}
	}
}

func (w *World) removable(l *leave) bool {
	n, g := l.node, l.group
	m := g.member(l.id)
	// A stalled process cannot retry its removal (sim seed 3642: a
	// member stalled 5.8 s right after its graceful stop began, and the
	// quorum was lost before it woke).
	if m == nil || m.learner || l.crashed || n.noConsul || n.noNomad || g.quorum < 0 || n.side != g.quorum || w.now < n.stalledUntil {
		return false
	}
	if w.coord.pause != "" {
		return false // a leaving member does not remove itself while paused
	}
	if h := w.coord.holder; h != nil && h != n {
		return false
	}
	voters, healthy := 0, 0
	for _, x := range g.members {
		if x.learner || x.name == "" {
			return false // a change in flight
		}
		voters++
		if x.id == l.id {
			continue
		}
		if p := w.byPeer(x.peerURL); p != nil && p.up && p.etcd != nil && p.side == n.side {
			healthy++
		}
	}
	return voters > 1 && healthy >= planner.Quorum(voters-1) && w.readyToRemove(g, l.id)
}

// healthy: one cluster, recorded and confirmed, every current allocation
// a running, connected voter of it, and the desired number of voters.
func (w *World) healthy() bool {
	var g *group
	for _, x := range w.groups {
		if x.quorum >= 0 {
			if g != nil {
				return false
			}
			g = x
		}
	}
	r := w.coord.record
	if g == nil || r == nil || r.ClusterID != g.clusterID || r.Token != g.token || r.Epoch != g.epoch || len(g.members) != w.cfg.Size {
		return false
	}
	for _, n := range w.slots {
		if !n.up || n.alloc != allocRunning || n.etcd == nil || n.etcd.group != g {
			return false
		}
		if m := g.member(n.etcd.memberID); m == nil || m.learner || !m.active {
			return false
		}
	}
	return true
}

// stuck says why no automatic way back exists, "" if one does: then only
// an operator can help, and the liveness check does not apply.
func (w *World) stuck() string {
	if w.coord.pause != "" {
		// An operator's pause holds every change until resume (a
		// restore of Consul's state may bring one back).
		return "the cluster is paused (" + w.coord.pause + "): members hold every change until an operator resumes"
	}
	r := w.coord.record
	if r == nil {
		// With no record, only a member's own word: data superseded by
		// a newer epoch of its line that no member of it re-records
		// (planner's supersededWithoutRecord).
		for _, n := range w.slots {
			if n.up && strings.Contains(n.lastReason, "an operator must") {
				return "the planner waits for an operator: " + n.lastReason
			}
		}
		return ""
	}
	if r.ClusterID == 0 && r.Source == planner.FromData {
		for _, n := range w.slots {
			if n.name == r.Seeder && n.alloc != allocTerminal && (n.data == nil || n.data.token != r.Token && !sourceOf(r, n.data)) {
				return "the seeder of a recovery from its data lost that data"
			}
		}
	}
	if r.ClusterID == 0 && r.Source == "" && w.byName[r.Seeder] != nil && w.byName[r.Seeder].alloc == allocTerminal {
		for _, n := range w.slots {
			if d := n.data; d != nil && d.wal && d.epoch == r.Epoch && d.token != r.Token {
				return "an unconfirmed seed record of a gone seeder beside data of another token of its epoch (the planner asks an operator to choose)"
			}
		}
	}
	if r.ClusterID == 0 {
		// A newer record never confirmed, whose seeder's allocation is
		// gone for good, beside a cluster of an older epoch that runs
		// with a quorum (Consul restored an old record): a takeover
		// would start a second cluster beside the live one (invariant
		// 10), and re-recording the live one's epoch would make the
		// record's epoch go back (invariant 9). The planner asks an
		// operator.
		if s := w.byName[r.Seeder]; s == nil || s.alloc == allocTerminal {
			for _, g := range w.groups {
				if g.quorum >= 0 && g.epoch < r.Epoch {
					return fmt.Sprintf("an unconfirmed record of epoch %d whose seeder is gone, beside %s running with a quorum", r.Epoch, g)
				}
			}
		}
	}
	for _, n := range w.slots {
		if n.up && strings.Contains(n.lastReason, "an operator must") {
			return "the planner waits for an operator: " + n.lastReason
		}
	}
	if r.ClusterID == 0 {
		return ""
	}
	if len(w.store) > 0 {
		return ""
	}
	for _, n := range w.slots {
		if d := n.data; d != nil && d.wal && d.token == r.Token && d.epoch == r.Epoch && !learnerOf(d) {
			return ""
		}
	}
	return "no voter's copy of the recorded incarnation and no snapshot"
}

// sourceOf reports whether d is the incarnation the recovery from data
// recorded as r starts from (planner.recoverySource).
func sourceOf(r *planner.Record, d *data) bool {
	if !d.wal {
		return false
	}
	if r.LastConfirmedEpoch == 0 {
		return d.epoch+1 == r.Epoch
	}
	return d.token == r.LastConfirmedToken && d.epoch == r.LastConfirmedEpoch
}

// State describes the world in a few lines: the record, the clusters that
// run, every current allocation.
func (w *World) State() string {
	var b strings.Builder
	if r := w.coord.record; r != nil {
		fmt.Fprintf(&b, "record: epoch %d %s cluster %x seeder %s source %q; lock: %v\n", r.Epoch, r.Token, r.ClusterID, r.Seeder, r.Source, w.coord.holder != nil)
	} else {
		b.WriteString("record: none\n")
	}
	for _, g := range w.groups {
		run := 0
		for _, n := range w.nodes {
			if n.up && n.etcd != nil && n.etcd.group == g {
				run++
			}
		}
		if run == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s token %s: %d running, quorum side %d, leader %x, committed %d, members:", g, g.token, run, g.quorum, g.leader, g.committed)
		for _, m := range g.members {
			fmt.Fprintf(&b, " %x(%s learner=%v active=%v)", m.id, m.name, m.learner, m.active)
		}
		b.WriteString("\n")
	}
	for _, n := range w.slots {
		fmt.Fprintf(&b, "%s: up=%v alloc=%d side=%d", n.name, n.up, n.alloc, n.side)
		if d := n.data; d != nil {
			fmt.Fprintf(&b, " data(e%d %s member %x rev %d wal=%v)", d.epoch, d.token, d.memberID, d.rev, d.wal)
		}
		if n.etcd != nil {
			fmt.Fprintf(&b, " runs %x in %s", n.etcd.memberID, n.etcd.group)
		}
		fmt.Fprintf(&b, " last: %s\n", n.lastReason)
	}
	return b.String()
}
