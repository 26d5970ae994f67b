package sim

import (
	"os"
	"strconv"
	"testing"
	"time"
)

func TestTally(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TALLY"))
	if n == 0 {
		t.Skip()
	}
	start := time.Now()
	steps := 0
	count := map[string]int{}
	first := map[string]uint64{}
	for s := 1; s <= n; s++ {
		r, _ := Run(Config{Seed: uint64(s)})
		steps += r.Steps
		k := "ok"
		if r.Violation != nil {
			k = r.Violation.Invariant
		} else if r.Stuck != "" {
			k = "stuck: " + r.Stuck
		}
		if _, ok := first[k]; !ok {
			first[k] = uint64(s)
		}
		count[k]++
		if os.Getenv("LIST") == k {
			t.Logf("seed %d", s)
		}
	}
	t.Logf("%d steps in %s (%.0f steps/s)", steps, time.Since(start), float64(steps)/time.Since(start).Seconds())
	for k, c := range count {
		t.Logf("%4d %s (first seed %d)", c, k, first[k])
	}
}
