package planner

import (
	"strings"
	"testing"
	"time"
)

// An operator's `recover -from snapshot:NAME` recorded while members of
// the last known membership still answer as voters with a leader (the
// command asks only the instances the provider lists): its empty seeder
// waits, as for any restore beside a serving cluster, but the wait is the
// operator's (AwaitsOperator) and says what ends it; before, it looked
// like any wait and re-running `recover` recorded the same (data review,
// session 11).
func TestOperatorRestoreBesideAKnownHealthyClusterAwaitsTheOperator(t *testing.T) {
	op := Record{Token: "tokN", Epoch: 3, Seeder: "m1", Source: SnapshotSource("s-old"), LastConfirmedToken: "tokA", LastConfirmedEpoch: 2, Operator: true, SourceRevision: 50}
	o := Observation{ClusterName: "c", Self: Self{Name: "m1"}, HoldsLock: true, RecoveryGrace: time.Minute,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: &op, Local: Local{Empty: true},
		LatestSnapshot: &SnapshotInfo{Name: "s-new", Revision: 60, Epoch: 2},
		Peers:          []PeerStatus{{Name: "m2"}, {Name: "m0"}},
		KnownHealthy:   []string{"v9 (https://10.0.0.9:2379)"}}
	d := Plan(o)
	if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "stop those members") {
		t.Fatalf("the operator's restore beside a serving cluster: %s (%s), awaits operator %v; want the operator's wait naming what ends it", d.Kind, d.Reason, d.AwaitsOperator)
	}
	o.KnownHealthy = nil
	if d := Plan(o); d.Kind != RecoverQuorum || d.Snapshot != "s-old" {
		t.Fatalf("with nothing serving: %s (%s); want the restore the operator recorded", d.Kind, d.Reason)
	}
}
