package task

import (
	"context"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Invariant 4, "from the highest revision known": a running member reports
// its server's revision (its backend is etcd's while it runs), as peers
// report theirs; reported as 0, a survivor with less data would be chosen.
func TestObserveReportsTheRunningRevision(t *testing.T) {
	k := newKit(t, "m0")
	m := k.member("m0", nil)
	cli := k.seedForTest(m)
	for i := range 5 {
		put(t, cli, "k", string(rune('a'+i)))
	}
	resp, err := cli.Get(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	o, err := m.observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !o.Running || o.Local.Revision != resp.Header.Revision {
		t.Fatalf("observed running=%v revision %d, want the server's %d", o.Running, o.Local.Revision, resp.Header.Revision)
	}
	if o.RecoveryGrace != k.cl.RecoveryGrace {
		t.Fatalf("observed recovery grace %s, want the definition's %s", o.RecoveryGrace, k.cl.RecoveryGrace)
	}
}

// Invariant 4's clocks: quorum-loss time and seeder-absence time count from
// the start of the current loss, and restart from zero once it ends, so an
// old loss never shortens the grace period of a new one.
func TestRecoveryClocksRestartAfterEachLoss(t *testing.T) {
	k := newKit(t, "m0", "m1")
	m := k.member("m0", nil)
	ctx := context.Background()
	t0 := time.Now()
	lost := func(at time.Duration) planner.Observation {
		o := planner.Observation{Record: &planner.Record{ClusterID: 7, Token: "t", Epoch: 1}}
		m.observeQuorumLoss(ctx, &o, t0.Add(at))
		return o
	}
	if o := lost(0); o.QuorumLostFor != 0 || o.RecoveryGrace != k.cl.RecoveryGrace {
		t.Fatalf("first sight of the loss: lost for %s, grace %s", o.QuorumLostFor, o.RecoveryGrace)
	}
	if o := lost(10 * time.Second); o.QuorumLostFor != 10*time.Second {
		t.Fatalf("lost for %s after 10s, want 10s", o.QuorumLostFor)
	}
	healed := planner.Observation{MembersKnown: true, Record: &planner.Record{ClusterID: 7, Token: "t", Epoch: 1}}
	m.observeQuorumLoss(ctx, &healed, t0.Add(11*time.Second))
	if o := lost(20 * time.Second); o.QuorumLostFor != 0 {
		t.Fatalf("a new loss after quorum came back counts %s, want 0", o.QuorumLostFor)
	}

	// The seeder of an unconfirmed recovery record, absent, then listed
	// again, then absent again.
	rec := &planner.Record{Token: "t2", Epoch: 2, Seeder: "m1", Source: planner.FromData}
	gone := func(at time.Duration, listed bool) planner.Observation {
		o := planner.Observation{Record: rec}
		if listed {
			o.Instances = []planner.Instance{{Name: "m1"}}
		}
		m.observeSeeder(&o, t0.Add(at))
		return o
	}
	gone(0, false)
	if o := gone(10*time.Second, false); o.SeederGoneFor != 10*time.Second {
		t.Fatalf("seeder gone for %s after 10s, want 10s", o.SeederGoneFor)
	}
	gone(11*time.Second, true)
	if o := gone(20*time.Second, false); o.SeederGoneFor != 0 {
		t.Fatalf("a seeder gone again after it came back counts %s, want 0", o.SeederGoneFor)
	}
}

// Invariant 5: a running learner asks the other instances for the member
// list, and an answer from another cluster behind their URLs (a restore or
// recovery elsewhere, a reused address) is not taken as its own cluster's.
func TestLearnerIgnoresAnotherClustersMemberList(t *testing.T) {
	k := newKit(t, "m0", "m1", "m2")
	_, m1, _ := joinLearner(t, k)
	m1.waitReady(t)
	other := newKit(t, "n0")
	n0 := other.member("n0", nil)
	other.seedForTest(n0)

	// m0's instance now points at n0's client port: another cluster.
	list := append([]config.StaticMember(nil), k.cl.Provider.Static...)
	list[0].ClientPort = other.cl.Provider.Static[0].ClientPort
	k.prov.Set(list)
	o, err := m1.observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if o.MembersKnown {
		t.Fatalf("m1 took cluster %x's member list as its own (%d members): it would act on another cluster's membership", o.MembersClusterID, len(o.Members))
	}
	// With m0's own endpoint back, the list is m1's cluster's.
	k.prov.Set(k.cl.Provider.Static)
	waitFor := time.Now().Add(10 * time.Second)
	for {
		o, err = m1.observe(context.Background())
		if err == nil && o.MembersKnown {
			break
		}
		if time.Now().After(waitFor) {
			t.Fatalf("m1 never read its own cluster's member list again: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
