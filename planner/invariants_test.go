package planner

import (
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

const generated = 40000

// checkerSeeds are the fixed seeds every run explores, so that a result
// is reproducible; each run adds one random seed, printed, so the search
// still widens over time (PLANNER_SEED=N replays one).
var checkerSeeds = []uint64{1, 2, 3, 7, 42}

func seeds(t *testing.T) []uint64 {
	if v := os.Getenv("PLANNER_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("PLANNER_SEED=%q: %v", v, err)
		}
		return []uint64{n}
	}
	r := uint64(rand.Int64())
	t.Logf("random seed %d (replay: PLANNER_SEED=%d)", r, r)
	return append(append([]uint64(nil), checkerSeeds...), r)
}

func TestInvariantsHoldOnRandomObservations(t *testing.T) {
	kinds := map[Kind]int{}
	for _, seed := range seeds(t) {
		rng := rand.New(rand.NewPCG(seed, 1))
		for i := 0; i < generated; i++ {
			o := genObservation(rng)
			d := unguarded.Plan(o)
			kinds[d.Kind]++
			if err := Check(o, d); err != nil {
				t.Fatalf("seed %d observation %d: %v\nobservation: %s\ndecision: %+v", seed, i, err, describe(o), d)
			}
			if d.Reason == "" {
				t.Fatalf("decision without a reason: %+v for %s", d, describe(o))
			}
			if !reflect.DeepEqual(unguarded.Plan(o), d) {
				t.Fatalf("Plan is not deterministic for %s", describe(o))
			}
		}
	}
	// The generator must reach every decision, or the invariants were
	// checked against too little.
	for _, k := range []Kind{Wait, Seed, Rejoin, JoinAsLearner, ResumeJoin, Promote, RemoveMember, SetAside, RecordCluster, ReplaceInstance, RecoverQuorum, UpdatePeerURL, DisarmCorrupt} {
		if kinds[k] == 0 {
			t.Errorf("no generated observation led to %s; counts: %v", k, kinds)
		}
	}
	t.Logf("decisions over %d seeds of %d observations: %v", len(checkerSeeds)+1, generated, kinds)
}

// brokenPlanners are the planners with one safety rule switched off, by
// what the checker sees them break.
var brokenPlanners = map[string]Faults{
	"invariant 1: seed despite record":                  {SeedDespiteRecord: true},
	"invariant 1: seed despite peer data":               {SeedDespitePeerData: true},
	"invariant 2: skip quorum check":                    {SkipQuorumCheck: true},
	"invariant 3: leader removed first":                 {PreferLeader: true},
	"invariant 3: join while in flight":                 {JoinWhileInFlight: true},
	"invariant 5: rejoin foreign data":                  {RejoinForeign: true},
	"invariant 6: ignore persisted name":                {IgnorePersisted: true},
	"replacement while one is in flight":                {ReplaceWhileInFlight: true},
	"invariant 4: recover before grace":                 {RecoverEarly: true},
	"invariant 4: recover from older data":              {PreferOlderData: true},
	"invariant 4: take over early":                      {TakeoverEarly: true},
	"invariant 4: recover from the lowest revision":     {RecoverFromLowest: true},
	"invariant 4: a learner seeds a recovery":           {LearnerSource: true},
	"invariant 4: take over from epoch-1":               {TakeoverFromPrevEpoch: true},
	"invariant 8: seed while instances are silent":      {SeedWhileSilent: true},
	"invariant 9: set aside for an unconfirmed record":  {SetAsideOnUnconfirmed: true},
	"invariant 9: obey an older record":                 {ObeyOlderRecord: true},
	"invariant 5: join an unconfirmed cluster":          {JoinUnconfirmed: true},
	"invariant 1: resume a seed while silent":           {ResumeWhileSilent: true},
	"invariant 9: join under an older record":           {JoinUnderNewer: true},
	"invariant 4: resume over a newer snapshot":         {ResumeOverNewerSnapshot: true},
	"invariant 4: recover beside another incarnation":   {RecoverBesideOtherIncarnation: true},
	"invariant 7: set aside before the newer runs":      {SetAsideBeforeNewerRuns: true},
	"invariant 4: recover below older data":             {RecoverBelowOlderData: true},
	"invariant 10: resume a recovery beside a quorum":   {ResumeBesideQuorum: true},
	"invariant 9: own record sets data aside":           {SettleOnOwnRecord: true},
	"invariant 4: recover below a skipped epoch's data": {RecoverBesideSkippedEpoch: true},
	"invariant 7: set aside the last good copy":         {SetAsideLastGood: true},
	"invariant 7: disarm a present member's CORRUPT":    {DisarmPresent: true},
	"invariant 10: recover beside a forgotten majority": {RecoverBesideKnownHealthy: true},
	"invariant 8: seed beside a refused snapshot":       {SeedBesideRefused: true},
	"invariant 4: recover below a refused snapshot":     {RecoverBelowRefused: true},
	"invariant 10: recover beside an unlisted voter":    {RecoverBesideUnlistedVoter: true},
	"invariant 10: restore at once without a record":    {RestoreWithoutGrace: true},
	"invariant 9: recover below the snapshot's epoch":   {RecoverBelowSnapshotEpoch: true},
	"invariant 8: seed while the listing is silent":     {SeedWithoutListing: true},
	"invariant 4: recover while the listing is silent":  {RecoverWithoutListing: true},
	"invariant 4: operator's restore, listing silent":   {ResumeOperatorWithoutListing: true},
	"invariant 9: recover below a foreign snapshot":     {RecoverBelowForeignSnapshotEpoch: true},
	"invariant 4: restore over writes after the record": {RestoreOverLaterWrites: true},
	"invariant 4: accept one revision across lines":     {AcceptAcrossLines: true},
	"invariant 10: start a pending ForceNew beside one": {StartPendingForceNew: true},
	"invariant 10: start a restore beside one":          {StartInstalledRestore: true},
	"invariant 9: re-record an epoch that never ran":    {RerecordUnranEpoch: true},
	"invariant 4: resume a restore below a later epoch": {ResumeRestoreBelowLaterEpoch: true},
}

// TestCheckerCatchesBrokenPlanners proves each invariant check can fail: a
// planner with one safety rule switched off must be caught.
func TestCheckerCatchesBrokenPlanners(t *testing.T) {
	// Every fixed seed must catch every broken planner: a catch that
	// depends on the seed is luck, not a test.
	for name, r := range brokenPlanners {
		t.Run(name, func(t *testing.T) {
			for _, seed := range checkerSeeds {
				rng := rand.New(rand.NewPCG(seed, 7))
				caught := false
				for i := 0; i < generated && !caught; i++ {
					o := genObservation(rng)
					if err := Check(o, r.plan(o)); err != nil {
						caught = true
						if seed == checkerSeeds[0] {
							t.Logf("caught after %d observations: %v", i+1, err)
						}
					}
				}
				if !caught {
					t.Fatalf("the checker missed a planner with %s over %d observations of seed %d", name, generated, seed)
				}
			}
		})
	}
}

// An operator's pause holds back every decision but waiting and starting
// a member's own data, on the generator's observations; a planner that
// ignores the pause is caught on every fixed seed.
func TestPauseHoldsEveryChange(t *testing.T) {
	for _, seed := range seeds(t) {
		rng := rand.New(rand.NewPCG(seed, 11))
		held, caught := 0, false
		for i := 0; i < generated; i++ {
			o := genObservation(rng)
			o.Paused = "paused by ops since 2026-11-01T00:00:00Z"
			d := unguarded.Plan(o)
			if err := Check(o, d); err != nil {
				t.Fatalf("seed %d observation %d: %v\nobservation: %s\ndecision: %+v", seed, i, err, describe(o), d)
			}
			if d.Kind == Wait && strings.HasPrefix(d.Reason, "paused (") {
				held++
			}
			caught = caught || Check(o, Faults{IgnorePause: true}.Plan(o)) != nil
		}
		if held == 0 || !caught {
			t.Fatalf("seed %d: %d decisions held back, ignoring the pause caught: %v", seed, held, caught)
		}
	}
}
