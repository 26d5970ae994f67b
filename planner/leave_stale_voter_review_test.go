package planner

import (
	"testing"
	"time"
)

// Review rev19a of the heir's stale-voter removal
// (TestALeavingMemberWithAnHeirRemovesAStaleVoterFirst): each test was red
// on the first version.

// Invariant 3: a leaving heir never removes the leader while another voter
// is stale too (the first version took the first unhealthy stale voter in
// member-list order; Check refuses that decision, and PlanLeave did not
// run it).
func TestALeavingHeirNeverRemovesTheLeaderFirst(t *testing.T) {
	o := Observation{Self: Self{Name: "m0"}, Running: true, SelfID: 1, MembersKnown: true, HoldsLock: true, DataInherited: true, DesiredSize: 4, StaleAfter: 5 * time.Second}
	// m3 (id 2) is the leader, unreachable from m0 and gone from the
	// provider; m4 (id 3) answers but is gone from the provider too.
	o.LeaderID = 2
	o.Members = members(voter(1, "m0", true), voter(2, "m3", false), voter(3, "m4", true), voter(4, "m5", true))
	o.Members[1].AbsentFor = 9 * time.Second
	o.Members[2].AbsentFor = 9 * time.Second

	d := unguarded.PlanLeave(o)
	if d.Kind == RemoveMember && d.MemberID == o.LeaderID {
		t.Errorf("PlanLeave removes the leader %x while voter 3 is stale too: %q; Check says: %v", d.MemberID, d.Reason, Check(o, d))
	}
}

// With two unhealthy stale voters (6 voters), the leader listed first: the
// heir removes the one staleMembers ranks first.
func TestALeavingHeirRemovesStaleVotersInStaleMembersOrder(t *testing.T) {
	o := Observation{Self: Self{Name: "m0"}, Running: true, SelfID: 1, MembersKnown: true, HoldsLock: true, DataInherited: true, DesiredSize: 6, StaleAfter: 5 * time.Second}
	o.LeaderID = 2
	o.Members = members(voter(1, "m0", true), voter(2, "m1", false), voter(3, "m2", false), voter(4, "m3", true), voter(5, "m4", true), voter(6, "m5", true))
	o.Members[1].AbsentFor = 9 * time.Second
	o.Members[2].AbsentFor = 9 * time.Second
	want := unguarded.staleMembers(o)[0].ID
	d := unguarded.PlanLeave(o)
	if d.Kind == RemoveMember && d.MemberID != want {
		t.Errorf("PlanLeave removes %x (leader %x), staleMembers would remove %x first; Check says: %v", d.MemberID, o.LeaderID, want, Check(o, d))
	}
}

// Invariant 5: a leaving heir of an incarnation the record no longer names
// (a newer epoch recorded, still seeding) removes no other member of it;
// Plan's running rules never reach stale removal in that state either.
func TestALeavingHeirLeavesASupersededIncarnationsMembersAlone(t *testing.T) {
	o := Observation{Self: Self{Name: "m0"}, Running: true, SelfID: 1, MembersKnown: true, HoldsLock: true, DataInherited: true, DesiredSize: 3, StaleAfter: 5 * time.Second}
	o.Local = Local{Name: "m0", Token: "old", Epoch: 2, ClusterID: 7}
	o.Record = &Record{Token: "new", Epoch: 3, Seeder: "m9"}
	o.LeaderID = 2
	o.Members = members(voter(1, "m0", true), voter(2, "m1", true), voter(3, "m2", true), voter(4, "m3", false))
	o.Members[3].AbsentFor = 9 * time.Second
	d := unguarded.PlanLeave(o)
	if d.Kind == RemoveMember && d.MemberID == 4 {
		po := o
		po.DataInherited = false
		t.Errorf("superseded incarnation: PlanLeave removes stale voter 4 (%q); Check: %v; Plan would: %s %q", d.Reason, Check(o, d), unguarded.Plan(po).Kind, unguarded.Plan(po).Reason)
	}
}

// A voter is "gone" only in this member's view: a replacement running from
// inherited data is listed under its new allocation's name and counts as
// present only through its status answer (task/observe.go: o.Peers). While
// a listed instance does not answer (Unreachable 1) it may be that voter,
// alive: the heir removes nothing (the leader's ordinary rule may, later).
func TestALeavingHeirRemovesNoVoterWhileAListedInstanceIsSilent(t *testing.T) {
	o := Observation{Self: Self{Name: "m0"}, Running: true, SelfID: 1, MembersKnown: true, HoldsLock: true, DataInherited: true, DesiredSize: 4, StaleAfter: 5 * time.Second, Unreachable: 1}
	o.LeaderID = 2
	o.Members = members(voter(1, "m0", true), voter(2, "m1", true), voter(3, "m2", true), voter(4, "m3", false))
	o.Members[3].AbsentFor = 9 * time.Second
	if d := unguarded.PlanLeave(o); d.Kind == RemoveMember && d.MemberID == 4 {
		t.Errorf("removes m3 while a listed instance does not answer (it may be m3 under its inherited name): %q", d.Reason)
	}
}
