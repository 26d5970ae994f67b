package planner

import (
	"errors"
	"strings"
	"testing"
)

// Sim seed 121 (data review of collect, session 13, finding 2): an
// operator's recorded restore of snap-1395 verified to 545 set aside m0's
// data at 546 (the operator accepted losing 546 only). A chain segment was
// damaged since; the chain verifies to 540. The way out the planner names,
// 'recover -from snapshot:snap-1395', replaced that record with one whose
// source reaches 540 without -accept-data-loss: revisions 541..545, which
// the first command promised to keep and which sit in m0's set-aside copy,
// were lost silently. The command refuses without -accept-data-loss,
// naming them.
func TestReplacingAnOperatorsRestoreBelowItsSourceRevisionAsksForAcceptance(t *testing.T) {
	rec := &Record{Token: "tokR", Epoch: 2, Seeder: "m0", Source: SnapshotSource("snap-1395"), LastConfirmedToken: "tok19", LastConfirmedEpoch: 1,
		Operator: true, SourceRevision: 545, AcceptedRevision: 546}
	snap := &SnapshotInfo{Name: "snap-1395", Revision: 540, Epoch: 1}
	v := OperatorView{Record: rec, From: "m0", NewToken: "n",
		Answered: []PeerStatus{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}},
		Snapshot: snap, Latest: snap}
	r, err := OperatorSnapshotRecovery(v)
	if err == nil {
		t.Fatalf("recorded epoch %d from %s (source revision %d) without -accept-data-loss, replacing a restore verified to %d: revisions %d..%d are lost silently",
			r.Epoch, r.Source, r.SourceRevision, rec.SourceRevision, snap.Revision+1, rec.SourceRevision)
	}
	var le *LossError
	if !errors.As(err, &le) || le.ReplacedRevision != 545 || !strings.Contains(err.Error(), "541..545") || !strings.Contains(err.Error(), "m0") {
		t.Fatalf("refusal %v (%+v), want a LossError naming revisions 541..545 and the replaced record's seeder m0", err, le)
	}
	v.AcceptLoss = true
	r, err = OperatorSnapshotRecovery(v)
	if err != nil || r.Epoch != 3 || r.SourceRevision != 540 {
		t.Fatalf("with -accept-data-loss: %+v, %v; want epoch 3 restoring to 540", r, err)
	}
	// A confirmed record is no restore in flight (its cluster ran: its
	// members' data is what the command compares), nor is a replaced
	// restore the new source reaches.
	for _, c := range []Record{{Token: "tokR", Epoch: 2, ClusterID: 7, SourceRevision: 545}, {Token: "tokR", Epoch: 2, SourceRevision: 540, Source: SnapshotSource("snap-1395")}} {
		v := v
		v.AcceptLoss, v.Record = false, &c
		if _, err := OperatorSnapshotRecovery(v); err != nil {
			t.Fatalf("replacing %+v: %v, want no refusal", c, err)
		}
	}
}
