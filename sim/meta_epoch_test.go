package sim

import (
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Sim seed 1009859: m0-3 joined cluster 2a2 (epoch 2) as a learner, lost
// its disk, and resumed the join: it wrote the metadata of epoch 2 and its
// start failed. Nomad collected m2-3, a voter of cluster 2a2 that kept
// running, and Consul lost its state. With no record and no data anywhere,
// m0-3 restored snap-511 (epoch 1) as epoch 2: a second incarnation of
// epoch 2 beside m2-3's. Its own metadata named epoch 2 (Local.MetaEpoch),
// which Consul's loss does not undo: the restore records epoch 3.
// The planner's RecoverBelowOwnMetaEpoch reverts it.
func TestARestoreWithoutRecordIsAboveItsMetadataEpoch(t *testing.T) {
	r, w := Run(Config{Seed: 1009859, Defects: Defects{Planner: planner.Faults{RecoverBelowOwnMetaEpoch: true, SnapshotUnconfirmed: true}}}) // the first save failing, as the store may
	if r.Violation == nil || r.Violation.Invariant != InvTwoSeeds || !strings.Contains(r.Violation.Detail, "epoch 2") {
		t.Fatalf("seed 1009859 with RecoverBelowOwnMetaEpoch: %v, want %q of epoch 2\n%s", r.Violation, InvTwoSeeds, w.Trace())
	}
	if r, w := Run(Config{Seed: 1009859}); r.Violation != nil {
		t.Fatalf("seed 1009859: %v\n%s", r.Violation, w.Trace())
	}
}
