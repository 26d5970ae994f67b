package sim

import (
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Sim seed 41704 (a 100 M run of session 18): m2-3, an epoch-2 voter, ran
// on after Nomad collected it (step 1100), every observation failing
// from 1108 on ("list instances: nomad unreachable"), and a partition hid
// it from the rest (1318, healing at 1492); m1-2 rejoined epoch 2 (1350)
// and its Nomad client was disconnected (1368-1488). Neither planned:
// the loop skipped every failed observation. m0-3 recovered epoch 3
// (1441) and confirmed it (1450); the heal (1492) gave epoch 2 its quorum
// back beside epoch 3. Fixed, a running member whose observation failed
// reads the record all the same (fenceUnobserved, task's too) and
// planner.PlanUnobserved stops it without a quorum once a newer confirmed
// epoch is recorded: m1-2 stops at step 1452, m2-3 at 1453. Reverted by
// planner.Faults.RunBlindBesideNewerEpoch.
func TestABlindMemberStopsOnceARecoveryReplacedItsEpoch(t *testing.T) {
	r, w := Run(Config{Seed: 41704, Defects: Defects{Planner: planner.Faults{RunBlindBesideNewerEpoch: true}}})
	if r.Violation == nil || r.Violation.Invariant != InvSplitBrain {
		t.Fatalf("seed 41704 with RunBlindBesideNewerEpoch: %v, want %q\n%s", r.Violation, InvSplitBrain, w.Trace())
	}
	r, w = Run(Config{Seed: 41704, TraceLen: 100000})
	if r.Violation != nil || r.Stuck != "" {
		t.Fatalf("seed 41704: %v (stuck %q)\n%s", r.Violation, r.Stuck, w.Trace())
	}
	for _, name := range []string{"m1-2", "m2-3"} {
		if !strings.Contains(w.Trace(), name+"      unobserved: ") {
			t.Fatalf("seed 41704: %s did not stop as superseded\n%s", name, w.Trace())
		}
	}
}
