package planner

import (
	"math/rand/v2"
	"testing"
)

const generated = 20000

func TestInvariantsHoldOnRandomObservations(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	kinds := map[Kind]int{}
	for i := 0; i < generated; i++ {
		o := genObservation(rng)
		d := Plan(o)
		kinds[d.Kind]++
		if err := Check(o, d); err != nil {
			t.Fatalf("observation %d: %v\nobservation: %s\ndecision: %+v", i, err, describe(o), d)
		}
		if d.Reason == "" {
			t.Fatalf("decision without a reason: %+v for %s", d, describe(o))
		}
		if Plan(o) != d && d.Record == nil {
			t.Fatalf("Plan is not deterministic for %s", describe(o))
		}
	}
	// The generator must reach every decision, or the invariants were
	// checked against too little.
	for _, k := range []Kind{Wait, Seed, Rejoin, JoinAsLearner, ResumeJoin, Promote, RemoveMember, SetAside, RecordCluster, ReplaceInstance, RecoverQuorum} {
		if kinds[k] == 0 {
			t.Errorf("no generated observation led to %s; counts: %v", k, kinds)
		}
	}
	t.Logf("decisions over %d observations: %v", generated, kinds)
}

// TestCheckerCatchesBrokenPlanners proves each invariant check can fail: a
// planner with one safety rule switched off must be caught.
func TestCheckerCatchesBrokenPlanners(t *testing.T) {
	broken := map[string]Faults{
		"invariant 1: seed despite record":     {SeedDespiteRecord: true},
		"invariant 1: seed despite peer data":  {SeedDespitePeerData: true},
		"invariant 2: skip quorum check":       {SkipQuorumCheck: true},
		"invariant 3: leader removed first":    {PreferLeader: true},
		"invariant 3: join while in flight":    {JoinWhileInFlight: true},
		"invariant 5: rejoin foreign data":     {RejoinForeign: true},
		"invariant 6: ignore persisted name":   {IgnorePersisted: true},
		"replacement while one is in flight":   {ReplaceWhileInFlight: true},
		"invariant 4: recover before grace":    {RecoverEarly: true},
		"invariant 4: recover from older data": {PreferOlderData: true},
		"invariant 4: take over early":         {TakeoverEarly: true},
	}
	for name, r := range broken {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 7))
			for i := 0; i < generated; i++ {
				o := genObservation(rng)
				if err := Check(o, r.plan(o)); err != nil {
					t.Logf("caught after %d observations: %v", i+1, err)
					return
				}
			}
			t.Fatalf("the checker missed a planner with %s over %d observations", name, generated)
		})
	}
}
