package task

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Consul restored an operator's unconfirmed record of epoch 2 ('recover
// -from m0', never started) after epoch 3 ran and was snapshotted. The
// member's listing keeps the epoch 3 snapshot out of LatestSnapshot (no
// incarnation of the unconfirmed record's lineage) and counts it in
// SnapshotEpoch; the resume waits for an operator, naming it (review
// rev16a A1, red before: m0 resumed epoch 2 from its epoch 1 data).
func TestResumeWaitsBesideALaterEpochsSnapshotTheListingRefuses(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return e })
	ctx := context.Background()
	e3, err := snapshot.Save(ctx, snapshot.From{Endpoint: f.m.clientURL(f.m.self), SpoolDir: f.k.dir}, f.store,
		snapshot.Source{Cluster: f.k.cl.Name, ClusterID: "c3", Epoch: 3}, f.enc, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := e3.Revision + 100 // m0's epoch 1 data, beyond the epoch 3 snapshot
	rec := &planner.Record{Token: "tok100", Epoch: 2, Seeder: "m0", Source: planner.FromData, LastConfirmedToken: f.rec.Token, LastConfirmedEpoch: f.rec.Epoch,
		Operator: true, Accepted: []planner.AcceptedLine{{Token: f.rec.Token, Epoch: f.rec.Epoch, Revision: src}, {Epoch: f.rec.Epoch, Revision: src}}, AcceptedRevision: src}
	var o planner.Observation
	o.Record = rec
	f.m.snapshotListed, f.m.latestSnapshot = time.Time{}, nil
	f.m.observeLatestSnapshot(ctx, &o, time.Now())
	t.Logf("latest %+v refused %+v snapshotEpoch %d", o.LatestSnapshot, o.RefusedSnapshot, o.SnapshotEpoch)
	obs := planner.Observation{ClusterName: f.k.cl.Name, Self: planner.Self{Name: "m0", PeerURL: "http://m0:2380"}, HoldsLock: true, NewToken: "n", RecoveryGrace: time.Second,
		Local:          planner.Local{Cluster: f.k.cl.Name, Name: "m0", MemberID: 1, ClusterID: f.rec.ClusterID, Token: f.rec.Token, Epoch: f.rec.Epoch, Revision: src},
		Record:         rec,
		Instances:      []planner.Instance{{Name: "m0"}},
		LatestSnapshot: o.LatestSnapshot, RefusedSnapshot: o.RefusedSnapshot, SnapshotEpoch: o.SnapshotEpoch}
	d := planner.Plan(obs)
	if d.Kind == planner.RecoverQuorum || !d.AwaitsOperator || !strings.Contains(d.Reason, e3.Name) {
		t.Errorf("resumed the operator's epoch 2 recovery from epoch %d data beside %s (epoch 3, taken after the record): %s: %s", f.rec.Epoch, e3.Name, d.Kind, d.Reason)
	}
}
