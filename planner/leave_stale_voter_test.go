package planner

import (
	"testing"
	"time"
)

// A scale-down and a destructive update in one Nomad deployment: one
// scaled-away voter's own removal was refused while another member
// stopped, so it left as a member and is gone from the provider. The next
// member Nomad replaces (its replacement inherits its data) would leave
// the others below quorum by stopping, only because that gone voter still
// counts: it removes the gone voter first and keeps its handover, instead
// of removing itself (which dropped the e2e cluster to 2 voters and made
// the replacement set the data aside and join empty).
func TestALeavingMemberWithAnHeirRemovesAStaleVoterFirst(t *testing.T) {
	o := Observation{Self: Self{Name: "m0"}, Running: true, SelfID: 1, MembersKnown: true, HoldsLock: true, DataInherited: true, DesiredSize: 3, StaleAfter: 5 * time.Second}
	o.Members = members(voter(1, "m0", true), voter(2, "m1", true), voter(3, "m2", true), voter(4, "m3", false))
	o.Members[3].AbsentFor = 9 * time.Second

	d := unguarded.PlanLeave(o)
	if d.Kind != RemoveMember || d.MemberID != 4 {
		t.Fatalf("stale voter m3 keeps the others below quorum: got %s member %x %q, want %s of m3 (4)", d.Kind, d.MemberID, d.Reason, RemoveMember)
	}
	if d := (Faults{LeaveBesideStaleVoter: true}).PlanLeave(o); d.Kind != RemoveMember || d.MemberID != 1 {
		t.Fatalf("with LeaveBesideStaleVoter: got %s member %x, want the old removal of this member", d.Kind, d.MemberID)
	}

	// Once it is gone, the handover goes ahead.
	after := o
	after.Members = o.Members[:3]
	if d := unguarded.PlanLeave(after); d.Kind != KeepMembership {
		t.Fatalf("stale voter removed: got %s %q, want %s", d.Kind, d.Reason, KeepMembership)
	}

	// Not gone long enough (the provider may list it again): this
	// member's own removal stays the way out, as before.
	young := o
	young.Members = append([]Member(nil), o.Members...)
	young.Members[3].AbsentFor = 2 * time.Second
	if d := unguarded.PlanLeave(young); d.Kind != RemoveMember || d.MemberID != 1 {
		t.Fatalf("voter absent for less than StaleAfter: got %s member %x %q, want this member's removal", d.Kind, d.MemberID, d.Reason)
	}

	// Two voters down: removing one stale voter still leaves the others
	// below quorum, so no handover is bought with it.
	two := o
	two.Members = append([]Member(nil), o.Members...)
	two.Members[2].Healthy = false
	if d := unguarded.PlanLeave(two); d.Kind == RemoveMember && d.MemberID == 4 {
		t.Fatalf("two voters down: removed the stale voter although the handover stays impossible (%q)", d.Reason)
	}
}
