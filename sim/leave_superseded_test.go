package sim

import (
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Sim seed 1002359: Nomad collected m0-1, a voter of epoch 1, while it ran
// (step 382), and a partition cut it off (403). m2-0, the only other
// running voter, began its graceful stop (461) without a quorum and
// retried its removal, observing only under the lock. One recovery grace
// after m0-1's last answer, m0-2 restored epoch 2 from the snapshot and
// confirmed it (513-524) while it, and then the member joining epoch 2,
// held the lock (m2-0: "lock not taken", 516-529); the partition healed
// (536) and m2-0 with m0-1 gave epoch 1 its quorum back beside epoch 2.
// Two parts: a leaving member also looks when the lock is not to be had
// (task's leaveUnlocked; reverted by LeaveLooksUnderLockOnly), and
// PlanLeave stops it at once once a newer epoch is known (LeaveSuperseded;
// reverted by planner.Faults.LeaveBesideNewerEpoch). Fixed, m2-0 looks at
// step 520, sees the record of epoch 2 and stops. Since the blind
// member's fence (seed 41704) m0-1, collected and blind, stops at step
// 535 too, before the heal: each switch is caught with that fence
// reverted as well (RunBlindBesideNewerEpoch).
func TestALeavingMemberSeesTheNewerEpochWithoutTheLock(t *testing.T) {
	for _, d := range []Defects{
		{LeaveLooksUnderLockOnly: true, Planner: planner.Faults{RunBlindBesideNewerEpoch: true}},
		{Planner: planner.Faults{LeaveBesideNewerEpoch: true, RunBlindBesideNewerEpoch: true}},
	} {
		r, w := Run(Config{Seed: 1002359, Defects: d})
		if r.Violation == nil || r.Violation.Invariant != InvSplitBrain {
			t.Fatalf("seed 1002359 with look-under-lock-only %v, leave-beside-newer-epoch %v: %v, want %q\n%s", d.LeaveLooksUnderLockOnly, d.Planner.LeaveBesideNewerEpoch, r.Violation, InvSplitBrain, w.Trace())
		}
	}
	r, w := Run(Config{Seed: 1002359, TraceLen: 100000})
	if r.Violation != nil || r.Stuck != "" {
		t.Fatalf("seed 1002359: %v (stuck %q)\n%s", r.Violation, r.Stuck, w.Trace())
	}
	if !strings.Contains(w.Trace(), "m2-0      leave: superseded; stopped") {
		t.Fatalf("seed 1002359: m2-0 did not stop as superseded\n%s", w.Trace())
	}
}
