package task

import (
	"context"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Data-safety review: a member's in-memory mark of a damaged
// delta (m.damagedDeltas, never cleared while the process runs) is
// applied to an operator's restore too. The operator's command read and
// verified the whole chain (the segment is sound now: re-uploaded, or the
// earlier read was what was damaged) and recorded SourceRevision at its
// end; the seeder leaves the marked segment out, stops short, and refuses
// on every loop until its process restarts. Safe (nothing is recorded or
// moved), but the operator's recovery never completes on this seeder and
// the refusal names no damaged segment.
func TestOperatorRestoreIsNotStoppedByAStaleDamagedMark(t *testing.T) {
	f := newChainFixture(t)
	m, snap, second := f.m, f.snap, f.second
	ctx := context.Background()
	var err error
	// An earlier automatic attempt found the second segment damaged.
	m.damagedDeltas = map[string]bool{second.Name: true}

	op := f.recordOperatorRestore(t)
	d := planner.Decision{Kind: planner.RecoverQuorum, Name: "m0", From: planner.FromSnapshot, Snapshot: snap.Name, Record: &op}
	for try := 1; try <= 2; try++ {
		m.lockForTest(t)
		err = m.act(ctx, planner.Observation{}, d)
		m.releaseLock(ctx)
		if err == nil {
			return
		}
		t.Logf("try %d: %v", try, err)
	}
	t.Fatalf("the operator's restore, verified whole by its command, is refused on every try by this seeder: %v", err)
}
