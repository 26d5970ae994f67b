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

// Sim seeds 417, 722 and 940 with the operator and collectRunning: the
// impatient operator's 'recover -from snapshot:latest' saw only the
// instances the provider lists, while Nomad had collected a serving
// majority; it went on, and was snapshotted, after the record. Once its
// hosts were stopped (their disks with them) the seeder restored the
// older snapshot the command chose, and the later writes, in the store
// only, were lost. The seeder now waits for the operator while the store
// holds a snapshot of an older epoch beyond what the command accepted.
func TestAnOperatorsRestoreWaitsBesideALaterSnapshot(t *testing.T) {
	o := ownOperatorRestore("snap-126", 67, 67, &SnapshotInfo{Name: "snap-203", Revision: 93, Epoch: 1})
	d := Plan(o)
	if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "snap-203") {
		t.Fatalf("the operator's restore of snap-126 (67) beside snap-203 (93): %s (%s), want a wait for the operator naming snap-203", d.Kind, d.Reason)
	}
	if b := (Faults{RestoreOverLaterSnapshot: true}).Plan(o); b.Kind != RecoverQuorum || b.Snapshot != "snap-126" {
		t.Fatalf("with RestoreOverLaterSnapshot: %s (%s), want the restore that loses revisions 68..93", b.Kind, b.Reason)
	}
	// What the command saw and accepted is no reason to wait.
	o.Record.AcceptedRevision = 93
	if d := Plan(o); d.Kind != RecoverQuorum || d.Snapshot != "snap-126" {
		t.Fatalf("snap-203 accepted by the command: %s (%s), want the restore", d.Kind, d.Reason)
	}
}

// Sim seed 121 with the operator and collectRunning: an operator's
// recorded restore was verified to revision 545; a segment of its chain
// was found damaged since, so every install refused below 545 and the
// seeder retried for good, saying only that it resumed. It now waits for
// the operator, naming the verified end.
func TestAnOperatorsRestoreBelowItsVerifiedRevisionAwaitsTheOperator(t *testing.T) {
	o := ownOperatorRestore("snap-1395", 545, 546, &SnapshotInfo{Name: "snap-1395", Revision: 540, Epoch: 1})
	d := Plan(o)
	if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "verifies only to revision 540") {
		t.Fatalf("the operator's restore verified to 545, its chain now to 540: %s (%s), want a wait for the operator", d.Kind, d.Reason)
	}
	if b := (Faults{ResumeBelowVerified: true}).Plan(o); b.Kind != RecoverQuorum {
		t.Fatalf("with ResumeBelowVerified: %s (%s), want the install that refuses every time", b.Kind, b.Reason)
	}
	o.LatestSnapshot.Revision = 545
	if d := Plan(o); d.Kind != RecoverQuorum {
		t.Fatalf("the chain reaching 545: %s (%s), want the restore", d.Kind, d.Reason)
	}
}

// ownOperatorRestore is member m0 holding no data under its own
// unconfirmed record of an operator's restore of snap (epoch 2, verified
// to sourceRev, data accepted up to acceptedRev), every instance
// answering empty, the store's newest snapshot latest.
func ownOperatorRestore(snap string, sourceRev, acceptedRev int64, latest *SnapshotInfo) Observation {
	return Observation{ClusterName: "c", Self: Self{Name: "m0"}, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n",
		RecoveryGrace: 20 * time.Second,
		Instances:     []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}},
		Peers:         []PeerStatus{{Name: "m1"}, {Name: "m2"}},
		Record: &Record{Token: "tokR", Epoch: 2, Seeder: "m0", Source: SnapshotSource(snap), LastConfirmedToken: "tok19", LastConfirmedEpoch: 1,
			Operator: true, SourceRevision: sourceRev, AcceptedRevision: acceptedRev},
		LatestSnapshot: latest}
}
