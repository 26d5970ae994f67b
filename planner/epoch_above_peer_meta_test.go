package planner

import (
	"testing"
	"time"
)

// Review rev18c N3: seed 1009859's shape with the epoch-2 metadata on a
// peer of the restorer. m2-4 joined epoch 2 and lost its data (its
// metadata names epoch 2); Consul lost its state; m0-3, the lowest name,
// holds nothing at all and restores snap-511 (epoch 1) without a record.
// Before, only the restorer's own metadata counted: it recorded epoch 2
// again beside a collected voter of epoch 2. Peers report the epoch their
// metadata names (PeerStatus.MetaEpoch): it records epoch 3.
func TestARestoreWithoutRecordIsAboveTheEpochAPeersMetadataNames(t *testing.T) {
	o := Observation{
		ClusterName: "kit", Self: Self{Name: "m0-3", PeerURL: "http://m0-3:2380"}, NewToken: "tok826", DesiredSize: 3,
		RecoveryGrace: 20 * time.Second, RecordMissingFor: 23 * time.Second, HoldsLock: true,
		Local:          Local{Empty: true},
		Instances:      []Instance{{Name: "m0-3"}, {Name: "m1-2"}, {Name: "m2-4"}},
		Peers:          []PeerStatus{{Name: "m1-2"}, {Name: "m2-4", MetaEpoch: 2}},
		LatestSnapshot: &SnapshotInfo{Name: "snap-511", Revision: 164, Epoch: 1},
		SnapshotEpoch:  1,
	}
	d := Plan(o)
	if d.Kind != RecoverQuorum || d.Record == nil || d.Record.Epoch != 3 {
		t.Fatalf("%s %+v (%s): want a restore of snap-511 as epoch 3, above the epoch 2 m2-4's metadata names", d.Kind, d.Record, d.Reason)
	}
	if err := Check(o, d); err != nil {
		t.Fatalf("Check refuses the fixed decision: %v", err)
	}
	bad := (Faults{RecoverBelowPeerMetaEpoch: true}).plan(o)
	if bad.Record == nil || bad.Record.Epoch != 2 {
		t.Fatalf("RecoverBelowPeerMetaEpoch: %s %+v, want epoch 2", bad.Kind, bad.Record)
	}
	if err := Check(o, bad); err == nil {
		t.Fatalf("Check passes a restore as epoch 2 beside a peer's metadata of epoch 2")
	}

	// A quorum-loss recovery under an older record Consul restored
	// (epoch 1) records above a peer's metadata epoch 2 too.
	q := o
	q.Record = &Record{ClusterID: 0x18, Token: "tok19", Epoch: 1, Seeder: "m1-1"}
	q.QuorumLostFor, q.RecordMissingFor = 25*time.Second, 0
	if got := (rules{}).nextEpoch(q); got != 3 {
		t.Fatalf("nextEpoch = %d under record epoch 1 with a peer's metadata of epoch 2, want 3", got)
	}
	if got := (rules{RecoverBelowPeerMetaEpoch: true}).nextEpoch(q); got != 2 {
		t.Fatalf("RecoverBelowPeerMetaEpoch: nextEpoch = %d, want 2", got)
	}

	// A peer's metadata that leaves no room below 2^64 was not written
	// by etcd-nomad: it counts for nothing (this member's own asks an
	// operator: metaLeavesNoRoom).
	top := o
	top.Peers = []PeerStatus{{Name: "m1-2"}, {Name: "m2-4", MetaEpoch: ^uint64(0)}}
	if d := Plan(top); d.Kind != RecoverQuorum || d.Record.Epoch != 2 {
		t.Fatalf("a peer's metadata at 2^64-1: %s %+v (%s), want the restore as epoch 2", d.Kind, d.Record, d.Reason)
	}
}

// The same for a first seed with no record and no snapshot: epoch 1 was
// chosen whatever a member's metadata names; a collected voter of the
// lost epoch-2 record that comes back would take the seed for older and
// re-record epoch 2 over it, setting the seed's writes aside.
func TestAFirstSeedIsAboveTheEpochAMembersMetadataNames(t *testing.T) {
	o := Observation{
		ClusterName: "kit", Self: Self{Name: "m0-3", PeerURL: "http://m0-3:2380"}, NewToken: "tok826", DesiredSize: 3,
		HoldsLock: true, RecoveryGrace: 20 * time.Second,
		Local:     Local{Empty: true},
		Instances: []Instance{{Name: "m0-3"}, {Name: "m1-2"}, {Name: "m2-4"}},
		Peers:     []PeerStatus{{Name: "m1-2"}, {Name: "m2-4", MetaEpoch: 4}},
	}
	d := Plan(o)
	if d.Kind != Seed || d.Record == nil || d.Record.Epoch != 5 {
		t.Fatalf("%s %+v (%s): want a seed of epoch 5, above the epoch 4 m2-4's metadata names", d.Kind, d.Record, d.Reason)
	}
	if err := Check(o, d); err != nil {
		t.Fatalf("Check refuses the fixed seed: %v", err)
	}
	own := o
	own.Local, own.Peers = Local{Empty: true, Cluster: "kit", MetaEpoch: 2}, []PeerStatus{{Name: "m1-2"}, {Name: "m2-4"}}
	if d := Plan(own); d.Kind != Seed || d.Record.Epoch != 3 {
		t.Fatalf("own metadata of epoch 2: %s %+v, want a seed of epoch 3", d.Kind, d.Record)
	}
	bad := (Faults{SeedBelowMetaEpoch: true}).plan(o)
	if bad.Kind != Seed || bad.Record.Epoch != 1 {
		t.Fatalf("SeedBelowMetaEpoch: %s %+v, want a seed of epoch 1", bad.Kind, bad.Record)
	}
	if err := Check(o, bad); err == nil {
		t.Fatalf("Check passes a first seed of epoch 1 beside a peer's metadata of epoch 4")
	}
	if d := Plan(Observation{ClusterName: "kit", Self: Self{Name: "m0"}, NewToken: "t", DesiredSize: 1, HoldsLock: true, Local: Local{Empty: true}, Instances: []Instance{{Name: "m0"}}}); d.Kind != Seed || d.Record.Epoch != 1 {
		t.Fatalf("no metadata anywhere: %s %+v, want epoch 1", d.Kind, d.Record)
	}
}

// An empty member taking over the unconfirmed seed of a gone seeder goes
// above a peer's metadata epoch too, and Check asks exactly that epoch.
func TestASeedTakeoverIsAboveAPeersMetadataEpoch(t *testing.T) {
	o := Observation{
		ClusterName: "kit", Self: Self{Name: "m0-1", PeerURL: "http://m0-1:2380"}, NewToken: "tok30", DesiredSize: 3,
		RecoveryGrace: 20 * time.Second, SeederGoneFor: 21 * time.Second, HoldsLock: true,
		Record:    &Record{Token: "tok19", Epoch: 1, Seeder: "m1-0"},
		Local:     Local{Empty: true},
		Instances: []Instance{{Name: "m0-1"}, {Name: "m1-1"}, {Name: "m2-0"}},
		Peers:     []PeerStatus{{Name: "m1-1", MetaEpoch: 3}, {Name: "m2-0"}},
	}
	d := Plan(o)
	if d.Kind != Seed || d.Record == nil || d.Record.Epoch != 4 {
		t.Fatalf("%s %+v (%s): want a seed of epoch 4, above m1-1's metadata epoch 3", d.Kind, d.Record, d.Reason)
	}
	if err := Check(o, d); err != nil {
		t.Fatalf("Check refuses the correct takeover: %v", err)
	}
	bad := (Faults{RecoverBelowPeerMetaEpoch: true}).plan(o)
	if bad.Record == nil || bad.Record.Epoch != 2 {
		t.Fatalf("RecoverBelowPeerMetaEpoch: %s %+v, want epoch 2", bad.Kind, bad.Record)
	}
	if err := Check(o, bad); err == nil {
		t.Fatalf("Check passes a takeover as epoch 2 beside a peer's metadata of epoch 3")
	}
}

// 'etcd-nomad recover' records above the epoch an answering member's
// metadata names without data, from a member or from a snapshot.
func TestOperatorRecoveryIsAboveAMembersMetadataEpoch(t *testing.T) {
	rec := &Record{ClusterID: 0x18, Token: "tok19", Epoch: 1, Seeder: "m0"}
	answered := []PeerStatus{
		{Name: "m0", MemberID: 1, Token: "tok19", Epoch: 1, ClusterID: 0x18, Revision: 100},
		{Name: "m1", MetaEpoch: 3},
		{Name: "m2"}}
	v := OperatorView{Record: rec, From: "m0", Answered: answered, NewToken: "op"}
	got, err := OperatorRecovery(v)
	if err != nil || got.Epoch != 4 {
		t.Fatalf("recover -from m0: %+v %v, want epoch 4 above m1's metadata epoch 3", got, err)
	}
	if got, _ := (Faults{OperatorBelowMetaEpoch: true}).OperatorRecovery(v); got.Epoch != 2 {
		t.Fatalf("OperatorBelowMetaEpoch: epoch %d, want 2", got.Epoch)
	}
	s := v
	s.From, s.Snapshot, s.AcceptLoss = "m2", &SnapshotInfo{Name: "snap-1", Epoch: 1, Revision: 90}, true
	got, err = OperatorSnapshotRecovery(s)
	if err != nil || got.Epoch != 4 {
		t.Fatalf("recover -from snapshot: %+v %v, want epoch 4", got, err)
	}
	if got, _ := (Faults{OperatorBelowMetaEpoch: true}).OperatorSnapshotRecovery(s); got.Epoch != 2 {
		t.Fatalf("OperatorBelowMetaEpoch: epoch %d, want 2", got.Epoch)
	}
}

// 'etcd-nomad snapshot restore' records above what the members' data and
// metadata without data name, not only above the record and the snapshot:
// with no record (Consul lost its state) a restore of epoch-1 snap-511
// was recorded as epoch 2 beside a member whose metadata names epoch 2,
// and beside data of epoch 3 that would re-record epoch 3 over it.
func TestHandRestoreIsAboveWhatTheMembersName(t *testing.T) {
	none := &Record{}
	answered := []PeerStatus{{Name: "m0"}, {Name: "m1", MetaEpoch: 2}, {Name: "m2"}}
	if e, err := HandRestoreEpoch(none, 1, answered); err != nil || e != 3 {
		t.Fatalf("beside metadata of epoch 2: epoch %d, %v; want 3", e, err)
	}
	answered[2] = PeerStatus{Name: "m2", Token: "t3", Epoch: 3, Revision: 40}
	if e, err := HandRestoreEpoch(none, 1, answered); err != nil || e != 4 {
		t.Fatalf("beside data of epoch 3: epoch %d, %v; want 4", e, err)
	}
	if e, _ := (Faults{OperatorBelowMetaEpoch: true}).HandRestoreEpoch(none, 1, answered); e != 2 {
		t.Fatalf("OperatorBelowMetaEpoch: epoch %d, want 2 (the snapshot's next)", e)
	}
	if e, err := HandRestoreEpoch(&Record{Epoch: 7, ClusterID: 1}, 1, answered); err != nil || e != 8 {
		t.Fatalf("under a record of epoch 7: epoch %d, %v; want 8", e, err)
	}
}
