package planner

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Review rev18c N5: metadata without data is counted only when it is of
// this cluster, and one of an epoch too close to 2^64 for a next epoch
// above it makes the restore without a record wait for an operator,
// not refuse forever in silence.
func TestMetadataWithoutDataCountsOnlyForItsClusterAndAsksWhenFull(t *testing.T) {
	o := Observation{
		ClusterName: "kit", Self: Self{Name: "m0-3", PeerURL: "http://m0-3:2380"}, NewToken: "tok826", DesiredSize: 3,
		RecoveryGrace: 20 * time.Second, RecordMissingFor: 23 * time.Second, HoldsLock: true,
		Local:          Local{Empty: true, Cluster: "kit", MetaEpoch: 2},
		Instances:      []Instance{{Name: "m0-3"}, {Name: "m1-2"}, {Name: "m2-4"}},
		Peers:          []PeerStatus{{Name: "m1-2"}, {Name: "m2-4"}},
		LatestSnapshot: &SnapshotInfo{Name: "snap-511", Revision: 164, Epoch: 1},
		SnapshotEpoch:  1,
	}
	if d := Plan(o); d.Kind != RecoverQuorum || d.Record.Epoch != 3 {
		t.Fatalf("this cluster's metadata of epoch 2: %s %+v (%s), want a restore as epoch 3", d.Kind, d.Record, d.Reason)
	}
	o.Local.Cluster = "other"
	if d := Plan(o); d.Kind != RecoverQuorum || d.Record.Epoch != 2 {
		t.Fatalf("another cluster's metadata: %s %+v (%s), want a restore as epoch 2", d.Kind, d.Record, d.Reason)
	}
	if err := Check(o, Plan(o)); err != nil {
		t.Fatalf("another cluster's metadata: %v", err)
	}

	o.Local.Cluster, o.Local.MetaEpoch = "kit", math.MaxUint64
	if d := Plan(o); d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "2^64") {
		t.Fatalf("metadata at 2^64-1: %s (operator %v: %s), want a wait for an operator", d.Kind, d.AwaitsOperator, d.Reason)
	}
	if d := (Faults{MetaOfAnyCluster: true}).Plan(o); d.AwaitsOperator {
		t.Fatalf("with MetaOfAnyCluster: %s (operator %v: %s), want the old silent refusal", d.Kind, d.AwaitsOperator, d.Reason)
	}
}
