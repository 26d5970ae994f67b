package task

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Sim seed 28743 as the member sees it: an operator's restore of an epoch
// 1 snapshot, recorded as epoch 2, ran as cluster 295 and was
// snapshotted; epoch 3 recovered from its data (ForceNewCluster keeps the
// cluster id) and was snapshotted; Consul then restored the unconfirmed
// record. The listing keeps the epoch 3 snapshot out of LatestSnapshot
// (no incarnation of the unconfirmed record's lineage) and counts it in
// SnapshotEpoch; the resume, with no data here, waits for an operator
// naming it (red before: it restored the epoch 1 snapshot below both).
func TestResumedRestoreWaitsBesideALaterEpochsSnapshotTheListingRefuses(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return e })
	ctx := context.Background()
	var e3 snapshot.Meta
	for _, epoch := range []uint64{2, 3} {
		m, err := snapshot.Save(ctx, snapshot.From{Endpoint: f.m.clientURL(f.m.self), SpoolDir: f.k.dir}, f.store,
			snapshot.Source{Cluster: f.k.cl.Name, ClusterID: "295", Epoch: epoch}, f.enc, nil)
		if err != nil {
			t.Fatal(err)
		}
		e3 = m
	}
	rec := &planner.Record{Token: "tok589", Epoch: 2, Seeder: "m0", Source: planner.SnapshotSource(f.snap.Name), LastConfirmedToken: f.rec.Token, LastConfirmedEpoch: f.rec.Epoch,
		Operator: true, SourceRevision: f.snap.Revision, Accepted: []planner.AcceptedLine{{Epoch: 1, Revision: f.snap.Revision}}, AcceptedRevision: f.snap.Revision}
	var o planner.Observation
	o.Record = rec
	f.m.snapshotListed, f.m.latestSnapshot = time.Time{}, nil
	f.m.observeLatestSnapshot(ctx, &o, time.Now())
	t.Logf("latest %+v refused %+v snapshotEpoch %d", o.LatestSnapshot, o.RefusedSnapshot, o.SnapshotEpoch)
	obs := planner.Observation{ClusterName: f.k.cl.Name, Self: planner.Self{Name: "m0", PeerURL: "http://m0:2380"}, HoldsLock: true, NewToken: "n", RecoveryGrace: time.Second,
		Local:          planner.Local{Empty: true},
		Record:         rec,
		Instances:      []planner.Instance{{Name: "m0"}},
		LatestSnapshot: o.LatestSnapshot, RefusedSnapshot: o.RefusedSnapshot, SnapshotEpoch: o.SnapshotEpoch}
	d := planner.Plan(obs)
	if d.Kind == planner.RecoverQuorum || !d.AwaitsOperator || !strings.Contains(d.Reason, e3.Name) {
		t.Errorf("resumed the operator's restore of %s (epoch 2) beside %s (epoch 3, taken after the record): %s: %s", f.snap.Name, e3.Name, d.Kind, d.Reason)
	}
}
