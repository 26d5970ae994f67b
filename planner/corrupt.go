package planner

import (
	"fmt"
	"slices"
)

// corrupt decides for a member whose data is found corrupt (o.Corrupt):
// etcd's CORRUPT alarm names it, or its start failed etcd's initial hash
// check against its peers. Its data is set aside (renamed, never deleted)
// and the member then joins again empty, as a learner, from the others
// (planEmpty removes its old identity first, under the quorum rule). Only
// while the others keep a quorum of good copies: the healthy voters,
// other than this member, that no CORRUPT alarm names must be a quorum of
// the voters; otherwise stopping this member would cost the quorum, or
// this copy may be the best one left (etcd's periodic check blames the
// followers when the leader's own data differs), and an operator chooses.
// Only data of the incarnation the confirmed record names: any other is
// the record's business. ok is false when the data is not found corrupt,
// or when no quorum answers (then it is planned as any data: a stopped
// member's start may bring the quorum back).
func (r rules) corrupt(o Observation, name string) (Decision, bool) {
	rec := o.Record
	if o.Corrupt == "" || o.Local.Empty || rec == nil || rec.ClusterID == 0 || rec.Token != o.Local.Token || rec.Epoch != o.Local.Epoch {
		return Decision{}, false
	}
	if !o.MembersKnown {
		// No quorum answers without this member (one more failed since
		// its data was judged): its start may bring the quorum back, and
		// the compaction hash check judges it again once it runs. Plan
		// as for any data.
		return Decision{}, false
	}
	good := goodVoters(o)
	if v := voters(o.Members); len(good) < Quorum(v) && r.holdGuard(keepLastGoodCopy) {
		return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("data found corrupt (%s), but only %d healthy voter(s) besides this member are named by no CORRUPT alarm, below the quorum %d of %d voters: keeping this data (it may be the best copy left); an operator must choose", o.Corrupt, len(good), Quorum(v), v)}, true
	}
	return Decision{Kind: SetAside, Name: name, Aside: AsideCorrupt, Reason: fmt.Sprintf("data found corrupt (%s) while %d healthy voter(s) hold good copies: stopping, setting the data aside and joining again as a learner", o.Corrupt, len(good))}, true
}

// goodVoters returns the healthy voters other than this member (running
// as SelfID, or stopped with the id in its data) that no CORRUPT alarm
// names.
func goodVoters(o Observation) []uint64 {
	var good []uint64
	for _, m := range o.Members {
		self := m.ID == o.SelfID && o.SelfID != 0 || m.ID == o.Local.MemberID && o.Local.MemberID != 0
		if m.Learner || !m.Healthy || self || slices.Contains(o.CorruptAlarms, m.ID) {
			continue
		}
		good = append(good, m.ID)
	}
	return good
}

// disarmCorrupt: the leader disarms the CORRUPT alarms of members that
// have left the membership (their data set aside, their old identity
// removed): etcd refuses every read and write while any CORRUPT alarm is
// raised. The alarm of a member still in the membership stays until that
// member's data is set aside, and one naming member 0 (etcd's compaction
// hash check found no majority: it cannot tell whose data is wrong) stays
// for an operator. ok is false when there is none to disarm.
func (r rules) disarmCorrupt(o Observation, name string) (Decision, bool) {
	if o.LeaderID != o.SelfID || len(o.CorruptAlarms) == 0 {
		return Decision{}, false
	}
	var gone []uint64
	for _, id := range o.CorruptAlarms {
		if id != 0 && findID(o.Members, id) < 0 || !r.holdGuard(disarmOnlyRemoved) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return Decision{}, false
	}
	return Decision{Kind: DisarmCorrupt, Name: name, Alarms: gone, Reason: fmt.Sprintf("CORRUPT alarm(s) of %d member(s) no longer in the membership (their data set aside): disarming them so that the cluster serves again", len(gone))}, true
}
