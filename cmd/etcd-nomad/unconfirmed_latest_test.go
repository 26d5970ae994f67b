package main

import (
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// TestLatestUnderAnUnconfirmedRecordIsNoSnapshotOfAHigherEpoch (review
// rev13-sec 4, MED): the F1 fix ties "latest" to the record's lineage, but a record not
// confirmed yet (cluster id 0: a recovery whose seeder was lost, the
// stuck state an operator is called to) tied nothing: 'recover -from
// snapshot:latest' then took a store writer's put-back snapshot of
// another incarnation (epoch 7, far above the record's 3), with no
// warning at all, although no snapshot of this record's lineage can be of
// an epoch above the record's.
func TestLatestUnderAnUnconfirmedRecordIsNoSnapshotOfAHigherEpoch(t *testing.T) {
	all, enc, foreign, mine := putBackBeside(t)
	// The record of an automatic recovery from epoch 2, not confirmed.
	record := snapshot.Lineage{ClusterID: 0, Epoch: 3}
	ui := cli.NewMockUi()
	// As beside a confirmed record's put-back incarnation (review
	// rev13-data 3): refused without -accept-data-loss, naming it.
	if got, _, err := chooseRestore(ui, all, &enc, record, "latest", acceptance{}); err == nil || !strings.Contains(err.Error(), foreign.Name) {
		t.Fatalf("\"latest\" beside the newer put-back %s without -accept-data-loss: %s, %v; want a refusal naming it", foreign.Name, got.Name, err)
	}
	ui = cli.NewMockUi()
	got, _, err := chooseRestore(ui, all, &enc, record, "latest", acceptance{loss: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != mine.Name {
		t.Fatalf("\"latest\" under an unconfirmed record of epoch 3 is the put-back %s (cluster id %s, epoch %d), not %s; warnings: %q", got.Name, got.ClusterID, got.Epoch, mine.Name, ui.ErrorWriter.String())
	}
	if !strings.Contains(ui.ErrorWriter.String(), foreign.Name) {
		t.Fatalf("no warning naming the newer snapshot of another incarnation %s: %q", foreign.Name, ui.ErrorWriter.String())
	}
}

// TestUnconfirmedRecordTakesAHigherEpochSnapshotOnlyWithAcceptDataLoss:
// what 'recover' then records under the lock for it (operatorRestore:
// Foreign judged by the unconfirmed record's lineage, which ties
// nothing): no -accept-data-loss asked although members hold the
// record's lineage's data, which the new epoch sets aside.
func TestUnconfirmedRecordTakesAHigherEpochSnapshotOnlyWithAcceptDataLoss(t *testing.T) {
	rec := &planner.Record{ClusterID: 0, Token: "tokR", Epoch: 3, Seeder: "m9", Source: planner.FromData}
	lin := snapshot.Lineage{ClusterID: rec.ClusterID, Epoch: rec.Epoch}
	foreign := snapshot.Meta{Name: "c-e7-foreign", ClusterID: "01d", Epoch: 7, Revision: 5000}
	v := planner.OperatorView{Record: rec, From: "m0", NewToken: "tokN",
		Snapshot: &planner.SnapshotInfo{Name: foreign.Name, Epoch: 7, Revision: 5000, Foreign: !lin.Of(foreign)},
		Answered: []planner.PeerStatus{{Name: "m0", Token: "tokA", Epoch: 2, Revision: 300}, {Name: "m1", Token: "tokA", Epoch: 2, Revision: 290}}}
	got, err := planner.OperatorSnapshotRecovery(v)
	if err == nil {
		t.Fatalf("recorded %+v: the put-back snapshot of another incarnation (epoch 7 above the record's 3) restored over members' data of epoch 2 without -accept-data-loss", got)
	}
}
