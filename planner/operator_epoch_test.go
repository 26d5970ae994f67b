package planner

import (
	"testing"
	"time"
)

// Consul restored an older record (epoch 2); the store's newest snapshot is
// of epoch 4 (a line that ran since). The operator recovers from m1's data
// accepting the loss: the new epoch must be above the snapshot's, else the
// replaced line's snapshot stays "newest" (snapshot.Later orders by epoch)
// and a later quorum loss restores it over the new line's writes.
func TestOperatorRecoveryFromAMemberRecordsAnEpochAboveTheNewestSnapshot(t *testing.T) {
	rec := &Record{ClusterID: 0xc1, Token: "tokA", Epoch: 2, Seeder: "m0"}
	latest := &SnapshotInfo{Name: "s4", Revision: 500, Epoch: 4}
	v := OperatorView{Record: rec, From: "m1", NewToken: "tokN", Latest: latest, AcceptLoss: true,
		Answered: []PeerStatus{{Name: "m1", Token: "tokA", Epoch: 2, Revision: 300}, {Name: "m0"}, {Name: "m2"}}}
	got, err := OperatorRecovery(v)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("operator record epoch %d, newest snapshot epoch %d", got.Epoch, latest.Epoch)
	// The new line (epoch got.Epoch) runs, acknowledges writes up to 450,
	// then loses its quorum; m1 survives with data.
	nrec := got
	nrec.ClusterID = 0xd2
	o := Observation{ClusterName: "c", Self: Self{Name: "m1"}, HoldsLock: true, RecoveryGrace: 20 * time.Second, QuorumLostFor: 30 * time.Second,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Running: true, SelfID: 0x11,
		Local:          Local{Cluster: "c", Name: "m1", Token: "tokN", Epoch: got.Epoch, MemberID: 0x11, ClusterID: 0xd2, Revision: 450},
		Record:         &nrec,
		LatestSnapshot: latest,
		Peers:          []PeerStatus{{Name: "m0"}, {Name: "m2"}}}
	d := Plan(o)
	t.Logf("later quorum loss: %s from %s %s (%s)", d.Kind, d.From, d.Snapshot, d.Reason)
	o0 := o
	o0.Self, o0.Running, o0.SelfID, o0.Local = Self{Name: "m0"}, false, 0, Local{Empty: true}
	o0.Peers = []PeerStatus{{Name: "m1", Token: "tokN", Epoch: got.Epoch, MemberID: 0x11, Running: true, Revision: 450}, {Name: "m2"}}
	d = Plan(o0)
	t.Logf("m0 (lock holder): %s from %s %s (%s); Check: %v", d.Kind, d.From, d.Snapshot, d.Reason, Check(o0, d))
	if got.Epoch <= latest.Epoch {
		t.Errorf("operator's recovery recorded epoch %d, not above the newest snapshot's epoch %d", got.Epoch, latest.Epoch)
	}
	if d.Kind == RecoverQuorum && d.From == FromSnapshot {
		t.Errorf("the new line's data at 450 (acknowledged writes) is restored over by the replaced line's snapshot s4")
	}
}

// The same for 'recover -from snapshot:OLD -accept-data-loss' while the
// store holds a newer snapshot of a newer epoch than the record's: the
// restorer then refuses the operator's own fresh record (waits for an
// operator) and the checker calls it a violation.
func TestOperatorSnapshotRecoveryRecordsAnEpochAboveTheNewestSnapshot(t *testing.T) {
	rec := &Record{ClusterID: 0xc1, Token: "tokA", Epoch: 2, Seeder: "m0"}
	latest := &SnapshotInfo{Name: "s4", Revision: 500, Epoch: 4}
	v := OperatorView{Record: rec, From: "m0", NewToken: "tokN", Latest: latest, AcceptLoss: true,
		Snapshot: &SnapshotInfo{Name: "s2", Revision: 200, Epoch: 2},
		Answered: []PeerStatus{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}}
	got, err := OperatorSnapshotRecovery(v)
	if err != nil {
		t.Fatal(err)
	}
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, HoldsLock: true, RecoveryGrace: 20 * time.Second,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: &got, Local: Local{Empty: true},
		LatestSnapshot: latest, Peers: []PeerStatus{{Name: "m1"}, {Name: "m2"}}}
	d := Plan(o)
	t.Logf("record epoch %d; restorer: %s %s awaits=%v (%s)", got.Epoch, d.Kind, d.Snapshot, d.AwaitsOperator, d.Reason)
	if got.Epoch <= latest.Epoch {
		t.Errorf("operator's restore recorded epoch %d, not above the newest snapshot's epoch %d", got.Epoch, latest.Epoch)
	}
	if d.Kind != RecoverQuorum {
		t.Errorf("the restorer does not carry out the operator's accepted restore: %s (%s)", d.Kind, d.Reason)
	}
}
