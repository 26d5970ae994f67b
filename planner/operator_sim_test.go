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
		t.Fatalf("quorum lost with m2 holding epoch 4 at 1000094 and the newest snapshot of epoch 3 at 1000240: %s from %s %s (%s); want m2 to recover from its data", d.Kind, d.From, d.Target, d.Reason)
	}
	// A snapshot of the data's epoch still beats older data.
	o.LatestSnapshot.Epoch = 4
	if d := Plan(o); d.Kind != RecoverQuorum || d.From != FromSnapshot {
		t.Fatalf("with the newest snapshot of epoch 4 at 1000240: %s (%s); want a recovery from it", d.Kind, d.Reason)
	}
}
