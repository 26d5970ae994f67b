package datadir_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

// runEtcd starts a one-member etcd on dir (the data it holds, if any),
// with ForceNewCluster if force, writes n keys through a client (each
// acknowledged) and closes it: what a process that died right after does.
func runEtcd(t *testing.T, dir string, force bool, prefix string, n int) (memberID, clusterID uint64) {
	t.Helper()
	e, cli := launchEtcd(t, dir, "m0", force)
	defer e.Close()
	for i := 0; i < n; i++ {
		if _, err := cli.Put(context.Background(), fmt.Sprintf("%s-%d", prefix, i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	return uint64(e.Server.MemberID()), uint64(e.Server.Cluster().ID())
}

// A ForceNewCluster start that became ready is not "pending" (review
// rv14-data, TestRV14StartedForceNewIsNotReportedPending, RV14-3): before,
// ForceNewPending was meta.ForceNew && meta.ClusterID == 0, and
// completeMeta writes the cluster id only after the server is ready, in a
// goroutine (afterReady; retried each loop when the write fails). A seeder
// whose ForceNewCluster start became ready and acknowledged writes of
// epoch 3, and that died (or whose metadata write kept failing) before
// completeMeta, reports ForceNewPending: 'recover -keep-running'
// (neverStarted) then records the old line over it and the seeder sets
// its epoch-3 writes aside as "a prefix of tok2". Since review
// rev14c-data (R3) such data is fenced again (ForceNewPending: ForceNew
// and no cluster id, whatever StartedToken says), but never Unstarted:
// 'recover -keep-running' sets it aside only with -accept-data-loss.
// (Was TestForceNewStartThatRanIsNotPending.)
func TestForceNewStartThatRanIsNotUnstarted(t *testing.T) {
	d := datadir.Dir{Root: t.TempDir()}
	mid, cid := runEtcd(t, d.EtcdDir(), false, "tok2", 20)
	if err := d.WriteMeta(datadir.Meta{Cluster: "c", Name: "m0", Token: "tok2", Epoch: 2, MemberID: mid, ClusterID: cid, Stopped: true}); err != nil {
		t.Fatal(err)
	}
	before := d.Observe(false).Revision
	// recover(): the record names epoch 3 (from data); the metadata is
	// rewritten, then start() marks the data started (MarkStarted, which
	// also clears Stopped) before etcd starts.
	meta, err := d.ReadMeta()
	if err != nil {
		t.Fatal(err)
	}
	meta.Token, meta.Epoch, meta.ForceNew, meta.ClusterID = "tok3", 3, true, 0
	if err := d.WriteMeta(meta); err != nil {
		t.Fatal(err)
	}
	if l := d.Observe(false); !l.ForceNewPending {
		t.Fatalf("rewritten for the recovery, before any start: ForceNewPending %v, want true", l.ForceNewPending)
	}
	if err := d.MarkStarted("host-a"); err != nil {
		t.Fatal(err)
	}
	// The ForceNewCluster start becomes ready and acknowledges 5 writes
	// of epoch 3; the process dies before completeMeta.
	runEtcd(t, d.EtcdDir(), true, "epoch3-acked", 5)
	l := d.Observe(false)
	t.Logf("after an acknowledged ForceNewCluster start: revision %d (was %d), ForceNewPending %v", l.Revision, before, l.ForceNewPending)

	// What 'recover -keep-running' makes of it beside tok2's quorum.
	rec := &planner.Record{Token: "tok3", Epoch: 3, Seeder: "m0", Source: planner.FromData, LastConfirmedToken: "tok2", LastConfirmedEpoch: 2}
	voter := func(name string) planner.PeerStatus {
		return planner.PeerStatus{Name: name, Token: "tok2", Epoch: 2, ClusterID: cid, Running: true, Healthy: true, Revision: l.Revision + 100}
	}
	v := planner.OperatorView{Record: rec, NewToken: "tok4", Answered: []planner.PeerStatus{
		{Name: "m0", Token: l.Token, Epoch: l.Epoch, MemberID: mid, Revision: l.Revision, ForceNewPending: l.ForceNewPending, Unstarted: l.Unstarted}, voter("m1"), voter("m2")}}
	kept, kerr := planner.OperatorKeepRunning(v)
	t.Logf("recover -keep-running: %+v, error %v", kept, kerr)
	if l.Unstarted {
		t.Errorf("data whose ForceNewCluster start became ready and acknowledged writes (revision %d > %d) reports Unstarted (never started)", l.Revision, before)
	}
	if !l.ForceNewPending {
		t.Errorf("data whose ForceNewCluster start never completed (no cluster id) is not fenced (ForceNewPending false)")
	}
	if kerr == nil {
		t.Errorf("recover -keep-running records tok2 over m0's epoch-3 data that started and acknowledged writes %d..%d: the seeder then sets them aside", before+1, l.Revision)
	} else if !strings.Contains(kerr.Error(), "-accept-data-loss") || !strings.Contains(kerr.Error(), "m0") {
		t.Errorf("the refusal names neither the member nor -accept-data-loss: %v", kerr)
	}
}
