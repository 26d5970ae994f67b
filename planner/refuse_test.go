package planner

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// unguarded is the planner without Plan's refusal of a decision that
// fails Check: the tests pin the planner's own decisions, so that a
// planner bug is never hidden behind a refused wait.
var unguarded rules

// TestPlanRefusesWhatCheckCatches: Plan runs Check on its own decision
// and waits instead of acting on a violation. Each broken planner's
// caught decision becomes a lock-free wait that names the broken rule and
// passes Check; a decision that passes Check is returned unchanged.
func TestPlanRefusesWhatCheckCatches(t *testing.T) {
	refused := 0
	for name, r := range brokenPlanners {
		rng := rand.New(rand.NewPCG(checkerSeeds[0], 7))
		for i := 0; i < generated; i++ {
			o := genObservation(rng)
			d := r.plan(o)
			err := Check(o, d)
			got := refuse(o, d)
			if err == nil {
				if got.Kind != d.Kind || got.Reason != d.Reason || got.NeedsLock != d.NeedsLock {
					t.Fatalf("%s: refuse changed a decision that passes Check: %+v -> %+v", name, d, got)
				}
				continue
			}
			refused++
			if got.Kind != Wait || got.NeedsLock || !strings.Contains(got.Reason, err.Error()) {
				t.Fatalf("%s: refuse(%s) = %+v, want a wait naming %q", name, d.Kind, got, err)
			}
			if cerr := Check(o, got); cerr != nil {
				t.Fatalf("%s: the refusal fails the checker: %v", name, cerr)
			}
			break
		}
	}
	if refused < len(brokenPlanners) {
		t.Fatalf("only %d of %d broken planners' decisions were refused", refused, len(brokenPlanners))
	}
}
