package sim

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

func TestSurveyScratch(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SURVEY"))
	if n == 0 {
		t.Skip()
	}
	steps := 0
	for s := uint64(1); s <= uint64(n); s++ {
		r, _ := Run(Config{Seed: s})
		steps += r.Steps
		if r.Violation != nil {
			fmt.Printf("seed %d untriaged=%v: %s @%d\n", s, untriaged[s], r.Violation.Invariant, r.Violation.Step)
		} else if r.Stuck != "" {
			fmt.Printf("seed %d STUCK: %s\n", s, r.Stuck)
		}
	}
	fmt.Println("steps", steps)
}
