package planner

import (
	"testing"
	"time"
)

// Sim seed 1009859: m0-3 joined cluster 2a2 (epoch 2, token tok668,
// restored from snap-511 of epoch 1) as a learner, lost its disk, and
// resumed the join: it wrote the metadata (epoch 2) and its start failed.
// Nomad collected m2-3, a voter of cluster 2a2 that still runs; Consul
// lost its state. With no record and no data anywhere, m0-3 restored
// snap-511 as epoch 2 (the snapshot's epoch + 1): a second incarnation of
// epoch 2 beside the one its own metadata names. The metadata is a record
// of epoch 2 that Consul's loss cannot undo (Local.MetaEpoch): the restore
// records epoch 3.
func TestRestoreWithoutRecordIsAboveTheEpochOwnMetadataNames(t *testing.T) {
	o := Observation{
		ClusterName: "kit", Self: Self{Name: "m0-3", PeerURL: "http://m0-3:2380"}, NewToken: "tok826", DesiredSize: 3,
		RecoveryGrace: 20 * time.Second, RecordMissingFor: 23 * time.Second, HoldsLock: true,
		Local:          Local{Empty: true, MetaEpoch: 2},
		Instances:      []Instance{{Name: "m0-3"}, {Name: "m1-2"}, {Name: "m2-4"}},
		Peers:          []PeerStatus{{Name: "m1-2"}, {Name: "m2-4"}},
		LatestSnapshot: &SnapshotInfo{Name: "snap-511", Revision: 164, Epoch: 1},
		SnapshotEpoch:  1,
	}
	d := Plan(o)
	t.Logf("%s: %s", d.Kind, d.Reason)
	if d.Kind != RecoverQuorum || d.Record == nil || d.Record.Epoch != 3 {
		t.Fatalf("%s %+v: want a restore of snap-511 as epoch 3, above the epoch 2 this member's metadata names", d.Kind, d.Record)
	}
	if err := Check(o, d); err != nil {
		t.Fatalf("Check refuses the fixed decision: %v", err)
	}
	bad := (Faults{RecoverBelowOwnMetaEpoch: true}).plan(o)
	if bad.Record == nil || bad.Record.Epoch != 2 {
		t.Fatalf("RecoverBelowOwnMetaEpoch: %s %+v, want epoch 2", bad.Kind, bad.Record)
	}
	if err := Check(o, bad); err == nil {
		t.Fatalf("Check passes a restore as epoch 2 beside metadata of epoch 2")
	}

	// A quorum-loss recovery under an older record Consul restored
	// (epoch 1) records above the metadata's epoch 2 too.
	q := o
	q.Record = &Record{ClusterID: 0x18, Token: "tok19", Epoch: 1, Seeder: "m1-1"}
	q.QuorumLostFor, q.RecordMissingFor = 25*time.Second, 0
	if got := (rules{}).nextEpoch(q); got != 3 {
		t.Fatalf("nextEpoch = %d under record epoch 1 with metadata of epoch 2, want 3", got)
	}
	if got := (rules{RecoverBelowOwnMetaEpoch: true}).nextEpoch(q); got != 2 {
		t.Fatalf("RecoverBelowOwnMetaEpoch: nextEpoch = %d, want 2", got)
	}
}

// Sim seed 2255 (with the leave fix's schedules): m0-1 took over the empty
// seed of m1-0 (gone) as epoch 2, wrote its metadata and crashed before
// the record; after the grace it took over again, as epoch 3 (above its
// metadata's epoch 2, aboveOwnMeta), and Check refused the planner's own
// decision: it still asked for the record's epoch + 1. The observation is
// m0-1's at step 242.
func TestSeedTakeoverAboveOwnMetadataPassesTheChecker(t *testing.T) {
	o := Observation{
		ClusterName: "c", Self: Self{Name: "m0-1"}, NewToken: "tok241", DesiredSize: 3,
		RecoveryGrace: 20 * time.Second, SeederGoneFor: 20 * time.Second, HoldsLock: true,
		Local:     Local{Empty: true, MetaEpoch: 2},
		Record:    &Record{Token: "tok19", Epoch: 1, Seeder: "m1-0"},
		Instances: []Instance{{Name: "m0-1"}, {Name: "m1-1"}, {Name: "m2-0"}},
		Peers:     []PeerStatus{{Name: "m1-1"}, {Name: "m2-0"}},
	}
	d := Plan(o)
	if d.Kind != Seed || d.Record == nil || d.Record.Epoch != 3 {
		t.Fatalf("%s %+v (%s): want a seed of epoch 3 in the gone seeder's place", d.Kind, d.Record, d.Reason)
	}
	if err := Check(o, d); err != nil {
		t.Fatalf("Check refuses the planner's takeover above its own metadata: %v", err)
	}
	bad := (Faults{RecoverBelowOwnMetaEpoch: true}).plan(o)
	if bad.Kind != Seed || bad.Record == nil || bad.Record.Epoch != 2 {
		t.Fatalf("RecoverBelowOwnMetaEpoch: %s %+v, want a seed of epoch 2", bad.Kind, bad.Record)
	}
	if err := Check(o, bad); err == nil {
		t.Fatalf("Check passes a takeover as epoch 2 beside metadata of epoch 2")
	}
}
