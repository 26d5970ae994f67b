package task

import (
	"context"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

// TestStaleForceNewFlagIsNeverHonoured (invariant 10): a
// ForceNew flag left in a member's metadata after its recovery (the write
// that clears it failed, or the process died first) must not make a later
// start fork the member off its cluster once the record is confirmed with
// other members: the start refuses ForceNewCluster and clears the flag.
func TestStaleForceNewFlagIsNeverHonoured(t *testing.T) {
	k := newKit(t, "m0", "m1", "m2")
	_, m1, cli := joinLearner(t, k)
	var id uint64
	for _, mem := range memberList(t, cli).Members {
		if mem.IsLearner {
			id = mem.ID
		}
	}
	m1.lockForTest(t)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := m1.act(context.Background(), planner.Observation{}, planner.Decision{Kind: planner.Promote, Name: "m1", MemberID: id})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("promote: %v", err)
		}
	}
	m1.releaseLock(context.Background())
	m1.waitMeta(t, func(mt datadir.Meta) bool { return mt.ClusterID != 0 })

	// m1 stops; its metadata carries a stale ForceNew flag.
	m1.stopEtcd()
	meta, err := m1.dir.ReadMeta()
	if err != nil {
		t.Fatal(err)
	}
	meta.ForceNew = true
	if err := m1.dir.WriteMeta(meta); err != nil {
		t.Fatal(err)
	}
	m1.readRecord(t) // confirmed, epoch 1, seeded by m0
	if err := m1.start(meta.Name, "", "existing", m1.initialCluster(meta.Name, nil)); err != nil {
		t.Fatal(err)
	}
	m1.waitReady(t)
	m1.mu.Lock()
	e := m1.proc.Server()
	m1.mu.Unlock()
	if n := len(e.Server.Cluster().Members()); n != 2 {
		t.Fatalf("m1 restarted with a stale ForceNew flag sees %d members, want 2: it forked itself off the cluster", n)
	}
	if after, _ := m1.dir.ReadMeta(); after.ForceNew {
		t.Fatal("the stale ForceNew flag is still set")
	}
	if n := len(memberList(t, cli).Members); n != 2 {
		t.Fatalf("the cluster has %d members after m1's restart, want 2", n)
	}
}

// TestUnstartedRecoveryWithoutItsRecordStartsAsItsSource (review
// rv14-data, TestRV14PendingDataWithoutARecordDoesNotRerecordItsUnstartedEpoch,
// RV14-4): a recovery from data rewrote the metadata for its
// ForceNewCluster start (the next epoch's token, cluster id 0) and the
// member stopped before it; Consul then lost the record. The start that
// follows refuses ForceNewCluster (no record names the recovery) and
// rejoins the data's own cluster: the metadata must name that cluster's
// incarnation again, or the member re-records an epoch that never ran and
// the cluster's other members set their running data aside for it.
func TestUnstartedRecoveryWithoutItsRecordStartsAsItsSource(t *testing.T) {
	k := newKit(t, "m0")
	m := k.member("m0", nil)
	cli := k.seedForTest(m)
	put(t, cli, "before", "kept")
	src, err := m.dir.ReadMeta()
	if err != nil {
		t.Fatal(err)
	}

	// recover(): the next epoch is recorded, the metadata rewritten; the
	// process stops before its ForceNewCluster start.
	m.stopEtcd()
	meta := src
	meta.ForceNewFrom(coord.NewToken(), src.Epoch+1)
	if err := m.dir.WriteMeta(meta); err != nil {
		t.Fatal(err)
	}
	if l := m.dir.Observe(false); !l.ForceNewPending || l.Epoch != src.Epoch+1 {
		t.Fatalf("after the rewrite: %+v, want the pending epoch %d", l, src.Epoch+1)
	}
	m.mu.Lock()
	m.record = nil // Consul lost its state
	m.mu.Unlock()

	if err := m.start(meta.Name, "", "existing", m.initialCluster(meta.Name, nil)); err != nil {
		t.Fatal(err)
	}
	m.waitReady(t)
	if _, forced := m.running(); forced {
		t.Fatal("started with ForceNewCluster without a record naming the recovery")
	}
	after := m.waitMeta(t, func(mt datadir.Meta) bool { return mt.ClusterID != 0 })
	if after.Token != src.Token || after.Epoch != src.Epoch || after.ClusterID != src.ClusterID || after.ForceNew {
		t.Fatalf("metadata after the start without ForceNewCluster: token %s epoch %d cluster %x force-new %v, want the data's own incarnation: token %s epoch %d cluster %x",
			after.Token, after.Epoch, after.ClusterID, after.ForceNew, src.Token, src.Epoch, src.ClusterID)
	}
	if v := getVal(t, k.client(m), "before"); v != "kept" {
		t.Fatalf("key after the start: %q, want %q", v, "kept")
	}
}
