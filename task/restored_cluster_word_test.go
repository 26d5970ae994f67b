package task

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
	"github.com/etcd-nomad/etcd-nomad/status"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// Review rev14b (data), F1, the D4 narrowing (the reviewer's
// TestReviewPeersWordForTheRestoredClusterIsDroppedBesideAnOlderStoreWriter):
// cluster B (epoch 2) was restored from the store's snapshot of cluster A
// (epoch 1); a restore starts a new
// cluster id, and B has not written a snapshot of its own yet (or cannot
// reach the store). Nomad collected B's voters while they serve; Consul
// lost its state (B's leader cannot reach it to rewrite the summary). A
// replacement that read the record and summary before Consul lost them
// found B's voter and names it in its /status (honestly). A fresh
// replacement that started after the loss knows one cluster id: A's, from
// the store's writers. It dropped the peer's word for B (an id it "does
// not know") and restored snapshot A beside B: two clusters, older data
// while B's acknowledged writes exist. The word is now asked and waited
// on; only its age is not refreshed by this member's own answers.
func TestAPeersWordForARestoredClusterIsTakenBesideAnOlderStoreWriter(t *testing.T) {
	ctx := context.Background()
	bURL, bID, _ := plainVoter(t) // cluster B's collected voter, serving with a leader
	k := newKit(t, "m3")
	store, err := file.New(filepath.Join(k.dir, "snapshots"), k.cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	aID := bID ^ 0x5a5a // cluster A: the incarnation B was restored from
	at := time.Now().Add(-time.Hour)
	full := snapshot.Meta{Name: snapshot.ObjectName("kit", 1, 100, at, false), Cluster: "kit", ClusterID: fmt.Sprintf("%x", aID), Epoch: 1, Revision: 100, Endpoint: "http://127.0.0.1:1", Created: at}
	if _, err := store.Put(ctx, full.Name, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := store.PutMeta(ctx, full); err != nil {
		t.Fatal(err)
	}
	m3 := k.memberWith("m3", nil, &backup.Snapshots{Store: store})
	m3.opts.Cluster.RecoveryGrace = time.Minute
	now := time.Now()
	// The peer's honest word: B's voter, found 2 s ago, with a leader.
	m3.takeFoundVoters([]status.FoundVoter{{Name: "b0", ClientURLs: []string{bURL}, ClusterIDs: []uint64{bID}, Leader: true, AgoMillis: 2000}}, now)
	// Consul lost its state: no record, no summary. m3 is empty; the peer
	// (another fresh replacement) holds no data.
	o := planner.Observation{ClusterName: "kit", Self: planner.Self{Name: "m3"}, Local: planner.Local{Empty: true}, HoldsLock: true, NewToken: "n",
		Instances: []planner.Instance{{Name: "m3"}, {Name: "m4"}}, Peers: []planner.PeerStatus{{Name: "m4"}},
		RecoveryGrace: time.Minute, QuorumLostFor: time.Hour, RecordMissingFor: 2 * time.Minute}
	m3.observeLatestSnapshot(ctx, &o, now)
	m3.observeKnownHealthy(ctx, &o, now)
	d := planner.Plan(o)
	t.Logf("known healthy %q, unlisted %q, latest %+v; decision %s %+v (%s)", o.KnownHealthy, o.UnlistedVoters, o.LatestSnapshot, d.Kind, d.Record, d.Reason)
	if len(o.KnownHealthy)+len(o.UnlistedVoters) == 0 {
		t.Errorf("the peer's word for B's serving voter (cluster %x) was dropped: m3 knows only the store writer's cluster %x", bID, aID)
	}
	if d.Kind != planner.Wait {
		t.Errorf("beside B's serving voter: %s (%s), want a wait", d.Kind, d.Reason)
	}
}
