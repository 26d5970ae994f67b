package task

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Invariant 10: before a recovery a member asks every member of its
// own last known membership, whatever the provider lists; a majority that
// answers with a leader blocks the recovery. Here the provider lists only
// m0 (Nomad garbage-collected m1's and m2's allocations while their
// processes ran on behind a partition): m0 finds them through its running
// server's membership, and again through its stopped data's.
func TestForgottenHealthyMajorityIsFoundBeforeARecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("three embedded members")
	}
	k := newKit(t, "m0", "m1", "m2")
	ms, _, stops := startLoopsStops(t, k)
	m0 := ms["m0"]
	k.prov.Set(k.cl.Provider.Static[:1])
	observe := func() planner.Observation {
		o := planner.Observation{Self: planner.Self{Name: "m0"}, Record: &planner.Record{ClusterID: 1, Epoch: 1}, Local: m0.dir.Observe(m0.etcdServerLeader() != 0)}
		if o.Local.ClusterID == 0 {
			t.Fatalf("m0's data names no cluster: %+v", o.Local)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m0.observeKnownHealthy(ctx, &o, time.Now())
		return o
	}
	want := func(o planner.Observation, how string) {
		t.Helper()
		got := strings.Join(o.KnownHealthy, " ")
		if !strings.Contains(got, "m1 (") || !strings.Contains(got, "m2 (") || strings.Contains(got, "m0 (") {
			t.Fatalf("%s: known healthy %q, want m1 and m2", how, got)
		}
		lone := planner.Observation{ClusterName: "c", Self: planner.Self{Name: "m0"}, Running: true, SelfID: 2, HoldsLock: true, NewToken: "n",
			Local:  planner.Local{Cluster: "c", Name: "m0", Token: "t", Epoch: 1, MemberID: 2, Revision: 500},
			Record: &planner.Record{ClusterID: 7, Token: "t", Epoch: 1}, Instances: []planner.Instance{{Name: "m0"}},
			RecoveryGrace: 30 * time.Second, QuorumLostFor: time.Minute}
		if d := planner.Plan(lone); d.Kind != planner.RecoverQuorum {
			t.Fatalf("the lone survivor without the probe: %s (%s), want a recovery", d.Kind, d.Reason)
		}
		lone.KnownHealthy = o.KnownHealthy
		if d := planner.Plan(lone); d.Kind != planner.Wait || !strings.Contains(d.Reason, "last known membership") {
			t.Fatalf("%s: planned %s (%s), want a wait naming the forgotten majority", how, d.Kind, d.Reason)
		}
	}
	want(observe(), "running")
	stops["m0"]()
	m0.halt()
	want(observe(), "stopped")

	// A recovery from m0's data recorded and its ForceNewCluster start
	// pending: the metadata says cluster 0, and the membership the data
	// holds is the source line's, still serving (review rev18b F1: it
	// was not probed at all, and the wait asked for 'recover -from m0').
	meta, err := m0.dir.ReadMeta()
	if err != nil {
		t.Fatal(err)
	}
	meta.ForceNewFrom("t2", 2)
	if err := m0.dir.WriteMeta(meta); err != nil {
		t.Fatal(err)
	}
	pending := func() planner.Observation {
		o := planner.Observation{Self: planner.Self{Name: "m0"}, Record: &planner.Record{ClusterID: 1, Epoch: 1}, Local: m0.dir.Observe(false)}
		if !o.Local.ForceNewPending || o.Local.ClusterID != 0 {
			t.Fatalf("m0's data after ForceNewFrom: %+v, want a pending ForceNew of cluster 0", o.Local)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m0.observeKnownHealthy(ctx, &o, time.Now())
		return o
	}
	m0.known.seen = nil // a fresh process: nothing remembered
	want(pending(), "stopped, its recovery's start pending")
}
