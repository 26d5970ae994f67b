package sim

import (
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Sim seed 1531 (review rev18f F5): m2-1 recovered epoch 2 from its
// data (ForceNewCluster keeps cluster id 16, drops the others) and runs
// it alone, unconfirmed, when Consul loses its state (step 1311); m0-2,
// an epoch-1 learner the recovery dropped, still runs and sees epoch 2's
// member list. It re-recorded epoch 1 over the running epoch 2 (step
// 1324). The model reports no violation there (m0-2 then set its data
// aside, and m2-1 re-recorded epoch 2), so the test reads the trace:
// with the fixes no record of epoch 1 is written after the loss; with
// both reverted (the dropped member's rule, and the store's listing that
// would show epoch 2's snapshot: the model saves every cluster with a
// quorum, a real member only under a confirmed record) it is.
func TestADroppedLearnerDoesNotReRecordItsEpoch(t *testing.T) {
	const write = "m0-2        record-cluster: write record (fenced): record tok19 epoch 1"
	for _, tc := range []struct {
		name   string
		d      Defects
		writes bool
	}{
		{"fixed", Defects{}, false},
		{"RerecordRemoved alone (the listing shows epoch 2)", Defects{Planner: planner.Faults{RerecordRemoved: true}}, false},
		{"RerecordRemoved and NoLineWhenRerecording", Defects{NoLineWhenRerecording: true, Planner: planner.Faults{RerecordRemoved: true}}, true},
		{"RerecordRemoved and RerecordSupersededLine", Defects{Planner: planner.Faults{RerecordRemoved: true, RerecordSupersededLine: true}}, true},
	} {
		r, w := Run(Config{Seed: 1531, TraceLen: 100000, Defects: tc.d})
		if r.Violation != nil {
			t.Fatalf("%s: %v", tc.name, r.Violation)
		}
		tr := w.Trace()
		if !strings.Contains(tr, "fault     Consul loses its state") {
			t.Fatalf("%s: the schedule changed: Consul never loses its state", tc.name)
		}
		if got := strings.Contains(tr, write); got != tc.writes {
			t.Errorf("%s: m0-2 re-records epoch 1: %v, want %v", tc.name, got, tc.writes)
		}
	}
}
