package planner

import (
	"strings"
	"testing"
	"time"
)

// The quorum-loss decisions that the simulation's collected allocations
// (sim Config.CollectRunning: Nomad makes allocations terminal while their
// processes still serve) showed wrong, each pinned with the observation
// the simulation's trace gave, fixed and with its switch.

// Sim seed 60 with CollectRunning: Consul restored an older record (epoch
// 1, confirmed) after epoch 2 ran and was snapshotted; epoch 2's last
// voter sits on a host Nomad collected, without a quorum. The recovery
// from the epoch-2 snapshot recorded "epoch 2" again: a second
// incarnation of an epoch that ran (invariant 9: epochs only grow).
func TestRecoveryEpochIsAboveTheNewestSnapshots(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m0-2"}, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n",
		RecoveryGrace: 20 * time.Second, QuorumLostFor: 20 * time.Second,
		Instances:      []Instance{{Name: "m0-2"}, {Name: "m1-3"}, {Name: "m2-4"}},
		Peers:          []PeerStatus{{Name: "m1-3"}, {Name: "m2-4"}},
		Record:         &Record{ClusterID: 0x18, Token: "tok19", Epoch: 1, Seeder: "m1-0"},
		LatestSnapshot: &SnapshotInfo{Name: "snap-684", Revision: 1000260, Epoch: 2}}
	d := Plan(o)
	if d.Kind != RecoverQuorum || d.Record == nil || d.Record.Epoch != 3 {
		t.Fatalf("recovery from an epoch-2 snapshot under an epoch-1 record: %s %+v (%s), want epoch 3 recorded", d.Kind, d.Record, d.Reason)
	}
	if b := (Faults{RecoverAtRecordEpoch: true}).Plan(o); b.Kind != RecoverQuorum || b.Record.Epoch != 2 {
		t.Fatalf("with RecoverAtRecordEpoch: %s %+v, want the second epoch 2 it restores", b.Kind, b.Record)
	}
	// The snapshot of the record's own epoch changes nothing.
	o.LatestSnapshot.Epoch = 1
	if d := Plan(o); d.Kind != RecoverQuorum || d.Record.Epoch != 2 {
		t.Fatalf("recovery from an epoch-1 snapshot under an epoch-1 record: %s %+v, want epoch 2", d.Kind, d.Record)
	}
}

// Sim seed 1051 with CollectRunning: Nomad collected two voters of the
// cluster while they served; a partition split them, so neither has a
// leader, and the one this member reaches answers as a voter without one
// (the other is cut off). When the partition heals they serve again: a
// recovery here started a second cluster beside them.
func TestNoRecoveryBesideAnUnlistedVoter(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m0-4"}, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n",
		RecoveryGrace: 20 * time.Second, QuorumLostFor: 21 * time.Second,
		Instances:      []Instance{{Name: "m0-4"}, {Name: "m1-4"}, {Name: "m2-4"}},
		Peers:          []PeerStatus{{Name: "m1-4"}, {Name: "m2-4"}},
		Record:         &Record{ClusterID: 0x18, Token: "tok19", Epoch: 1, Seeder: "m0-2"},
		LatestSnapshot: &SnapshotInfo{Name: "snap-1143", Revision: 1000266, Epoch: 2},
		UnlistedVoters: []string{"m2-2 (http://m2-2:2379)"}}
	d := Plan(o)
	if d.Kind != Wait || !strings.Contains(d.Reason, "m2-2") || !strings.Contains(d.Reason, "without a leader") {
		t.Fatalf("beside an unlisted voter without a leader: %s (%s), want a wait naming it", d.Kind, d.Reason)
	}
	if err := Check(o, (Faults{RecoverBesideUnlistedVoter: true}).Plan(o)); err == nil || !strings.Contains(err.Error(), "invariant 10") {
		t.Fatalf("the planner with RecoverBesideUnlistedVoter: Check says %v, want invariant 10", err)
	}
	o.UnlistedVoters = nil
	if d := Plan(o); d.Kind != RecoverQuorum {
		t.Fatalf("with no voter answering: %s (%s), want the recovery", d.Kind, d.Reason)
	}
}

// Sim seed 897 with CollectRunning: Consul lost its state (the record and
// the summary with it) while a majority Nomad collected served behind a
// partition; an empty member that had just restarted found nobody to ask
// and restored the newest snapshot at once, beside it. A restore with no
// record now waits the recovery grace, time for that majority's leader to
// write its summary again (it does every few seconds) and for the
// partition to heal.
func TestARestoreWithoutRecordWaitsTheGrace(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m0-3"}, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n",
		RecoveryGrace: 20 * time.Second, RecordMissingFor: 5 * time.Second,
		Instances:      []Instance{{Name: "m0-3"}, {Name: "m1-3"}},
		Peers:          []PeerStatus{{Name: "m1-3"}},
		LatestSnapshot: &SnapshotInfo{Name: "snap-487", Revision: 120, Epoch: 2}}
	if d := Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "waiting the recovery grace") {
		t.Fatalf("5 s without a record: %s (%s), want a wait for the grace", d.Kind, d.Reason)
	}
	if err := Check(o, (Faults{RestoreWithoutGrace: true}).Plan(o)); err == nil || !strings.Contains(err.Error(), "invariant 10") {
		t.Fatalf("the planner with RestoreWithoutGrace: Check says %v, want invariant 10", err)
	}
	o.RecordMissingFor = o.RecoveryGrace
	if d := Plan(o); d.Kind != RecoverQuorum || d.Record.Epoch != 3 {
		t.Fatalf("the grace without a record: %s %+v (%s), want the restore as epoch 3", d.Kind, d.Record, d.Reason)
	}
}
