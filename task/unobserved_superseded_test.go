package task

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/provider"
)

// unreachableProvider is a provider whose API does not answer (the host
// cut off from the Nomad servers, or its allocation collected).
type unreachableProvider struct{}

func (unreachableProvider) Instances(context.Context) ([]provider.Instance, error) {
	return nil, errors.New("nomad unreachable")
}
func (unreachableProvider) DesiredSize(context.Context) (int, error) {
	return 0, errors.New("nomad unreachable")
}

// Sim seed 41704: members of epoch 2 whose observations failed on Nomad
// ran on without a quorum beside the recovery of epoch 3, and a healed
// partition gave epoch 2 its quorum back. A running member whose
// observation fails reads the record all the same (fenceUnobserved): with
// a quorum it keeps running; without one, once the record names a newer
// confirmed epoch another member recorded, it stops etcd and keeps its
// data.
func TestABlindMemberStopsOnceARecoveryReplacedItsEpoch(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0", "m1", "m2")
	m0, m1, cli := joinLearner(t, k)
	var id uint64
	for _, mem := range memberList(t, cli).Members {
		if mem.IsLearner {
			id = mem.ID
		}
	}
	m1.lockForTest(t)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := m1.act(ctx, planner.Observation{}, planner.Decision{Kind: planner.Promote, Name: "m1", MemberID: id})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("promote: %v", err)
		}
	}
	m1.releaseLock(ctx)
	m1.waitMeta(t, func(mt datadir.Meta) bool { return mt.ClusterID != 0 })

	// m9 recovered epoch 2 and confirmed it.
	rec, err := k.co.Record(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := k.co.Lock(ctx, "m9")
	if err != nil {
		t.Fatal(err)
	}
	newer := rec
	newer.ClusterID, newer.Token, newer.Epoch, newer.Seeder, newer.Source = 0x46f, "tok-e2", rec.Epoch+1, "m9", "snapshot:s"
	if _, err := k.co.UpdateRecord(ctx, l, newer); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	m0.opts.Provider = unreachableProvider{}

	// With its quorum (m1 runs): a record alone does not stop it.
	m0.loop(ctx)
	if m0.proc.Server() == nil {
		t.Fatal("m0 stopped with a quorum on the record alone")
	}
	// Without it: it stops, its data and metadata kept; one loop that
	// found no quorum is not enough (review rev18g R5: a member list that
	// timed out once), the next one stops it.
	m1.stopEtcd()
	m0.loop(ctx)
	if m0.proc.Server() == nil {
		t.Fatal("m0 stopped after a single loop without a quorum")
	}
	m0.loop(ctx)
	if m0.proc.Server() != nil {
		t.Fatal("m0 runs epoch 1 blind without a quorum beside the confirmed epoch 2")
	}
	meta, err := m0.dir.ReadMeta()
	if err != nil || meta.Epoch != rec.Epoch || meta.ClusterID != rec.ClusterID {
		t.Fatalf("m0's metadata after the stop: %+v (%v), want epoch %d's kept", meta, err, rec.Epoch)
	}
	m0.mu.Lock()
	decision := m0.status.Decision
	m0.mu.Unlock()
	if decision != string(planner.StopSuperseded) {
		t.Fatalf("m0's status decision %q, want %q", decision, planner.StopSuperseded)
	}
}
