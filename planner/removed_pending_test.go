package planner

import "testing"

// Never-started data of a member its cluster removed is set aside, as the
// same data without the pending flag is (review rv14-data,
// TestRV14NeverStartedDataOfARemovedMemberDoesNotWaitForever).
// RV14-2: after 'recover -keep-running' recorded tok2 (confirmed c2), the
// seeder's never-started data waits until tok2's member list names its
// member id. If tok2's leader removed that member meanwhile (a Nomad
// migrate/reschedule of the waiting allocation made it absent, StaleAfter
// passed while every running member waited on the record), no list ever
// names it again: the member waits for good, where data of any other
// removed member is set aside (AsideRemoved) and the member joins empty.
func TestNeverStartedDataOfARemovedMemberIsSetAside(t *testing.T) {
	kept := &Record{ClusterID: 0xc2, Token: "tok2", Epoch: 2, Seeder: "m1", HighestEpoch: 3} // as -keep-running writes it
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, DesiredSize: 3, HoldsLock: true, RecoveryGrace: 1,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: kept,
		Local: Local{Cluster: "c", Name: "m0", Token: "tok3", Epoch: 3, MemberID: 1, Revision: 500, ForceNewPending: true, Unstarted: true},
		Peers: []PeerStatus{{Name: "m1", Token: "tok2", Epoch: 2, ClusterID: 0xc2, Running: true, Healthy: true, Revision: 600},
			{Name: "m2", Token: "tok2", Epoch: 2, ClusterID: 0xc2, Running: true, Healthy: true, Revision: 600}},
		MembersKnown: true, MembersClusterID: 0xc2, Members: []Member{{ID: 2, Name: "m1", Healthy: true}, {ID: 3, Name: "m2", Healthy: true}}}
	d := Plan(o)
	t.Logf("pending, member removed: %s: %s", d.Kind, d.Reason)
	plain := o
	plain.Local.ForceNewPending, plain.Local.Token, plain.Local.Epoch = false, "tok2", 2
	pd := Plan(plain)
	t.Logf("same data without the pending flag: %s: %s", pd.Kind, pd.Reason)
	if d.Kind == Wait && !d.NeedsLock {
		t.Errorf("the seeder's never-started data of member 1, which cluster c2 (the record's, answering with a quorum) removed, waits for a list that names member 1: for good (%s)", d.Reason)
	}
	// Data whose start began is set aside only under the record
	// 'recover -keep-running -accept-data-loss' wrote (it carries epoch 3
	// as HighestEpoch); under an older record without it (Consul restored
	// a backup) it waits for an operator (review rev15-data F1).
	started := o
	started.Local.Unstarted = false
	if d := Plan(started); d.Kind != SetAside {
		t.Errorf("started data under the record -accept-data-loss wrote: %s: %s, want set-aside", d.Kind, d.Reason)
	}
	restored := started
	restored.Record = &Record{ClusterID: 0xc2, Token: "tok2", Epoch: 2, Seeder: "m1"}
	if d := Plan(restored); d.Kind != Wait || !d.AwaitsOperator {
		t.Errorf("started data under an older record no operator wrote: %s: %s, want a wait for an operator", d.Kind, d.Reason)
	}
}
