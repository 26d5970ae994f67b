package planner

import (
	"strings"
	"testing"
)

// TestForeignSnapshotSetsMembersDataAsideOnlyWithAcceptDataLoss
// (rev12-sec F1): an operator's recovery from a snapshot of another
// incarnation (a genuine one put back in the store at a higher epoch:
// epoch 7 beside members' data of epoch 2) counted the members' data as
// newer only by epoch and revision, so their current data was set aside
// without -accept-data-loss. A foreign snapshot (SnapshotInfo.Foreign,
// judged against the record under the lock) is no later state of any
// member's data: it goes ahead only with AcceptLoss when members hold
// data, and as before when none does.
func TestForeignSnapshotSetsMembersDataAsideOnlyWithAcceptDataLoss(t *testing.T) {
	rec := &Record{ClusterID: 0xabc, Token: "tokA", Epoch: 2, Seeder: "m0"}
	foreign := &SnapshotInfo{Name: "c-e7-foreign", Revision: 5000, Epoch: 7, Foreign: true}
	data := []PeerStatus{{Name: "m0", Token: "tokA", Epoch: 2, Revision: 300}, {Name: "m1", Token: "tokA", Epoch: 2, Revision: 290}}
	_, err := OperatorSnapshotRecovery(OperatorView{Record: rec, From: "m0", Snapshot: foreign, Answered: data, NewToken: "tokN"})
	if err == nil || !strings.Contains(err.Error(), "another incarnation") || !strings.Contains(err.Error(), "-accept-data-loss") || !strings.Contains(err.Error(), "m1 (epoch 2, revision 290)") {
		t.Fatalf("a foreign snapshot over members' data of the record's lineage: %v; want a refusal naming them and -accept-data-loss", err)
	}
	got, err := OperatorSnapshotRecovery(OperatorView{Record: rec, From: "m0", Snapshot: foreign, Answered: data, NewToken: "tokN", AcceptLoss: true})
	if err != nil || got.Epoch != 8 || got.Source != SnapshotSource(foreign.Name) {
		t.Fatalf("with -accept-data-loss: %+v, %v; want epoch 8 from %s", got, err, foreign.Name)
	}
	empty := []PeerStatus{{Name: "m0"}, {Name: "m1"}}
	if _, err := OperatorSnapshotRecovery(OperatorView{Record: rec, From: "m0", Snapshot: foreign, Answered: empty, NewToken: "tokN"}); err != nil {
		t.Fatalf("a foreign snapshot named while no member holds data: %v", err)
	}
	// The same snapshot of the lineage (not Foreign) goes ahead over
	// older data, as before.
	mine := *foreign
	mine.Foreign = false
	if _, err := OperatorSnapshotRecovery(OperatorView{Record: rec, From: "m0", Snapshot: &mine, Answered: data, NewToken: "tokN"}); err != nil {
		t.Fatalf("a snapshot of the lineage over older data: %v", err)
	}
}
