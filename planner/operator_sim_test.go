package planner

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The store's newest snapshot with its deltas goes further than the
// operator's source: it may hold writes no member holds any more (sim seed
// 75 with the operator: all three members had lost their disks, and
// 'recover -from snapshot:' an older snapshot by name lost writes 265..330
// the newest one held). Both commands refuse without -accept-data-loss,
// naming the snapshot in the LossError, and go ahead with it.
func TestOperatorRecoveryBelowTheStoreNeedsAcceptLoss(t *testing.T) {
	rec := &Record{ClusterID: 0xc1, Token: "tokA", Epoch: 2, Seeder: "m0"}
	latest := &SnapshotInfo{Name: "s-new", Revision: 330, Epoch: 2}
	member := OperatorView{Record: rec, From: "m1", NewToken: "tokN", Latest: latest,
		Answered: []PeerStatus{{Name: "m1", Token: "tokA", Epoch: 2, Revision: 300}, {Name: "m0"}}}
	snap := OperatorView{Record: rec, From: "m1", NewToken: "tokN", Latest: latest, Snapshot: &SnapshotInfo{Name: "s-old", Revision: 264, Epoch: 2},
		Answered: []PeerStatus{{Name: "m1"}, {Name: "m0"}}}
	for _, c := range []struct {
		name  string
		v     OperatorView
		fence func(OperatorView) (Record, error)
	}{
		{"recover -from m1", member, OperatorRecovery},
		{"recover -from snapshot:s-old", snap, OperatorSnapshotRecovery},
	} {
		_, err := c.fence(c.v)
		var le *LossError
		if !errors.As(err, &le) || len(le.Snapshots) != 1 || le.Snapshots[0] != "s-new" || !strings.Contains(err.Error(), "-accept-data-loss") {
			t.Fatalf("%s below snapshot s-new (revision 330): %v; want a LossError naming s-new", c.name, err)
		}
		t.Logf("%s: %v", c.name, err)
		c.v.AcceptLoss = true
		if got, err := c.fence(c.v); err != nil || got.Epoch != 3 {
			t.Fatalf("%s -accept-data-loss: %+v, %v", c.name, got, err)
		}
		// Not newer: the source reaches as far.
		c.v.AcceptLoss, c.v.Latest = false, &SnapshotInfo{Name: "s-old", Revision: 264, Epoch: 2}
		if _, err := c.fence(c.v); err != nil {
			t.Fatalf("%s with the store's newest snapshot no newer than the source: %v", c.name, err)
		}
	}
}

// Consul brings back a restore record (an operator's here) after another
// incarnation of its epoch ran and was confirmed: resuming the restore
// would start a second cluster of that epoch, from older data (sim seed
// 243 with the operator: two seeds of epoch 2). The seeder waits for an
// operator while a peer holds another incarnation of an epoch as new as
// the record's, whether or not the operator wrote the record.
func TestRestoreRecordBroughtBackBesideANewerIncarnationWaits(t *testing.T) {
	for _, operator := range []bool{true, false} {
		rec := &Record{Token: "tokR", Epoch: 2, Seeder: "m0", Source: SnapshotSource("s1"), Operator: operator, SourceRevision: 56}
		o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, HoldsLock: true, RecoveryGrace: 20 * time.Second,
			Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: rec, Local: Local{Empty: true},
			LatestSnapshot: &SnapshotInfo{Name: "s1", Revision: 56, Epoch: 1},
			Peers:          []PeerStatus{{Name: "m1"}, {Name: "m2", Token: "tokB", Epoch: 2, MemberID: 9, Revision: 212}}}
		d := Plan(o)
		if d.Kind != Wait || !d.AwaitsOperator {
			t.Fatalf("operator %v: the seeder of restore record epoch 2 beside m2's incarnation tokB of epoch 2: %s (%s); want a wait for an operator", operator, d.Kind, d.Reason)
		}
		t.Logf("operator %v: %s", operator, d.Reason)
	}
}

// After an operator's restore of an older snapshot (accepting the loss),
// the new epoch's revisions start below those of the line it replaced,
// whose snapshots stay in the store. A later quorum loss must recover
// from the survivor's data of the record's epoch, not from the replaced
// line's snapshot of an older epoch at a higher revision (sim seed 845
// with the operator: the epoch-3 snapshot at revision 1000240 was
// restored over m2's epoch-4 data at 1000094, and epoch 4's writes were
// lost).
func TestRecoveryPrefersDataOverAnOlderEpochsSnapshot(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, HoldsLock: true, RecoveryGrace: 20 * time.Second, QuorumLostFor: 30 * time.Second,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Local: Local{Empty: true},
		Record:         &Record{ClusterID: 0x51e, Token: "tok4", Epoch: 4, Seeder: "m2"},
		LatestSnapshot: &SnapshotInfo{Name: "s3", Revision: 1000240, Epoch: 3},
		Peers:          []PeerStatus{{Name: "m1"}, {Name: "m2", Token: "tok4", Epoch: 4, MemberID: 9, Running: true, Revision: 1000094}}}
	d := Plan(o)
	if d.Kind == RecoverQuorum || !strings.Contains(d.Reason, "member m2 recovers (from data") {
		t.Fatalf("quorum lost with m2 holding epoch 4 at 1000094 and the newest snapshot of epoch 3 at 1000240: %s from %s %s (%s); want m2 to recover from its data", d.Kind, d.From, d.Snapshot, d.Reason)
	}
	// A snapshot of the data's epoch still beats older data.
	o.LatestSnapshot.Epoch = 4
	if d := Plan(o); d.Kind != RecoverQuorum || d.From != FromSnapshot {
		t.Fatalf("with the newest snapshot of epoch 4 at 1000240: %s (%s); want a recovery from it", d.Kind, d.Reason)
	}
}

// The same with no copy left but the store's: Consul brings back an
// operator's restore record after another incarnation of its epoch ran,
// was snapshotted and lost every member's copy (sim seed 243 with
// RotateCA: snap-167 at revision 56 restored over snap-594 at 208). The
// newest snapshot, of an epoch as new as the record's, was taken after
// the record was written: the seeder waits for an operator rather than
// restore the older one the record names.
func TestOperatorRestoreRecordBroughtBackBesideANewerSnapshotWaits(t *testing.T) {
	rec := &Record{Token: "tokR", Epoch: 2, Seeder: "m0", Source: SnapshotSource("snap-167"), Operator: true, SourceRevision: 56}
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, HoldsLock: true, RecoveryGrace: 20 * time.Second,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: rec, Local: Local{Empty: true},
		LatestSnapshot: &SnapshotInfo{Name: "snap-594", Revision: 208, Epoch: 2},
		Peers:          []PeerStatus{{Name: "m1"}, {Name: "m2"}}}
	if d := Plan(o); d.Kind != Wait || !d.AwaitsOperator {
		t.Fatalf("the seeder of the operator's restore of snap-167 beside snap-594 of epoch 2: %s (%s); want a wait for an operator", d.Kind, d.Reason)
	}
	// A newer snapshot of an older epoch than the record's was there when
	// the operator chose: the operator's choice stands.
	o.LatestSnapshot.Epoch = 1
	if d := Plan(o); d.Kind != RecoverQuorum || d.Snapshot != "snap-167" {
		t.Fatalf("with the newest snapshot of epoch 1: %s %s (%s); want the operator's restore of snap-167", d.Kind, d.Snapshot, d.Reason)
	}
}

// Consul restored a record (epoch 1) older than an incarnation that ran
// and was snapshotted (epoch 3): a recovery records the epoch after the
// newest snapshot's, never one below it (sim seed 2470 with the
// operator: epoch 2 was restored from a snapshot of epoch 3, and an
// operator's later 'recover -from snapshot:latest' took that snapshot for
// newer than a learner's epoch-2 data and set aside its writes unnamed).
func TestRecoveryRecordsAnEpochAboveTheNewestSnapshot(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, HoldsLock: true, RecoveryGrace: 20 * time.Second, QuorumLostFor: 30 * time.Second,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Local: Local{Empty: true},
		Record:         &Record{ClusterID: 0x18, Token: "tok1", Epoch: 1, Seeder: "m2"},
		LatestSnapshot: &SnapshotInfo{Name: "s3", Revision: 347, Epoch: 3},
		Peers:          []PeerStatus{{Name: "m1"}, {Name: "m2"}}}
	d := Plan(o)
	if d.Kind != RecoverQuorum || d.Record.Epoch != 4 {
		t.Fatalf("recovery from snapshot s3 of epoch 3 under a record of epoch 1: %s, record %+v (%s); want epoch 4", d.Kind, d.Record, d.Reason)
	}
	if err := Check(o, d); err != nil {
		t.Fatalf("Check refuses it: %v", err)
	}
}

// The same when the epoch-3 snapshot is one the record's lineage calls
// foreign (of another cluster id: the incarnation that ran after the
// record Consul restored): the member holds data beyond its revision and
// recovers from it, as epoch 4, never 2, which would be a second
// incarnation beside the snapshot's (review rev13-data 3).
func TestRecoveryRecordsAnEpochAboveAForeignSnapshot(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, HoldsLock: true, RecoveryGrace: 20 * time.Second, QuorumLostFor: 30 * time.Second,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Running: true, SelfID: 0x10,
		Local:  Local{Cluster: "c", Name: "m0", Token: "tok1", Epoch: 1, MemberID: 0x10, ClusterID: 0x18, Revision: 400},
		Record: &Record{ClusterID: 0x18, Token: "tok1", Epoch: 1, Seeder: "m2"},
		// task: the newest snapshot is of no incarnation of the record's
		// lineage, so it is no LatestSnapshot but a refused object.
		RefusedSnapshot: &RefusedSnapshot{Name: "s3", Epoch: 3, Revision: 347, Why: "of another incarnation"},
		SnapshotEpoch:   3,
		Peers:           []PeerStatus{{Name: "m1"}, {Name: "m2"}}}
	d := Plan(o)
	if d.Kind != RecoverQuorum || d.Record.Epoch != 4 {
		t.Fatalf("recovery from data at revision 400 beside the foreign snapshot s3 of epoch 3 under a record of epoch 1: %s, record %+v (%s); want epoch 4", d.Kind, d.Record, d.Reason)
	}
	if d := (Faults{RecoverBelowForeignSnapshotEpoch: true}).plan(o); Check(o, d) == nil {
		t.Fatalf("the checker passes %s as epoch %d beside a snapshot of epoch 3", d.Kind, d.Record.Epoch)
	}
}

// An operator recorded m0's restore (epoch 2) while no quorum answered;
// m0's cluster (epoch 1) got its quorum back, then a partition left m0
// alone: its own unconfirmed restore record must not set aside its data
// while the other instances do not answer (they may be that quorum, and
// are in sim seed 2768 with the operator).
func TestOwnRestoreRecordSetsNothingAsideWhileInstancesAreSilent(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, Running: true, SelfID: 0x30, RecoveryGrace: 20 * time.Second,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Unreachable: 2,
		Local:  Local{Cluster: "c", Name: "m0", Token: "tok19", Epoch: 1, MemberID: 0x30, ClusterID: 0x18, Revision: 405},
		Record: &Record{Token: "tok1200", Epoch: 2, Seeder: "m0", Source: SnapshotSource("snap-1118"), Operator: true, SourceRevision: 373}}
	for _, running := range []bool{true, false} {
		o.Running = running
		d := unguarded.Plan(o) // the planner's own decision, not Check's refusal
		if d.Kind == SetAside {
			t.Fatalf("running %v: m0 sets aside its epoch-1 data while 2 instances do not answer: %s", running, d.Reason)
		}
		t.Logf("running %v: %s (%s)", running, d.Kind, d.Reason)
	}
}

// An operator recorded m2's restore of a snapshot at revision 286,
// accepting to set aside the members' data up to 288; the old cluster got
// its quorum back and acknowledged writes up to 304 before losing it
// again (sim seed 2133 with the operator). Neither the restorer's own
// data nor a peer's beyond 288 may be set aside or restored over: the
// operator never accepted those writes.
func TestOperatorRestoreKeepsWritesAcknowledgedAfterIt(t *testing.T) {
	rec := &Record{Token: "tokR", Epoch: 4, Seeder: "m2", Source: SnapshotSource("s"), Operator: true, SourceRevision: 286, AcceptedRevision: 288}
	own := Observation{ClusterName: "c", Self: Self{Name: "m2"}, Running: true, SelfID: 0x13f, RecoveryGrace: 20 * time.Second,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: rec,
		Local: Local{Cluster: "c", Name: "m2", Token: "tok3", Epoch: 3, MemberID: 0x13f, ClusterID: 0x136, Revision: 304},
		Peers: []PeerStatus{{Name: "m0"}, {Name: "m1", Token: "tok3", Epoch: 3, Revision: 304}}}
	if d := unguarded.Plan(own); d.Kind == SetAside || d.Kind == RecoverQuorum {
		t.Fatalf("the restorer holding revision 304: %s (%s); want a wait", d.Kind, d.Reason)
	}
	peer := own
	peer.Running, peer.SelfID, peer.Local, peer.HoldsLock = false, 0, Local{Empty: true}, true
	peer.LatestSnapshot = &SnapshotInfo{Name: "s", Revision: 293, Epoch: 3}
	if d := unguarded.Plan(peer); d.Kind == RecoverQuorum {
		t.Fatalf("the restorer, empty, with m1 holding revision 304: %s (%s); want a wait", d.Kind, d.Reason)
	}
	// Data the operator accepted is set aside, and restored over.
	peer.Peers[1].Revision = 288
	if d := unguarded.Plan(peer); d.Kind != RecoverQuorum {
		t.Fatalf("with m1 at the accepted revision 288: %s (%s); want the restore", d.Kind, d.Reason)
	}
}
