package sim

import (
	"testing"
)

// Review rev18e F4: a leaving voter without a quorum saves no snapshot.
// The fix the review suggested (save this member's own data as it goes,
// LeaveSnapshotWithoutQuorum) loses acknowledged writes on seed 870:
// m1-0, cut off at revision 13 while the majority wrote on to 19 and its
// leader's recorder chained deltas onto snap-29 (revision 2), saved a
// full snapshot at 13 as it left; that one ranks above snap-29, so the
// recovery of epoch 3 restored revision 13 and left the chain's writes
// to 19 behind. A member without a quorum cannot tell a lost quorum from
// a partition whose majority writes on.
func TestALeavingVoterWithoutAQuorumSavesNoSnapshot(t *testing.T) {
	r, w := Run(Config{Seed: 870, Defects: Defects{LeaveSnapshotWithoutQuorum: true}})
	if r.Violation == nil || r.Violation.Invariant != InvLostWrites {
		t.Fatalf("seed 870 with LeaveSnapshotWithoutQuorum: %v, want %q\n%s", r.Violation, InvLostWrites, w.Trace())
	}
	if r, w := Run(Config{Seed: 870}); r.Violation != nil {
		t.Fatalf("seed 870: %v\n%s", r.Violation, w.Trace())
	}
}
