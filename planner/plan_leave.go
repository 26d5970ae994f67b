// PlanLeave: what a member leaving for good does before it stops.

package planner

import (
	"fmt"
)

// PlanLeave decides like the package's PlanLeave with the rules f switches
// off.
func (f Faults) PlanLeave(o Observation) Decision { return f.paused(o, f.planLeave(o)) }

// PlanLeave decides what a member that is leaving for good (its slot was
// removed: scale-down, replacement) does before it stops: remove itself
// from the membership when that is safe, so that its replacement can join
// at once and the cluster never counts a member that will not come back.
// Unlike Plan, it does not run Check: Check reads a leaving member's
// removal of itself while the record names another incarnation as keeping
// that incarnation running (invariant 5), which it is not (sim/ found
// it), and a refused departure would leave a voter that never returns.
func PlanLeave(o Observation) Decision { return rules{}.PlanLeave(o) }

func (r rules) planLeave(o Observation) Decision {
	name := o.Self.Name
	if o.Local.Name != "" {
		name = o.Local.Name
	}
	if o.Running && !o.MembersKnown && r.leaveGuard(stopWhenSuperseded) {
		if why, ok := superseded(o); ok {
			return Decision{Kind: LeaveSuperseded, Name: name, Reason: fmt.Sprintf("leaving without a quorum, and %s, newer than this member's epoch %d: its incarnation was replaced; stopping now without removing this member, so that it never gives the old incarnation its quorum back beside the new one", why, o.Local.Epoch)}
		}
	}
	if !o.Running || !o.MembersKnown {
		return Decision{Kind: Wait, Name: name, Reason: "leaving, but not running or no quorum: stopping without removing this member"}
	}
	i := findID(o.Members, o.SelfID)
	if i < 0 {
		return Decision{Kind: Wait, Name: name, Reason: "leaving; already removed"}
	}
	if voters(o.Members) <= 1 && !o.Members[i].Learner {
		return Decision{Kind: Wait, Name: name, Reason: "leaving, but this is the last voter: keeping it (the cluster's data lives here)"}
	}
	if o.DataInherited && !o.Members[i].Learner {
		// The replacement runs as this member from its data: staying in
		// the membership saves a full resync, but only while the others
		// keep a quorum without it (another member may be leaving too:
		// the lock orders them, and the holder keeps it until its etcd
		// has stopped, so the next one sees it gone).
		others := healthyVoters(o.Members)
		if o.Members[i].Healthy {
			others--
		}
		if v := voters(o.Members); others >= Quorum(v) {
			return Decision{Kind: KeepMembership, Name: name, MemberID: o.SelfID, Reason: fmt.Sprintf("leaving; the replacement inherits this member's data and %d healthy of %d voters keep quorum meanwhile: stopping without removal", others, v)}
		} else if s, ok := r.staleVoter(o); ok && others >= Quorum(v-1) && r.leaveGuard(staleBeforeHandover) {
			// Only a voter that is gone for good keeps the others below
			// quorum (it left without removing itself, e.g. its own
			// removal was refused while this one stopped): removing it
			// first keeps the handover, where removing this member
			// would drop the membership one more voter below the
			// desired size and make the replacement join empty.
			// It is a decision about another member, so it keeps every
			// invariant Plan's own would (Check: one incarnation's
			// members only, the leader last), unlike this member's
			// removal of itself.
			d := r.removal(o, s, fmt.Sprintf("leaving; the replacement inherits this member's data, but voter %s (%x), gone from the provider for %s, keeps %d healthy of %d voters below quorum", s.Name, s.ID, s.AbsentFor, others, v))
			d.Name = name
			if d.Kind != RemoveMember || Check(o, d) == nil {
				return d
			}
		}
	}
	d := r.removal(o, o.Members[i], fmt.Sprintf("this member's slot is gone (desired size %d)", o.DesiredSize))
	d.Name = name
	return d
}

// staleVoter returns the voter a leaving member may remove to keep its
// handover: the first unhealthy voter other than this member and the
// leader, in staleMembers' order (gone from the provider for StaleAfter;
// the leader is removed last, invariant 3). Only while every listed
// instance answered: a member running from inherited data keeps its old
// name and counts as present only through its status answer, so one that
// does not answer this member may be the "gone" voter, alive (review
// rev19a).
func (r rules) staleVoter(o Observation) (Member, bool) {
	if o.Unreachable > 0 {
		return Member{}, false
	}
	for _, m := range r.staleMembers(o) {
		if !m.Learner && !m.Healthy && m.ID != o.LeaderID {
			return m, true
		}
	}
	return Member{}, false
}

// superseded reports why a newer epoch than this running member's is
// known to exist: the record names one (a recovery or restore recorded
// it, confirmed or not: epochs only grow, so a newer one was recorded by a
// member that found this incarnation without a quorum past the grace), a
// peer runs one (Consul may have restored an older record since), or the
// store holds a snapshot taken under this data's cluster id at one (a
// recovery from this line ran). While the leaving member waits for its
// quorum to come back it never runs the loop that would follow the new
// record (planRunning), and it re-reads only every attempt: a partition
// that heals meanwhile gives the old incarnation its quorum back beside
// the new one (sim seed 1002359: a collected voter cut off by a partition
// and the leaving one). ok is false without metadata (no epoch to
// compare).
func superseded(o Observation) (why string, ok bool) {
	l := o.Local
	if l.Token == "" {
		return "", false
	}
	// An epoch the record abandoned ('recover -keep-running' kept this
	// incarnation over it: highest_epoch) does not replace it (review
	// rev18e F1); nor does this member's own recovery, recorded and not
	// started (its seeder is this member: rev18e F2).
	above := l.Epoch
	if rec := o.Record; rec != nil && rec.ClusterID != 0 && rec.Token == l.Token && rec.Epoch == l.Epoch {
		above = max(above, rec.top())
	}
	if rec := o.Record; rec != nil && rec.Epoch > l.Epoch && rec.Seeder != o.Self.Name {
		state := "confirmed"
		if rec.ClusterID == 0 {
			state = "not confirmed yet"
		}
		return fmt.Sprintf("the record names epoch %d (token %s, %s, by %s)", rec.Epoch, short(rec.Token), state, rec.Seeder), true
	}
	for _, p := range o.Peers {
		if p.Running && p.Token != "" && p.Epoch > above {
			return fmt.Sprintf("peer %s runs epoch %d (token %s)", p.Name, p.Epoch, short(p.Token)), true
		}
	}
	if o.LineEpoch > above {
		return fmt.Sprintf("the store holds a snapshot of this data's cluster id %x at epoch %d", l.ClusterID, o.LineEpoch), true
	}
	return "", false
}
