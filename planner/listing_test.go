package planner

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// While the snapshot store's listing does not answer, what it holds is
// unknown (review rev12-data F4): every path that would seed, restore or
// recover on what the store holds waits, naming the store's error, and
// the same observation with the store answering acts.
func TestUnansweredListingMakesSeedsAndRecoveriesWait(t *testing.T) {
	for _, tc := range storeCases() {
		t.Run(tc.name, func(t *testing.T) {
			if d := Plan(tc.o); d.Kind == Wait {
				t.Fatalf("with the store answering the case does not act, so it proves nothing: %s", d.Reason)
			}
			o := tc.o
			o.ListingUnanswered = "503 Slow Down"
			o.LatestSnapshot = nil // unknown
			if d := Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "503 Slow Down") || d.NeedsLock {
				t.Fatalf("while the store's listing does not answer: %s (needs lock %v): %s", d.Kind, d.NeedsLock, d.Reason)
			}
		})
	}
}

// The listing is taken only where the quorum is lost or no member holds
// data: a cluster that runs with its membership known decides the same
// whether the store answers or not, and a cluster without a store never
// sees ListingUnanswered set (task leaves it empty).
func TestUnansweredListingLeavesARunningClusterAlone(t *testing.T) {
	seen := 0
	for _, seed := range checkerSeeds {
		rng := rand.New(rand.NewPCG(seed, 13))
		for i := 0; i < generated; i++ {
			o := genObservation(rng)
			if !o.Running || !o.MembersKnown || o.ListingUnanswered != "" {
				continue
			}
			seen++
			want := unguarded.Plan(o)
			o.ListingUnanswered = "503 Slow Down"
			if got := unguarded.Plan(o); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d observation %d: a running cluster decided %s (%s) with the store unanswered, %s (%s) with it answering\nobservation: %s", seed, i, got.Kind, got.Reason, want.Kind, want.Reason, describe(o))
			}
		}
	}
	if seen == 0 {
		t.Fatal("no running cluster generated")
	}
	t.Logf("%d running clusters decided alike", seen)
}
