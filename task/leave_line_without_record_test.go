package task

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Review rev18e F3: a running member without a record (Consul lost its
// state) whose cluster has no quorum lists the store too, so that a
// leaving one sees a newer epoch of its data's line (LineEpoch: a
// recovery from it ran) and stops at once (planner.LeaveSuperseded)
// rather than run its replaced incarnation through its whole leave,
// where a healing partition gives it its quorum back beside the new one.
// Before, the observation returned before listing the store.
func TestALeavingMemberWithoutARecordSeesItsDatasLine(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return e })
	ctx := context.Background()
	src := snapshot.Source{Cluster: f.k.cl.Name, ClusterID: strconv.FormatUint(f.rec.ClusterID, 16), Epoch: 2}
	if _, err := snapshot.Save(ctx, snapshot.From{Endpoint: f.m.clientURL(f.m.self), SpoolDir: f.k.dir}, f.store, src, f.enc, nil); err != nil {
		t.Fatal(err)
	}
	o := planner.Observation{ClusterName: f.k.cl.Name, Self: planner.Self{Name: "m0", PeerURL: "http://m0:2380"}, NewToken: "n", RecoveryGrace: time.Second,
		Running: true, SelfID: 1,
		Local:     planner.Local{Cluster: f.k.cl.Name, Name: "m0", MemberID: 1, ClusterID: f.rec.ClusterID, Token: f.rec.Token, Epoch: f.rec.Epoch, Revision: 10},
		Instances: []planner.Instance{{Name: "m0"}}}
	f.m.snapshotListed = time.Time{}
	f.m.observeQuorumLoss(ctx, &o, time.Now())
	if o.LineEpoch != 2 {
		t.Fatalf("LineEpoch %d for a running member without a record or a quorum: want 2 (the data's cluster id)", o.LineEpoch)
	}
	if d := planner.PlanLeave(o); d.Kind != planner.LeaveSuperseded {
		t.Errorf("leaving without a record beside its line's epoch 2: %s (%s), want %s", d.Kind, d.Reason, planner.LeaveSuperseded)
	}
}
