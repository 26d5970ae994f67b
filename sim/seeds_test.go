package sim

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSeeds runs the seeds SEEDS lists (space separated) and logs each
// one's outcome: the invariant a violating seed breaks, or clean/stuck.
func TestSeeds(t *testing.T) {
	list := strings.Fields(os.Getenv("SEEDS"))
	if len(list) == 0 {
		t.Skip("SEEDS='n m ...'")
	}
	start, steps, bad := time.Now(), 0, 0
	for _, f := range list {
		s, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatalf("seed %q: %v", f, err)
		}
		r, _ := Run(Config{Seed: s})
		steps += r.Steps
		switch {
		case r.Violation != nil:
			bad++
			t.Logf("seed %d: VIOLATION %s (step %d)", s, r.Violation.Invariant, r.Violation.Step)
		case r.Stuck != "":
			t.Logf("seed %d: stuck", s)
		default:
			t.Logf("seed %d: clean", s)
		}
	}
	t.Logf("%d of %d seeds violate; %d steps in %s", bad, len(list), steps, time.Since(start).Round(time.Millisecond))
}
