package planner

import (
	"testing"
	"time"
)

// Review rev13-data 1 (HIGH): this member's own unconfirmed operator's restore record
// (kit-e2-snap as epoch 3) came back with a Consul restore after the
// restored incarnation ran, was snapshotted (kit-e3-snap, epoch 3) and
// lost every copy. With the store answering, the planner waits for an
// operator (plan.go: "taken of an incarnation that ran after the
// record"). With ONE listing failed, task reports LatestSnapshot nil and
// ListingUnanswered (recover.go observeLatestSnapshot; before dd0e9bf it
// kept the last listing's snapshot), and the planner resumes the older
// restore: the newer line's writes are set aside in favour of older data.
func TestOperatorRestoreWaitsWhileTheListingDoesNotAnswer(t *testing.T) {
	self := Self{Name: "m0", PeerURL: "https://m0:2380"}
	o := Observation{
		ClusterName: "kit", Self: self, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n", RecoveryGrace: time.Second,
		Record:         &Record{Token: "op", Epoch: 3, Seeder: "m0", Source: SnapshotSource("kit-e2-snap"), Operator: true, SourceRevision: 500, AcceptedRevision: 500},
		Instances:      []Instance{{Name: "m0"}},
		LatestSnapshot: &SnapshotInfo{Name: "kit-e3-snap", Epoch: 3, Revision: 900},
	}
	if d := Plan(o); d.Kind != Wait {
		t.Fatalf("with the store answering: %s: %s (want a wait)", d.Kind, d.Reason)
	}
	o.LatestSnapshot, o.ListingUnanswered = nil, "503 Slow Down"
	d := Plan(o)
	t.Logf("listing unanswered: %s: %s", d.Kind, d.Reason)
	if d.Kind != Wait {
		t.Fatalf("with the store's listing unanswered the operator's older restore is resumed: %s from %s: %s", d.Kind, d.Snapshot, d.Reason)
	}
}
