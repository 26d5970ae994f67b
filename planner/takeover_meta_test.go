package planner

import (
	"testing"
	"time"
)

// Review rev19d W3: a takeover of a gone seeder's unconfirmed seed by a member
// whose data dir holds leftover metadata of ANOTHER cluster (a reused
// volume) naming epoch 9: the planner ignores it (ownMetaEpoch, N5) and
// seeds epoch 2; checkSeedTakeover counts it regardless of its cluster
// and wants 10, so Check refuses ("a planner bug") every loop.
func TestASeedTakeoverBesideAnotherClustersMetadataIsNotRefused(t *testing.T) {
	o := Observation{
		ClusterName: "kit", Self: Self{Name: "m0-1", PeerURL: "http://m0-1:2380"}, NewToken: "tok30", DesiredSize: 3,
		RecoveryGrace: 20 * time.Second, SeederGoneFor: 21 * time.Second, HoldsLock: true,
		Record:    &Record{Token: "tok19", Epoch: 1, Seeder: "m1-0"},
		Local:     Local{Empty: true, Cluster: "other", MetaEpoch: 9},
		Instances: []Instance{{Name: "m0-1"}, {Name: "m1-1"}, {Name: "m2-0"}},
		Peers:     []PeerStatus{{Name: "m1-1"}, {Name: "m2-0"}},
	}
	d := Plan(o)
	if d.Kind != Seed {
		t.Fatalf("%s (%s)", d.Kind, d.Reason)
	}
}

// Review rev19d W3b: the same takeover with this member's own metadata (of this
// cluster) naming 2^64-5: the first-seed path asks an operator
// (metaLeavesNoRoom), the takeover records epoch 2^64-4.
func TestASeedTakeoverBesideOwnFullMetadataAsksAnOperator(t *testing.T) {
	o := Observation{
		ClusterName: "kit", Self: Self{Name: "m0-1", PeerURL: "http://m0-1:2380"}, NewToken: "tok30", DesiredSize: 3,
		RecoveryGrace: 20 * time.Second, SeederGoneFor: 21 * time.Second, HoldsLock: true,
		Record:    &Record{Token: "tok19", Epoch: 1, Seeder: "m1-0"},
		Local:     Local{Empty: true, Cluster: "kit", MetaEpoch: ^uint64(0) - 5},
		Instances: []Instance{{Name: "m0-1"}, {Name: "m1-1"}, {Name: "m2-0"}},
		Peers:     []PeerStatus{{Name: "m1-1"}, {Name: "m2-0"}},
	}
	if d := (Faults{TakeoverBesideFullMeta: true}).Plan(o); d.Record == nil || d.Record.implausibleTop() == "" {
		t.Fatalf("with TakeoverBesideFullMeta the takeover should record above the full metadata: %s (%s)", d.Kind, d.Reason)
	}
	d := Plan(o)
	if d.Record != nil && d.Record.implausibleTop() != "" {
		t.Fatalf("%s as epoch %d (%s)", d.Kind, d.Record.Epoch, d.Reason)
	}
	if d.Kind != Wait || !d.AwaitsOperator {
		t.Fatalf("want a wait for an operator: %s (%s)", d.Kind, d.Reason)
	}
}
