package planner

import (
	"testing"
	"time"
)

// Review rev13b D3: 'recover -keep-running' records the running cluster
// (epoch 2) in place of an unconfirmed record of a higher epoch (3) that
// never started. Its seeder may still have left something of epoch 3
// behind (a never-started ForceNew copy it then sets aside; a snapshot
// taken by nobody, but an aside/ copy is enough): the next recovery must
// not record epoch 3 again, or two incarnations share it (invariant 9:
// epochs only grow, never repeat).
func TestRecoveryAfterKeepRunningRecordsAboveTheReplacedEpoch(t *testing.T) {
	abandoned := &Record{Token: "tok3", Epoch: 3, Seeder: "m0", Source: FromData, LastConfirmedToken: "tok2", LastConfirmedEpoch: 2}
	voter := func(name string) PeerStatus {
		return PeerStatus{Name: name, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Running: true, Healthy: true, Revision: 400}
	}
	kept, err := OperatorKeepRunning(OperatorView{Record: abandoned, Answered: []PeerStatus{voter("m0"), voter("m1"), voter("m2")}})
	if err != nil {
		t.Fatalf("keep-running beside the abandoned epoch-3 record: %v", err)
	}
	if kept.Epoch != 2 {
		t.Fatalf("kept record names epoch %d, want the running cluster's 2", kept.Epoch)
	}
	// Kept twice (the abandoned record came back again) loses nothing.
	again := kept
	again.ClusterID, again.Token, again.Epoch = 0, "tokX", 1
	if k2, err := OperatorKeepRunning(OperatorView{Record: &again, Answered: []PeerStatus{voter("m0"), voter("m1"), voter("m2")}}); err != nil || k2.HighestEpoch < 3 {
		t.Errorf("keep-running over a record carrying highest epoch 3: %+v, %v; want the highest epoch carried", k2, err)
	}

	// The kept cluster loses its quorum; m1 survives and recovers.
	o := Observation{ClusterName: "c", Self: Self{Name: "m1"}, HoldsLock: true, RecoveryGrace: 20 * time.Second, QuorumLostFor: 30 * time.Second,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Running: true, SelfID: 0x11, Record: &kept,
		Local: Local{Cluster: "c", Name: "m1", Token: "tok2", Epoch: 2, MemberID: 0x11, ClusterID: 0xc2, Revision: 450},
		Peers: []PeerStatus{{Name: "m0"}, {Name: "m2"}}}
	d := Plan(o)
	if d.Kind != RecoverQuorum {
		t.Fatalf("quorum loss under the kept record: %s (%s); want a recovery", d.Kind, d.Reason)
	}
	if d.Record.Epoch <= 3 {
		t.Errorf("the recovery after keep-running records epoch %d: the abandoned record's epoch 3 is reused", d.Record.Epoch)
	}
	// So does an operator's recovery, from a member or from a snapshot.
	v := OperatorView{Record: &kept, From: "m1", NewToken: "tokN",
		Answered: []PeerStatus{{Name: "m1", Token: "tok2", Epoch: 2, ClusterID: 0xc2, Revision: 450}, {Name: "m0"}, {Name: "m2"}}}
	if got, err := OperatorRecovery(v); err != nil || got.Epoch <= 3 {
		t.Errorf("operator's recovery from m1 after keep-running: epoch %d, %v; want above 3", got.Epoch, err)
	}
	v.Snapshot, v.AcceptLoss = &SnapshotInfo{Name: "s2", Epoch: 2, Revision: 300}, true
	if got, err := OperatorSnapshotRecovery(v); err != nil || got.Epoch <= 3 {
		t.Errorf("operator's restore after keep-running: epoch %d, %v; want above 3", got.Epoch, err)
	}
	// Re-recording the cluster from data (the record was lost and an
	// older one came back, or it names an older epoch) keeps the bound.
	older := Record{ClusterID: 0xc1, Token: "tok1", Epoch: 1, Seeder: "m0", HighestEpoch: 3}
	o = Observation{ClusterName: "c", Self: Self{Name: "m1"}, HoldsLock: true, Running: true, SelfID: 0x11, MembersKnown: true, MembersClusterID: 0xc2, LeaderID: 0x11, DesiredSize: 3,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: &older,
		Local:   Local{Cluster: "c", Name: "m1", Token: "tok2", Epoch: 2, MemberID: 0x11, ClusterID: 0xc2, Revision: 450},
		Members: []Member{{ID: 0x10, Name: "m0", Healthy: true}, {ID: 0x11, Name: "m1", Healthy: true}, {ID: 0x12, Name: "m2", Healthy: true}},
		Peers:   []PeerStatus{voter("m0"), voter("m2")}}
	if d := Plan(o); d.Kind != RecordCluster || d.Record.HighestEpoch < 3 {
		t.Errorf("re-recording epoch 2 over a record carrying highest epoch 3: %s %+v (%s); want the bound carried", d.Kind, d.Record, d.Reason)
	}
}
