package sim

import (
	"testing"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Sim seed 220 (10 M steps from seed 7, session 18): m1-0 seeded epoch 1
// and confirmed it (step 8, 0.8 s); m0-0 joined and was promoted, and its
// host went down at 14.2 s, before anything had saved a snapshot: the
// quorum was lost, then every copy, and the run ended awaiting an
// operator with nothing to recover from. task's leader checked the store
// in the loop that observed the seed's unconfirmed record, where no save
// can be made, and the next check came a minute later (a real member's
// first snapshot lands 60 s after its seed). The check now waits for the
// record to confirm the member's data: the empty store makes it due at
// once (0.8 s here), the delta chain extends it, and the quorum loss is
// recovered from the store. SnapshotUnconfirmed reverts the fix.
func TestFirstSnapshotAtOnceAfterTheSeedIsConfirmed(t *testing.T) {
	r, w := Run(Config{Seed: 220})
	if r.Violation != nil || r.Stuck != "" {
		t.Fatalf("seed 220: violation %v, stuck %q (want healthy)\n%s", r.Violation, r.Stuck, w.Trace())
	}
	d, _ := Run(Config{Seed: 220, Defects: Defects{Planner: planner.Faults{SnapshotUnconfirmed: true}}})
	if d.Violation != nil || StuckKind(d.Stuck) != "quorum lost, nothing to recover from" {
		t.Fatalf("seed 220 with SnapshotUnconfirmed: violation %v, stuck %q (want stuck with nothing to recover from): the test no longer shows the defect", d.Violation, d.Stuck)
	}
}
