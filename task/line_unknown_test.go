package task

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// flakyListStore's listing fails while down is set (a 503, a partition
// to the store), and answers otherwise.
type flakyListStore struct {
	snapshot.Store
	down *atomic.Bool
}

func (s flakyListStore) List(ctx context.Context) ([]snapshot.Meta, error) {
	if s.down.Load() {
		return nil, errors.New("503 Slow Down")
	}
	return s.Store.List(ctx)
}

// saveLine saves a snapshot of f's running member under its cluster id at
// epoch: a recovery from its line (ForceNewCluster keeps the id).
func saveLine(t *testing.T, f authFixture, epoch uint64) {
	t.Helper()
	src := snapshot.Source{Cluster: f.k.cl.Name, ClusterID: strconv.FormatUint(f.rec.ClusterID, 16), Epoch: epoch}
	if _, err := snapshot.Save(context.Background(), snapshot.From{Endpoint: f.m.clientURL(f.m.self), SpoolDir: f.k.dir}, f.store, src, f.enc, nil); err != nil {
		t.Fatal(err)
	}
}

// Review rev18f F4 (sim seed 16514's shape): the store holds epoch 2 of
// the data's line, Consul restored the record of epoch 1, and the
// listing that would show it fails at the member's next look. Before,
// the failed listing dropped the line epoch the last one had shown, and
// the epoch-1 data rejoined below epoch 2; the member keeps it until a
// listing answers.
func TestALineEpochOutlivesAListingThatFails(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return e })
	ctx := context.Background()
	saveLine(t, f, 2)
	var down atomic.Bool
	m := f.k.memberWith("m0", f.k.co, &backup.Snapshots{Store: flakyListStore{f.store, &down}, Encryption: f.enc})
	rec := f.rec
	obs := func() planner.Observation {
		return planner.Observation{ClusterName: f.k.cl.Name, Self: planner.Self{Name: "m0", PeerURL: "http://m0:2380"}, NewToken: "n", RecoveryGrace: time.Second,
			Local:     planner.Local{Cluster: f.k.cl.Name, Name: "m0", MemberID: 1, ClusterID: f.rec.ClusterID, Token: f.rec.Token, Epoch: f.rec.Epoch, Revision: 10},
			Record:    &rec,
			Instances: []planner.Instance{{Name: "m0"}}}
	}
	o := obs()
	m.observeLatestSnapshot(ctx, &o, time.Now())
	if o.LineEpoch != 2 || o.ListingUnanswered != "" {
		t.Fatalf("listing up: LineEpoch %d (unanswered %q), want 2", o.LineEpoch, o.ListingUnanswered)
	}
	down.Store(true)
	m.snapshotListed = time.Time{}
	o = obs()
	m.observeLatestSnapshot(ctx, &o, time.Now())
	if o.ListingUnanswered == "" || o.LineEpoch != 2 {
		t.Fatalf("listing down: LineEpoch %d (unanswered %q), want 2 remembered and the failure named", o.LineEpoch, o.ListingUnanswered)
	}
	if d := planner.Plan(o); d.Kind == planner.Rejoin {
		t.Errorf("epoch 1 data rejoined below its line's epoch 2 while the listing failed: %s", d.Reason)
	}
}

// Review rev18f F5: a running member without a record lists the store
// before it re-records its epoch, so that the planner sees a newer epoch
// of its line (LineEpoch) and does not record the superseded one. Before,
// a running member without a record never listed the store.
func TestARunningMemberWithoutARecordListsItsLine(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return e })
	ctx := context.Background()
	saveLine(t, f, 2)
	o := planner.Observation{ClusterName: f.k.cl.Name, Self: planner.Self{Name: "m0", PeerURL: "http://m0:2380"}, NewToken: "n", RecoveryGrace: time.Second,
		Running: true, SelfID: 1, HoldsLock: true, MembersKnown: true, MembersClusterID: f.rec.ClusterID, LeaderID: 1,
		Members:   []planner.Member{{ID: 1, Name: "m0", Healthy: true}},
		Local:     planner.Local{Cluster: f.k.cl.Name, Name: "m0", MemberID: 1, ClusterID: f.rec.ClusterID, Token: f.rec.Token, Epoch: f.rec.Epoch, Revision: 10},
		Instances: []planner.Instance{{Name: "m0"}}}
	f.m.snapshotListed = time.Time{}
	f.m.observeQuorumLoss(ctx, &o, time.Now())
	if o.LineEpoch != 2 {
		t.Fatalf("LineEpoch %d for a running member without a record: want 2 (its cluster id)", o.LineEpoch)
	}
	if d := planner.Plan(o); d.Kind == planner.RecordCluster {
		t.Errorf("re-recorded epoch %d below its line's epoch 2: %s", d.Record.Epoch, d.Reason)
	}
}
