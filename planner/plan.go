package planner

import (
	"fmt"
	"strings"
)

// MaxStartFailures is how many failed starts of an added-but-unstarted
// learner make it be removed and the join start over.
const MaxStartFailures = 5

// Plan decides what this member does next. It is pure: the same
// Observation always gives the same Decision. A decision that fails Check
// is refused: Plan returns a Wait that names the broken rule instead.
func Plan(o Observation) Decision { return refuse(o, rules{}.Plan(o)) }

// Plan decides like the package's Plan with the rules f switches off.
func (f Faults) Plan(o Observation) Decision {
	return operatorHint(o, f.paused(o, epochRoom(o, f.plan(o))))
}

// epochRoom holds back a decision that records another incarnation while
// the record leaves no plausible room for a new epoch (implausibleTop: a
// planted highest_epoch of 2^64-1 made the next epoch 0, review rev14b
// D3): epochs never wrap, and only an operator ends the wait ('recover
// -from' records above what it sees, not above a planted field).
func epochRoom(o Observation, d Decision) Decision {
	if d.Record == nil || o.Record == nil || d.Record.Token == o.Record.Token && d.Record.Epoch == o.Record.Epoch {
		return d
	}
	why := o.Record.implausibleTop()
	if why == "" {
		return d
	}
	return Decision{Kind: Wait, Name: d.Name, AwaitsOperator: true, Reason: fmt.Sprintf("%s: holding back %s (%s)", why, d.Kind, d.Reason)}
}

// operatorHint names the command that ends a wait only an operator ends,
// when its reason names none: while a quorum answers, 'recover
// -keep-running' (the record then names something else that never ran:
// OperatorKeepRunning; 'recover' refuses beside a quorum), else 'recover
// -from' (OperatorRecovery, OperatorSnapshotRecovery) with what 'status'
// shows (review of the operator model, session 13, F4 and F5).
func operatorHint(o Observation, d Decision) Decision {
	if !d.AwaitsOperator || strings.Contains(d.Reason, "etcd-nomad ") {
		return d
	}
	if q, live := quorumAnswers(o); live && o.Record != nil && o.Record.ClusterID == 0 {
		d.Reason += fmt.Sprintf(" ('etcd-nomad recover -keep-running' records the cluster that answers in place of the record, while %s)", q)
		return d
	}
	d.Reason += " ('etcd-nomad status' shows every member's data; 'etcd-nomad recover -from MEMBER' or '-from snapshot:NAME' chooses the source)"
	return d
}

// paused holds d back while an operator paused the cluster: only a
// Wait, starting this member's own data (Rejoin: no membership change,
// and a paused cluster must still come back after a restart), and the
// recovery an operator recorded (Record.Operator: its source starts it and
// confirms it) proceed, and a leaving member's stop beside a newer epoch
// (LeaveSuperseded: no change to any record or membership; it stops at
// its deadline anyway). The held decision is named in the
// reason, so status shows what resume would do.
func (r rules) paused(o Observation, d Decision) Decision {
	if o.Paused == "" || !r.holdGuard(holdWhilePaused) {
		return d
	}
	switch {
	case d.Kind == Wait && !d.NeedsLock, d.Kind == Rejoin:
		return d
	case d.Kind == LeaveSuperseded:
		return d // stopping a member that stops anyway, a little sooner
	case (d.Kind == RecoverQuorum || d.Kind == RecordCluster || d.NeedsLock) && o.Record != nil && o.Record.Operator && o.Record.ClusterID == 0 && o.Record.Seeder == d.Name:
		return d // the operator's own recovery, started and confirmed by its source
	}
	what := string(d.Kind)
	if d.NeedsLock {
		what = "take the lock"
	}
	return Decision{Kind: Wait, Name: d.Name, Reason: fmt.Sprintf("paused (%s): holding back %s: %s", o.Paused, what, d.Reason)}
}

func (r rules) plan(o Observation) Decision {
	name := o.Self.Name
	if o.Local.Name != "" && r.dataGuard(persistedName) {
		// Invariant 6: identity is the name persisted in the data dir.
		name = o.Local.Name
	}
	if o.Running {
		return r.planRunning(o, name)
	}
	if !inInstances(o.Instances, o.Self.Name) {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%q is not among the provider's instances: not starting", o.Self.Name)}
	}
	if o.Local.NewerEtcd != "" {
		return Decision{Kind: Wait, Name: name, Reason: o.Local.NewerEtcd}
	}
	if o.Local.Unreadable != "" {
		return Decision{Kind: SetAside, Name: name, Aside: AsideUnreadable, Reason: "data dir unusable: " + o.Local.Unreadable}
	}
	if d, ok := r.corrupt(o, name); ok {
		return d
	}
	if !o.Local.Empty {
		return r.planWithData(o, name)
	}
	return r.planEmpty(o, name)
}

// quorumAnswers reports whether a quorum is seen alive: the member list
// answered (a linearizable read), or a peer reports itself healthy (a
// voter of a cluster with a quorum). Nothing may then start a new
// incarnation beside it or set its data aside for one (invariant 10).
func quorumAnswers(o Observation) (string, bool) {
	if o.MembersKnown {
		return fmt.Sprintf("cluster %x answers with a quorum", o.MembersClusterID), true
	}
	for _, p := range o.Peers {
		if p.Healthy {
			return fmt.Sprintf("peer %s reports itself a healthy voter (token %s epoch %d)", p.Name, short(p.Token), p.Epoch), true
		}
	}
	return "", false
}

// newerPeer returns a Wait when a peer reports data of an epoch newer than
// epoch: this member's data is not the newest, so it must not re-record.
func newerPeer(o Observation, name string, epoch uint64) (Decision, bool) {
	for _, p := range o.Peers {
		if p.Token != "" && p.Epoch > epoch {
			return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("peer %s holds epoch %d, newer than this member's epoch %d: not re-recording the cluster from older data", p.Name, p.Epoch, epoch)}, true
		}
	}
	return Decision{}, false
}

func changeInFlight(ms []Member) string {
	for _, m := range ms {
		if m.Name == "" {
			return fmt.Sprintf("member %x was added but has not started", m.ID)
		}
		if m.Learner {
			return fmt.Sprintf("learner %s (%x) is catching up", m.Name, m.ID)
		}
	}
	return ""
}

func voters(ms []Member) int {
	n := 0
	for _, m := range ms {
		if !m.Learner {
			n++
		}
	}
	return n
}

func healthyVoters(ms []Member) int {
	n := 0
	for _, m := range ms {
		if !m.Learner && m.Healthy {
			n++
		}
	}
	return n
}

func findID(ms []Member, id uint64) int {
	for i, m := range ms {
		if m.ID == id {
			return i
		}
	}
	return -1
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

func displayName(m Member) string {
	if m.Name == "" {
		return "(unstarted)"
	}
	return m.Name
}

func short(tok string) string {
	if len(tok) > 8 {
		return tok[:8]
	}
	return tok
}

// slotVoters counts the voters that hold a slot of the desired size: all
// of them, except while an outside cluster is migrated in
// (Record.Migrating), when its healthy members, which no instance lists,
// hold none. An unhealthy unlisted voter still holds its slot: a member
// joining beside it would add a voter to a quorum it cannot help make.
func slotVoters(o Observation) int {
	n := 0
	for _, m := range o.Members {
		if m.Learner {
			continue
		}
		if o.Record != nil && o.Record.Migrating() && m.Healthy && !listed(o.Instances, m) {
			continue
		}
		n++
	}
	return n
}

// listed reports whether an instance matches member m, by name or by peer
// URL.
func listed(ins []Instance, m Member) bool {
	for _, in := range ins {
		if in.Name == m.Name || contains(m.PeerURLs, in.PeerURL) {
			return true
		}
	}
	return false
}

func inInstances(ins []Instance, name string) bool {
	for _, in := range ins {
		if in.Name == name {
			return true
		}
	}
	return false
}

func sourceName(src Source) string {
	if src == "" {
		return "an empty seed"
	}
	return "from " + string(src)
}
