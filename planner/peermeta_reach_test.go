package planner

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Review rev19d W1: one peer /status answering meta_epoch = 2^64-2^20 (the
// largest answeredMetaEpoch takes) under a record of epoch 3 makes the
// automatic quorum-loss recovery record epoch 2^64-2^20+1, a record whose
// top leaves "no room": every later new epoch is held back for an
// operator, and 'recover' itself refuses (roomAbove). A metadata epoch
// that far above the record's top was not written by etcd-nomad (record
// HighestEpoch is bounded to maxEpochAhead above Epoch for that reason).
func TestAPeersMetaEpochOutOfReachDoesNotPushTheRecordToTheTop(t *testing.T) {
	planted := uint64(math.MaxUint64 - maxEpochAhead)
	o := Observation{
		ClusterName: "kit", Self: Self{Name: "m0", PeerURL: "http://m0:2380"}, NewToken: "tok-new", DesiredSize: 3,
		RecoveryGrace: 20 * time.Second, QuorumLostFor: 25 * time.Second, HoldsLock: true, Running: true, SelfID: 1,
		Record:    &Record{ClusterID: 0x18, Token: "tok3", Epoch: 3, Seeder: "m0"},
		Local:     Local{Cluster: "kit", Name: "m0", MemberID: 1, ClusterID: 0x18, Token: "tok3", Epoch: 3, Revision: 100},
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}},
		Peers:     []PeerStatus{{Name: "m1", MetaEpoch: planted}, {Name: "m2"}},
	}
	if d := (Faults{PeerMetaOutOfReach: true}).Plan(o); d.Record == nil || d.Record.Epoch <= 3+maxEpochAhead {
		t.Fatalf("with PeerMetaOutOfReach the planted meta_epoch should count: %s %+v (%s)", d.Kind, d.Record, d.Reason)
	}
	d := Plan(o)
	t.Logf("decision: %s %+v (%s)", d.Kind, d.Record, d.Reason)
	if d.Kind != RecoverQuorum || !strings.Contains(d.Reason, "ignoring the metadata of m1") {
		t.Fatalf("want a recovery whose reason names the ignored metadata: %s (%s)", d.Kind, d.Reason)
	}
	if d.Record != nil && d.Record.Epoch > 3+maxEpochAhead {
		next := *d.Record
		next.ClusterID = 0x99
		why := next.implausibleTop()
		_, err := OperatorRecovery(OperatorView{Record: &next, From: "m0", NewToken: "op",
			Answered: []PeerStatus{{Name: "m0", MemberID: 1, Token: next.Token, Epoch: next.Epoch, ClusterID: 0x99, Revision: 200}}})
		_, herr := HandRestoreEpoch(&next, 1, nil)
		t.Logf("'snapshot restore' over it: %v", herr)
		t.Fatalf("a peer's meta_epoch %d under a record of epoch 3 made the recovery record epoch %d; the next record is then implausible (%q) and 'recover -from m0' refuses: %v", planted, d.Record.Epoch, why, err)
	}
}

// The same for a first seed: with no record, one answering instance's
// meta_epoch = 2^64-2^20 makes the new cluster's first epoch 2^64-2^20+1.
func TestAPeersMetaEpochOutOfReachDoesNotMakeTheFirstSeedImplausible(t *testing.T) {
	planted := uint64(math.MaxUint64 - maxEpochAhead)
	o := Observation{
		ClusterName: "kit", Self: Self{Name: "m0", PeerURL: "http://m0:2380"}, NewToken: "tok", DesiredSize: 3,
		HoldsLock: true, RecoveryGrace: 20 * time.Second,
		Local:     Local{Empty: true},
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}},
		Peers:     []PeerStatus{{Name: "m1", MetaEpoch: planted}, {Name: "m2"}},
	}
	if d := (Faults{PeerMetaOutOfReach: true}).Plan(o); d.Kind != Seed || d.Record.implausibleTop() == "" {
		t.Fatalf("with PeerMetaOutOfReach the planted meta_epoch should count: %s %+v (%s)", d.Kind, d.Record, d.Reason)
	}
	// Within reach (2^20 above epoch 1), a peer's metadata counts.
	near := o
	near.Peers = []PeerStatus{{Name: "m1", MetaEpoch: 1 + maxEpochAhead}, {Name: "m2"}}
	if d := Plan(near); d.Kind != Seed || d.Record.Epoch != 2+maxEpochAhead {
		t.Fatalf("a peer's meta_epoch within reach: %s %+v (%s)", d.Kind, d.Record, d.Reason)
	}
	d := Plan(o)
	if d.Kind != Seed || d.Record.Epoch != 1 {
		t.Fatalf("want a first seed of epoch 1: %s %+v (%s)", d.Kind, d.Record, d.Reason)
	}
	if d.Kind == Seed && d.Record.implausibleTop() != "" {
		t.Fatalf("first seed as epoch %d: its record already leaves no room (%s)", d.Record.Epoch, d.Record.implausibleTop())
	}
}

// Review rev19d W1 and W4: a restore by hand counts a member's data epoch,
// as its metadata's, only within reach of what the record and the
// snapshot name; two forged answers (one with data, one without) do not
// walk the bound up for the automatic path either.
func TestPeersEpochsOutOfReachDoNotPushAHandRestoreNorARecovery(t *testing.T) {
	r := &Record{ClusterID: 0x18, Token: "tok3", Epoch: 3}
	far := uint64(1) << 40
	forged := []PeerStatus{{Name: "m1", Token: "x", Epoch: far}, {Name: "m2", MetaEpoch: far + 5}}
	if e, err := HandRestoreEpoch(r, 2, forged); err != nil || e != 4 {
		t.Fatalf("hand restore beside answers far ahead: epoch %d (%v), want 4", e, err)
	}
	if e, err := (Faults{PeerMetaOutOfReach: true}).HandRestoreEpoch(r, 2, forged); err != nil || e != far+6 {
		t.Fatalf("with PeerMetaOutOfReach: epoch %d (%v), want %d", e, err, far+6)
	}
	near := []PeerStatus{{Name: "m1", Token: "x", Epoch: 5}, {Name: "m2", MetaEpoch: 8}}
	if e, err := HandRestoreEpoch(r, 2, near); err != nil || e != 9 {
		t.Fatalf("hand restore beside answers within reach: epoch %d (%v), want 9", e, err)
	}
	o := Observation{
		ClusterName: "kit", Self: Self{Name: "m0", PeerURL: "http://m0:2380"}, NewToken: "tok-new", DesiredSize: 3,
		RecoveryGrace: 20 * time.Second, QuorumLostFor: 25 * time.Second, HoldsLock: true, Running: true, SelfID: 1,
		Record:    r,
		Local:     Local{Cluster: "kit", Name: "m0", MemberID: 1, ClusterID: 0x18, Token: "tok3", Epoch: 3, Revision: 100},
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}},
		Peers:     []PeerStatus{{Name: "m1", Token: "x", Epoch: far}, {Name: "m2", MetaEpoch: far + 5}},
	}
	if e := knownEpoch(o); e != 3 {
		t.Fatalf("knownEpoch beside a peer's data epoch far ahead: %d, want 3", e)
	}
	if got := (rules{}).peersMetaEpoch(o); got != 0 {
		t.Fatalf("peersMetaEpoch beside two forged answers: %d, want 0", got)
	}
}
