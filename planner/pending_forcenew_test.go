package planner

import "testing"

// A recovery seeder that recorded epoch 3 from its own data, rewrote its
// metadata (token tok3, ForceNew) and crashed before its etcd started,
// while the old cluster (tok2) got its quorum back and acknowledged writes
// up to 600 (review rev13b). Its ForceNewCluster start would confirm
// epoch 3 from revision 500 and set the old members' 501..600 aside: it
// waits for the operator, and 'recover -keep-running' is its way out,
// after which it sets its data (a prefix of tok2) aside.
func TestPendingForceNewStartWaitsBesideAQuorumAndKeepRunningFreesIt(t *testing.T) {
	rec := &Record{Token: "tok3", Epoch: 3, Seeder: "m0", Source: FromData, LastConfirmedToken: "tok2", LastConfirmedEpoch: 2}
	voter := func(name string) PeerStatus {
		return PeerStatus{Name: name, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Running: true, Healthy: true, Revision: 600}
	}
	members := []Member{{ID: 1, Name: "m0"}, {ID: 2, Name: "m1", Healthy: true}, {ID: 3, Name: "m2", Healthy: true}}
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, DesiredSize: 3, HoldsLock: true, RecoveryGrace: 1,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: rec,
		Local: Local{Cluster: "c", Name: "m0", Token: "tok3", Epoch: 3, MemberID: 1, Revision: 500, ForceNewPending: true, Unstarted: true},
		Peers: []PeerStatus{voter("m1"), voter("m2")}}
	d := Plan(o)
	if d.Kind != Wait || !d.AwaitsOperator {
		t.Fatalf("the seeder's pending ForceNewCluster start beside a quorum of tok2 that acknowledged writes past its data: %s awaits=%v (%s)", d.Kind, d.AwaitsOperator, d.Reason)
	}
	t.Logf("seeder waits: %s", d.Reason)
	// With every check of a resumed recovery holding, it starts.
	quiet := o
	quiet.Peers = []PeerStatus{{Name: "m1", Token: "tok2", Epoch: 2, Revision: 500}, {Name: "m2", Token: "tok2", Epoch: 2, Revision: 480}}
	if d := Plan(quiet); d.Kind != Rejoin {
		t.Fatalf("no quorum, every instance answers, no newer copy of tok2: %s (%s)", d.Kind, d.Reason)
	}
	// A peer holds the source line further: not from older data.
	newer := quiet
	newer.Peers = []PeerStatus{{Name: "m1", Token: "tok2", Epoch: 2, Revision: 520}, {Name: "m2", Token: "tok2", Epoch: 2, Revision: 480}}
	if d := Plan(newer); d.Kind != Wait || !d.AwaitsOperator {
		t.Fatalf("peer m1 holds tok2 at 520, above the seeder's 500: %s (%s)", d.Kind, d.Reason)
	}

	// The way out: -keep-running records tok2, beside data that never started.
	v := OperatorView{Record: rec, Answered: []PeerStatus{{Name: "m0", Token: "tok3", Epoch: 3, Revision: 500, ForceNewPending: true, Unstarted: true}, voter("m1"), voter("m2")}, NewToken: "tok4"}
	kept, err := OperatorKeepRunning(v)
	if err != nil {
		t.Fatalf("recover -keep-running refuses beside data whose ForceNewCluster start never happened (a wedge): %v", err)
	}
	if kept.Token != "tok2" || kept.Epoch != 2 || kept.ClusterID != 0xc2 {
		t.Fatalf("kept %+v, want tok2 epoch 2 cluster c2", kept)
	}
	// Data of the recorded epoch that started still refuses.
	started := v
	started.Answered = []PeerStatus{{Name: "m0", Token: "tok3", Epoch: 3, Revision: 500}, voter("m1"), voter("m2")}
	if _, err := OperatorKeepRunning(started); err == nil {
		t.Fatalf("recover -keep-running recorded over data of epoch 3 that started")
	}

	// Under the rewritten record the seeder sets its data aside (a prefix
	// of tok2), never starts it as epoch 3 nor re-records epoch 3.
	after := o
	after.Record = &kept
	after.MembersKnown, after.MembersClusterID, after.Members = true, 0xc2, members
	if d := Plan(after); d.Kind != SetAside {
		t.Fatalf("under the kept record of tok2 the seeder's never-started data: %s (%s)", d.Kind, d.Reason)
	}
	after.MembersKnown = false
	if d := Plan(after); d.Kind != Wait {
		t.Fatalf("under the kept record, no member list: %s (%s)", d.Kind, d.Reason)
	}
}
