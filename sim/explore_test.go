package sim

import (
	"fmt"
	"testing"
	"time"
)

// untriaged are seeds of the clean range (1..) where the current planner
// (main at 7a0b7cf) breaks an invariant for a reason not yet classified as
// a known finding: model gap or planner defect, to be triaged. Remove a
// seed once explained; any other seed that fails fails the test.
var untriaged = map[uint64]bool{
	// acknowledged writes lost
	84: true, 108: true, 232: true, 283: true, 395: true, 483: true, 497: true, 502: true, 514: true, 542: true,
	// member serves data of another incarnation
	473: true,
	// two seeds of one epoch
	431: true, 440: true, 533: true,
	// not healthy after faults stopped
	46: true, 48: true, 56: true, 63: true, 92: true, 96: true, 97: true, 110: true, 145: true, 151: true, 186: true,
	203: true, 204: true, 205: true, 206: true, 209: true, 210: true, 226: true, 227: true, 233: true, 250: true,
	288: true, 294: true, 354: true, 357: true, 382: true, 396: true, 406: true, 419: true, 437: true, 468: true,
	517: true, 553: true, 558: true,
}

// explore runs consecutive seeds from seed until steps are spent; it fails
// on every violation that is not a known finding, printing its trace.
func explore(t *testing.T, seed uint64, steps int) string {
	start, last := time.Now(), time.Now()
	done, runs := 0, 0
	stuck := 0
	for s := seed; done < steps; s++ {
		r, w := Run(Config{Seed: s})
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
