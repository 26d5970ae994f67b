package sim

import (
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Sim seed 7867 (the 100 M run of session 16): m1-2 recorded epoch 3 as a
// recovery from its data (step 1702), rewrote its metadata (1706) and its
// host went down; Consul restored the record of epoch 1 (1707, and again
// at 1972 with cluster 17), whose members are long gone. Back (1745),
// m1-2 kept its data until epoch 1's cluster answered with a quorum; the
// empty replacements m0-4 and m2-6 waited for m1-2 to re-record (2034):
// nobody moved, and the wait did not say an operator must end it, so the
// liveness check failed 300 s after the faults stopped. The planner now
// awaits the operator there, and the way out ('recover -from m1-2')
// brings the cluster back. PendingWaitsSilently reverts the fix.
func TestUnstartedRecoveryUnderARestoredRecordAwaitsTheOperator(t *testing.T) {
	r, w := Run(Config{Seed: 7867})
	if r.Violation != nil || r.Stuck != "" || !strings.HasPrefix(r.WayOut, "recover -from m1-2") {
		t.Fatalf("seed 7867: violation %v, stuck %q, way out %q (want healthy after 'recover -from m1-2')\n%s", r.Violation, r.Stuck, r.WayOut, w.Trace())
	}
	d, _ := Run(Config{Seed: 7867, Defects: Defects{Planner: planner.Faults{PendingWaitsSilently: true}}})
	if d.Violation == nil || d.Violation.Invariant != InvLiveness {
		t.Fatalf("seed 7867 with PendingWaitsSilently: %v (want %q): the test no longer shows the defect", d.Violation, InvLiveness)
	}
}
