package task

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

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

// addVoter joins m as a learner under the lock (through the record's
// cluster) and promotes it, as the loop would.
func addVoter(t *testing.T, cli *clientv3.Client, m *Member) {
	t.Helper()
	ctx := context.Background()
	m.lockForTest(t)
	rec := m.record
	o := planner.Observation{Record: &planner.Record{ClusterID: rec.ClusterID, Token: rec.Token, Epoch: rec.Epoch, Seeder: rec.Seeder}}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := m.act(ctx, o, planner.Decision{Kind: planner.JoinAsLearner, Name: m.opts.Name})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("join %s as learner: %v", m.opts.Name, err)
		}
	}
	var id uint64
	for _, mem := range memberList(t, cli).Members {
		if mem.IsLearner {
			id = mem.ID
		}
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := m.act(ctx, planner.Observation{}, planner.Decision{Kind: planner.Promote, Name: m.opts.Name, MemberID: id})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("promote %s: %v", m.opts.Name, err)
		}
	}
	m.releaseLock(ctx)
	m.waitMeta(t, func(mt datadir.Meta) bool { return mt.ClusterID != 0 })
}

// Review rev18g R3 (and R2): a member the blind fence stopped stayed
// stopped for as long as its provider did not answer, even once the
// record that stopped it was withdrawn and its own incarnation served
// again beside it (a planted record; a partition that healed while Nomad
// is down). It asks the instances it last listed and starts its data
// again once one answers as a healthy voter of its own incarnation; the
// record alone, back at its epoch, does not start it.
func TestAFencedMemberStartsAgainBesideItsOwnServingQuorum(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0", "m1", "m2")
	m0 := k.member("m0", nil)
	cli := k.seedForTest(m0)
	m1, m2 := k.member("m1", nil), k.member("m2", nil)
	addVoter(t, cli, m1)
	addVoter(t, cli, m2)
	for _, m := range []*Member{m1, m2} {
		if err := m.serveStatus(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(memberList(t, cli).Members); n != 3 {
		t.Fatalf("%d members, want 3", n)
	}
	// One observation that succeeds: m0 knows the instances.
	m0.loop(ctx)

	// A record of a newer epoch, confirmed, by m9 (planted, or a
	// recovery), and m0 blind without a quorum: the fence stops it.
	genuine, err := k.co.Record(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writeRecord := func(r planner.Record) {
		t.Helper()
		l, err := k.co.Lock(ctx, "m9")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
		cur, err := k.co.Record(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r.Index = cur.Index
		if _, err := k.co.UpdateRecord(ctx, l, r); err != nil {
			t.Fatal(err)
		}
	}
	newer := genuine
	newer.ClusterID, newer.Token, newer.Epoch, newer.Seeder, newer.Source = 0x46f, "tok-e2", genuine.Epoch+1, "m9", "snapshot:s"
	writeRecord(newer)
	m0.opts.Provider = unreachableProvider{}
	m1.stopEtcd()
	m2.stopEtcd()
	m0.loop(ctx)
	m0.loop(ctx)
	if m0.proc.Server() != nil {
		t.Fatal("m0 runs blind without a quorum beside the confirmed newer epoch")
	}

	// The record names m0's incarnation again, but nothing serves it:
	// m0 stays stopped (the record may be an older one Consul restored).
	writeRecord(genuine)
	m0.loop(ctx)
	if m0.proc.Server() != nil {
		t.Fatal("m0 started on the record alone")
	}

	// m1 and m2 serve the incarnation again with their quorum: m0, still
	// without its provider, starts its data again and rejoins them.
	for _, m := range []*Member{m1, m2} {
		if err := m.act(ctx, planner.Observation{}, planner.Decision{Kind: planner.Rejoin, Name: m.opts.Name}); err != nil {
			t.Fatalf("restart %s: %v", m.opts.Name, err)
		}
	}
	waitUntil(t, 30*time.Second, "m1 serves with a quorum", func() (bool, string) {
		st, err := m1.health(ctx)
		if err != nil {
			return false, err.Error()
		}
		return st.Healthy, "not healthy"
	})
	waitUntil(t, 30*time.Second, "m0 starts again beside its serving peers", func() (bool, string) {
		m0.loop(ctx)
		return m0.proc.Server() != nil, m0.reason()
	})
	m0.mu.Lock()
	decision := m0.status.Decision
	m0.mu.Unlock()
	if decision != string(planner.Rejoin) {
		t.Fatalf("m0's status decision %q, want %q", decision, planner.Rejoin)
	}
}
