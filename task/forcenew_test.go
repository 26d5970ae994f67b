package task

import (
	"context"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

// TestStaleForceNewFlagIsNeverHonoured (safety issue, defect 11): a
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
	e := m1.etcd
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
