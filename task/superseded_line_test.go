package task

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Sim seed 16514: a recovery from this data's line ran at epoch 2
// (ForceNewCluster keeps the cluster id) and was snapshotted, then Consul
// restored the record of epoch 1. The listing names that epoch under the
// data's cluster id (LineEpoch), a restore's higher epoch under another
// cluster id not, and the member's epoch 1 data does not rejoin.
func TestTheListingNamesANewerEpochOfTheDatasLine(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return e })
	ctx := context.Background()
	for _, src := range []snapshot.Source{
		{Cluster: f.k.cl.Name, ClusterID: strconv.FormatUint(f.rec.ClusterID, 16), Epoch: 2},
		{Cluster: f.k.cl.Name, ClusterID: "c5", Epoch: 5},
	} {
		time.Sleep(1100 * time.Millisecond) // object names carry the second
		if _, err := snapshot.Save(ctx, snapshot.From{Endpoint: f.m.clientURL(f.m.self), SpoolDir: f.k.dir}, f.store, src, f.enc, nil); err != nil {
			t.Fatal(err)
		}
	}
	rec := f.rec
	o := planner.Observation{ClusterName: f.k.cl.Name, Self: planner.Self{Name: "m0", PeerURL: "http://m0:2380"}, NewToken: "n", RecoveryGrace: time.Second,
		Local:     planner.Local{Cluster: f.k.cl.Name, Name: "m0", MemberID: 1, ClusterID: f.rec.ClusterID, Token: f.rec.Token, Epoch: f.rec.Epoch, Revision: 10},
		Record:    &rec,
		Instances: []planner.Instance{{Name: "m0"}}}
	f.m.snapshotListed = time.Time{}
	f.m.observeLatestSnapshot(ctx, &o, time.Now())
	if o.LineEpoch != 2 || o.SnapshotEpoch != 5 {
		t.Fatalf("LineEpoch %d, SnapshotEpoch %d: want 2 (the data's cluster id) and 5 (any)", o.LineEpoch, o.SnapshotEpoch)
	}
	if d := planner.Plan(o); d.Kind == planner.Rejoin {
		t.Errorf("epoch 1 data rejoined below its line's epoch 2: %s", d.Reason)
	}
}
