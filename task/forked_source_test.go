package task

import (
	"context"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Review rev15-data F2 (S1): m0 and m1 are the two voters of epoch 1. m0's recovery
// from its data (tok3, epoch 2) starts with ForceNewCluster: etcd's
// bootstrap appends and commits the removal of m1 to the WAL before the
// server is ready; m0 dies before completeMeta (the metadata still says
// ForceNew, no cluster id, StartedToken tok3). Consul then loses its
// state. With no record the planner says Rejoin, start() refuses the flag
// and DropForceNew names the source incarnation again: m0 runs as a
// one-member cluster under the source's token, epoch and cluster id, while
// m1's data (and m2's, in a three-member cluster) still lists both.
func TestStartedForceNewWithoutItsRecordNeverRunsAsItsSource(t *testing.T) {
	k := newKit(t, "m0", "m1", "m2")
	m0, m1, cli := joinLearner(t, k)
	m1.waitReady(t)
	learner := m1.waitMeta(t, func(mt datadir.Meta) bool { return mt.MemberID != 0 }).MemberID
	m1.lockForTest(t)
	var err error
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err = m1.act(context.Background(), planner.Observation{}, planner.Decision{Kind: planner.Promote, Name: "m1", MemberID: learner}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("promote: %v", err)
		}
	}
	m1.releaseLock(context.Background())
	put(t, cli, "before", "kept")
	cli.Close()
	m1.stopEtcd()
	m0.stopEtcd()
	src := mustMeta(t, m0)

	pre := src
	pre.ForceNewFrom("tok3", src.Epoch+1)
	if err := m0.dir.WriteMeta(pre); err != nil {
		t.Fatal(err)
	}
	m0.mu.Lock()
	m0.record = &planner.Record{Token: "tok3", Epoch: src.Epoch + 1, Seeder: "m0", Source: planner.FromData, LastConfirmedToken: src.Token, LastConfirmedEpoch: src.Epoch}
	m0.mu.Unlock()
	if err := m0.start("m0", "", "existing", m0.initialCluster("m0", nil)); err != nil {
		t.Fatal(err)
	}
	m0.waitReady(t)
	if _, forced := m0.running(); !forced {
		t.Fatal("the recovery did not start with ForceNewCluster")
	}
	m0.stopEtcd()
	// What a death between etcd's bootstrap and completeMeta leaves.
	pre.StartedToken, pre.Stopped = "tok3", false
	if err := m0.dir.WriteMeta(pre); err != nil {
		t.Fatal(err)
	}
	if l := m0.dir.Observe(false); !l.ForceNewPending || l.Unstarted {
		t.Fatalf("observed %+v, want a started ForceNewPending", l)
	}

	m0.mu.Lock()
	m0.record = nil // Consul lost its state
	m0.mu.Unlock()
	if err := m0.start("m0", "", "existing", m0.initialCluster("m0", nil)); err != nil {
		t.Fatal(err)
	}
	m0.waitReady(t)
	after := m0.waitMeta(t, func(mt datadir.Meta) bool { return mt.ClusterID != 0 })
	c0 := k.client(m0)
	defer c0.Close()
	members := memberList(t, c0).Members
	t.Logf("m0 runs as token %s epoch %d cluster %x with %d member(s); source token %s epoch %d cluster %x",
		after.Token, after.Epoch, after.ClusterID, len(members), src.Token, src.Epoch, src.ClusterID)
	if len(members) == 1 && after.Token == src.Token && after.Epoch == src.Epoch && after.ClusterID == src.ClusterID {
		t.Errorf("m0 runs alone as the source incarnation (token %s epoch %d cluster %x), whose other voter m1 still holds data listing both: "+
			"two clusters of one token, epoch and cluster id once m1's side has a quorum", after.Token, after.Epoch, after.ClusterID)
	}
}
