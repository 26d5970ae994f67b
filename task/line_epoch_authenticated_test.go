package task

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Review rev18c N6: LineEpoch counts only objects that authenticate. A
// store writer's plant under the data's cluster id at a higher epoch
// (written without the MAC key: it has none) is a refused object, never
// a newer epoch of the data's line, so it cannot make current data look
// superseded; it costs only the operator's wait beside a refused object.
// Without a MAC key configured nothing authenticates and the store's
// writers are trusted (docs/security.md, "Write access to the snapshot
// store": not closed without a KEK; such a writer can already have a
// forged snapshot restored).
func TestLineEpochCountsOnlyAuthenticatedSnapshots(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return e })
	ctx := context.Background()
	plant := snapshot.Source{Cluster: f.k.cl.Name, ClusterID: strconv.FormatUint(f.rec.ClusterID, 16), Epoch: 5}
	if _, err := snapshot.Save(ctx, snapshot.From{Endpoint: f.m.clientURL(f.m.self), SpoolDir: f.k.dir}, f.store, plant, snapshot.Encryption{}, nil); err != nil {
		t.Fatal(err)
	}
	o := planner.Observation{ClusterName: f.k.cl.Name, Self: planner.Self{Name: "m0", PeerURL: "http://m0:2380"}, NewToken: "n", RecoveryGrace: time.Second,
		Local:     planner.Local{Cluster: f.k.cl.Name, Name: "m0", MemberID: 1, ClusterID: f.rec.ClusterID, Token: f.rec.Token, Epoch: f.rec.Epoch, Revision: 10},
		Instances: []planner.Instance{{Name: "m0"}}}
	f.m.snapshotListed = time.Time{}
	f.m.observeQuorumLoss(ctx, &o, time.Now())
	if o.LineEpoch != f.rec.Epoch {
		t.Fatalf("LineEpoch %d beside an unauthenticated plant of epoch 5 under the data's cluster id: want %d (the genuine snapshot's)", o.LineEpoch, f.rec.Epoch)
	}
	if o.RefusedSnapshot == nil || o.RefusedSnapshot.Epoch != 5 {
		t.Fatalf("the plant is not the refused object: %+v", o.RefusedSnapshot)
	}
}
