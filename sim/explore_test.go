package sim

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// untriaged are seeds of the clean range (1..) where the current planner
// breaks an invariant for a reason not fixed yet, each with its diagnosis.
// Remove a seed once fixed; any other seed that fails fails the test.
var untriaged = map[uint64]bool{}

// explore runs consecutive seeds from seed until steps are spent; it fails
// on every violation that is not a known finding, printing its trace.
// SIM_NO_COLLECT=1 turns the collectRunning fault off (Config.NoCollectRunning).
func explore(t *testing.T, seed uint64, steps int) string {
	start, last := time.Now(), time.Now()
	done, runs := 0, 0
	stuck := 0
	for s := seed; done < steps; s++ {
		r, w := Run(Config{Seed: s, NoCollectRunning: os.Getenv("SIM_NO_COLLECT") != ""})
		done += r.Steps
		runs++
		switch {
		case r.Violation != nil && untriaged[s]:
			t.Logf("untriaged seed %d: %v", s, r.Violation)
		case r.Violation != nil:
			t.Errorf("seed %d: %v\ntrace (last events):\n%s", s, r.Violation, w.Trace())
		case r.Stuck != "":
			stuck++
		}
		if time.Since(last) > 10*time.Second {
			last = time.Now()
			t.Logf("%d steps, %d runs, %.0f steps/s", done, runs, float64(done)/time.Since(start).Seconds())
		}
	}
	out := fmt.Sprintf("%d steps over %d runs (seeds %d..%d) in %s: %.0f steps/s; %d stuck for an operator", done, runs, seed, seed+uint64(runs)-1,
		time.Since(start).Round(time.Millisecond), float64(done)/time.Since(start).Seconds(), stuck)
	return out
}
