package sim

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// untriaged are seeds of the clean range (1..) where the current planner
// breaks an invariant for a reason not fixed yet, each with its diagnosis.
// Remove a seed once fixed; any other seed that fails fails the test.
var untriaged = map[uint64]bool{
	// Seed 121 (the operator with collectRunning) was here: an impatient
	// 'recover -from snapshot:latest -accept-data-loss' recorded a restore
	// verified to 545 and set aside m0-3's data (546); a chain segment was
	// damaged since, and the way out, 'recover -from snapshot:latest
	// -accept-data-loss' again, restored up to 540, warning that 541..545
	// are lost. The model now counts that shortfall as accepted (the
	// command names it and needs -accept-data-loss for it), wherever a
	// copy lies: the set-aside copy on m0-3 is one no command sees
	// (README: what 'recover' does not name).
}

// explore runs consecutive seeds from seed until steps are spent; it fails
// on every violation that is not a known finding, printing its trace.
// SIM_NO_COLLECT=1 turns the collectRunning fault off (Config.NoCollectRunning),
// SIM_ROTATE=1 adds Config.RotateCA (off by default: see rotation.go);
// SIM_NO_OPERATOR=1 runs without the operator, SIM_NO_IMPATIENT=1 with
// only its way out of stuck runs.
func explore(t *testing.T, seed uint64, steps int) string {
	start, last := time.Now(), time.Now()
	done, runs := 0, 0
	stuck, violations := 0, 0
	stuckBy, wayOutBy, noWayOutBy := map[string]int{}, map[string]int{}, map[string]int{}
	accepted, impatient := 0, 0
	for s := seed; done < steps; s++ {
		cfg := Config{Seed: s, NoCollectRunning: os.Getenv("SIM_NO_COLLECT") != "", NoOperator: os.Getenv("SIM_NO_OPERATOR") != "", RotateCA: os.Getenv("SIM_ROTATE") != ""}
		if os.Getenv("SIM_NO_IMPATIENT") != "" {
			cfg.OperatorRate = -1
		}
		r, w := Run(cfg)
		done += r.Steps
		runs++
		if r.AcceptedLoss {
			accepted++
		}
		if r.Impatient > 0 {
			impatient++
		}
		switch {
		case r.Violation != nil && untriaged[s]:
			t.Logf("untriaged seed %d: %v", s, r.Violation)
		case r.Violation != nil:
			violations++
			t.Errorf("seed %d: %v\ntrace (last events):\n%s", s, r.Violation, w.Trace())
		case r.Stuck != "":
			stuck++
			stuckBy[StuckKind(r.Stuck)]++
			if r.NoWayOut != "" {
				noWayOutBy[StuckKind(r.Stuck)]++
			}
		case r.WayOut != "":
			wayOutBy[wayOutKind(r.WayOut)+" (stuck: "+StuckKind(r.WayOutFor)+")"]++
		}
		if time.Since(last) > 10*time.Second {
			last = time.Now()
			t.Logf("%d steps, %d runs, %.0f steps/s", done, runs, float64(done)/time.Since(start).Seconds())
		}
	}
	out := fmt.Sprintf("%d steps over %d runs (seeds %d..%d) in %s: %.0f steps/s; %d violations; %d stuck for an operator", done, runs, seed, seed+uint64(runs)-1,
		time.Since(start).Round(time.Millisecond), float64(done)/time.Since(start).Seconds(), violations, stuck)
	out += byKind("stuck", stuckBy)
	out += byKind("of them with no modeled command that applies", noWayOutBy)
	out += byKind("healthy after the operator's way out", wayOutBy)
	out += fmt.Sprintf("\n%d runs lost only writes an operator accepted to lose (-accept-data-loss); %d runs where the impatient operator's commands wrote", accepted, impatient)
	return out
}

// wayOutKind is the command of a way out without its member's name.
func wayOutKind(w string) string {
	k := "recover -from MEMBER"
	if strings.HasPrefix(w, "etcd-nomad resume") {
		return w
	}
	if strings.Contains(w, "snapshot") {
		k = "recover -from snapshot:latest"
	}
	if strings.Contains(w, "accept-data-loss") {
		k += " -accept-data-loss"
	}
	return k
}

func byKind(what string, by map[string]int) string {
	if len(by) == 0 {
		return ""
	}
	kinds := make([]string, 0, len(by))
	total := 0
	for k, n := range by {
		kinds = append(kinds, k)
		total += n
	}
	sort.Slice(kinds, func(i, j int) bool {
		return by[kinds[i]] > by[kinds[j]] || by[kinds[i]] == by[kinds[j]] && kinds[i] < kinds[j]
	})
	out := fmt.Sprintf("\n%d %s:", total, what)
	for _, k := range kinds {
		out += fmt.Sprintf("\n  %5d %s", by[k], k)
	}
	return out
}
