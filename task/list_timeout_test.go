package task

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// hangingListStore's listing never answers (a store or proxy that accepts
// the connection and then stalls) until the caller's context ends.
type hangingListStore struct{ snapshot.Store }

func (hangingListStore) List(ctx context.Context) ([]snapshot.Meta, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A running member whose record Consul lost lists the store inside its
// observation (the superseded-line rule, rev18f F5): a store that stalls
// holds its loop for snapshotListTimeout at most, and the listing counts
// as unanswered (review rev19c F1: it held the loop for as long as the
// store hung, with no re-record and no summary heartbeat meanwhile).
func TestAHangingStoreHoldsARunningMembersLoopOnlyForTheListTimeout(t *testing.T) {
	defer func(d time.Duration) { snapshotListTimeout = d }(snapshotListTimeout)
	snapshotListTimeout = 300 * time.Millisecond
	k := newKit(t, "m0")
	fs, err := file.New(filepath.Join(k.dir, "snapshots"), k.cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	m := k.memberWith("m0", k.co, &backup.Snapshots{Store: hangingListStore{fs}})
	o := planner.Observation{ClusterName: k.cl.Name, Self: planner.Self{Name: "m0"}, NewToken: "n", RecoveryGrace: time.Second,
		Running: true, SelfID: 1, MembersKnown: true, MembersClusterID: 0x18, LeaderID: 1,
		Members:   []planner.Member{{ID: 1, Name: "m0", Healthy: true}},
		Local:     planner.Local{Cluster: k.cl.Name, Name: "m0", MemberID: 1, ClusterID: 0x18, Token: "t", Epoch: 1, Revision: 10},
		Instances: []planner.Instance{{Name: "m0"}}}
	start := time.Now()
	m.observeQuorumLoss(context.Background(), &o, time.Now()) // the loop's context has no deadline
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("observation took %s: it waited on the stalled listing", took.Round(time.Millisecond))
	}
	if o.ListingUnanswered == "" {
		t.Fatalf("a listing that timed out must count as unanswered")
	}
}
