package planner

import (
	"strings"
	"testing"
	"time"
)

// Sim seed 1010563 (100 M run): epoch 4 was recovered from epoch 3 data;
// its voter was replaced before a second voter was promoted, and its
// learner m2-4 holds epoch 4 to revision 2000465 — the only copy of epoch
// 4's writes. The store's newest snapshot is of epoch 3 (the line epoch 4
// forked from), at 2000470 with its deltas: a higher number of another
// line. Restoring it set the learner's writes aside (red before: the
// learner was compared by revision only).
func TestNoRecoveryFromAnOlderEpochsSnapshotBesideALearnersNewerEpoch(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m0-4"}, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n",
		RecoveryGrace: 20 * time.Second, QuorumLostFor: 41 * time.Second,
		Instances:      []Instance{{Name: "m0-4"}, {Name: "m1-6"}, {Name: "m2-4"}},
		Peers:          []PeerStatus{{Name: "m1-6"}, {Name: "m2-4", MemberID: 0x56c, ClusterID: 0x3d3, Token: "tok1373", Epoch: 4, Revision: 2000465, Learner: true, Running: true}},
		Record:         &Record{ClusterID: 0x3d3, Token: "tok1373", Epoch: 4, Seeder: "m0-3", Source: FromData},
		LatestSnapshot: &SnapshotInfo{Name: "snap-1228", Revision: 2000470, Epoch: 3},
		SnapshotEpoch:  3,
	}
	d := Plan(o)
	if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "learner m2-4") {
		t.Fatalf("beside a learner's epoch 4 data, from an epoch 3 snapshot: %s (%s), want a wait for an operator naming the learner", d.Kind, d.Reason)
	}
	rec := &Record{Token: "n", Epoch: 5, Seeder: "m0-4", Source: SnapshotSource("snap-1228")}
	if err := Check(o, Decision{Kind: RecoverQuorum, Name: "m0-4", From: FromSnapshot, Snapshot: "snap-1228", Record: rec}); err == nil || !strings.Contains(err.Error(), "learner m2-4") {
		t.Fatalf("the checker on the restore beside the learner: %v, want invariant 4 naming m2-4", err)
	}
	// A snapshot of the learner's own epoch is compared by revision.
	o.LatestSnapshot = &SnapshotInfo{Name: "snap-e4", Revision: 2000470, Epoch: 4}
	o.SnapshotEpoch = 4
	if d := Plan(o); d.Kind != RecoverQuorum || d.Snapshot != "snap-e4" {
		t.Fatalf("beside a learner below a snapshot of its own epoch: %s (%s), want the restore", d.Kind, d.Reason)
	}
}

// The same one incarnation further on: epoch 5 lost every copy, and m2
// keeps epoch 4 data (a learner's, or a voter's kept until epoch 5 runs)
// at revision 1000 beside an epoch 3 snapshot at 1500 (an operator's
// recovery of epoch 4 from data below that snapshot makes it). Epoch 4 is
// another line than the snapshot's: 1000 < 1500 says nothing (review
// rev16b C, red before: olderDataNewer compared them by revision).
func TestNoRecoveryFromAnOlderEpochsSnapshotBesideASkippedEpochsData(t *testing.T) {
	for _, learner := range []bool{true, false} {
		o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n",
			RecoveryGrace: 20 * time.Second, QuorumLostFor: 41 * time.Second,
			Instances:      []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}},
			Peers:          []PeerStatus{{Name: "m1"}, {Name: "m2", MemberID: 0x56c, ClusterID: 0x3d4, Token: "tok4", Epoch: 4, Revision: 1000, Learner: learner}},
			Record:         &Record{ClusterID: 0x3d5, Token: "tok5", Epoch: 5, Seeder: "m9", Source: FromData},
			LatestSnapshot: &SnapshotInfo{Name: "snap-e3", Revision: 1500, Epoch: 3},
			SnapshotEpoch:  3,
		}
		d := Plan(o)
		if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "peer m2 holds epoch 4") {
			t.Errorf("learner %v: restore of an epoch 3 snapshot beside epoch 4 data: %s (%s), want a wait for an operator naming m2", learner, d.Kind, d.Reason)
		}
		rec := &Record{Token: "n", Epoch: 6, Seeder: "m0", Source: SnapshotSource("snap-e3")}
		if err := Check(o, Decision{Kind: RecoverQuorum, Name: "m0", From: FromSnapshot, Snapshot: "snap-e3", Record: rec}); err == nil || !strings.Contains(err.Error(), "peer m2") {
			t.Errorf("learner %v: the checker on the restore: %v, want invariant 4 naming m2", learner, err)
		}
	}
}
