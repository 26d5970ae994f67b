package tier_test

import (
	"os"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/internal/tier"
)

var started bool

func TestMain(m *testing.M) {
	os.Exit(tier.Main(m, func(m *testing.M) int {
		started = true
		return m.Run()
	}))
}

// Main calls start in the full tier only.
func TestMainStartsOnlyInTheFullTier(t *testing.T) {
	if started == testing.Short() {
		t.Fatalf("start called: %v, with -short: %v", started, testing.Short())
	}
}

func TestStartsSkipsInTheShortTier(t *testing.T) {
	tier.Starts(t, "nothing")
	if testing.Short() {
		t.Fatal("ran in the short tier")
	}
}
