package task

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Review rev18c N2: with no record (Consul lost its state), stopped data
// still lists the store during the quorum-loss observation, so the
// planner sees a newer epoch of the data's line (LineEpoch) and does not
// start the data below it. Before, a data member without a record
// returned before listing the store or probing anyone.
func TestTheListingNamesTheDatasLineWithoutARecord(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return e })
	ctx := context.Background()
	src := snapshot.Source{Cluster: f.k.cl.Name, ClusterID: strconv.FormatUint(f.rec.ClusterID, 16), Epoch: 2}
	if _, err := snapshot.Save(ctx, snapshot.From{Endpoint: f.m.clientURL(f.m.self), SpoolDir: f.k.dir}, f.store, src, f.enc, nil); err != nil {
		t.Fatal(err)
	}
	o := planner.Observation{ClusterName: f.k.cl.Name, Self: planner.Self{Name: "m0", PeerURL: "http://m0:2380"}, NewToken: "n", RecoveryGrace: time.Second,
		Local:     planner.Local{Cluster: f.k.cl.Name, Name: "m0", MemberID: 1, ClusterID: f.rec.ClusterID, Token: f.rec.Token, Epoch: f.rec.Epoch, Revision: 10},
		Instances: []planner.Instance{{Name: "m0"}}}
	f.m.snapshotListed = time.Time{}
	f.m.observeQuorumLoss(ctx, &o, time.Now())
	if o.LineEpoch != 2 {
		t.Fatalf("LineEpoch %d without a record: want 2 (the data's cluster id)", o.LineEpoch)
	}
	if d := planner.Plan(o); d.Kind == planner.Rejoin {
		t.Errorf("epoch 1 data without a record rejoined below its line's epoch 2: %s", d.Reason)
	}
}
