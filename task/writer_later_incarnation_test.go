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
)

// Sim seeds 1004733, 1006058, 1009859 (two seeds of one epoch, 100 M
// run): cluster B was restored from the store's newest snapshot, of
// cluster A, on the member that took it (or recovered after the summary
// was written); a restore starts a new cluster id, and B has not written
// a snapshot of its own yet. Nomad collected B's member while it serves,
// and Consul lost its state. An empty replacement probed the snapshot's
// taker for A's cluster id only: the member there answered for B's, so
// it named nothing and restored A's snapshot as B's epoch, beside B. The
// store's writers (and the summary's members) now count at any cluster
// id.
func TestAStoreWriterServingALaterIncarnationHoldsARestoreBack(t *testing.T) {
	ctx := context.Background()
	bURL, bID, _ := plainVoter(t) // cluster B's collected voter, serving with a leader
	k := newKit(t, "m3")
	store, err := file.New(filepath.Join(k.dir, "snapshots"), k.cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	aID := bID ^ 0x5a5a // cluster A: the incarnation B was restored from
	at := time.Now().Add(-time.Hour)
	full := snapshot.Meta{Name: snapshot.ObjectName("kit", 1, 100, at, false), Cluster: "kit", ClusterID: fmt.Sprintf("%x", aID), Epoch: 1, Revision: 100, Endpoint: bURL, Created: at}
	if _, err := store.Put(ctx, full.Name, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := store.PutMeta(ctx, full); err != nil {
		t.Fatal(err)
	}
	m3 := k.memberWith("m3", nil, &Snapshots{Store: store})
	m3.opts.Cluster.RecoveryGrace = time.Minute
	now := time.Now()
	// Consul lost its state: no record, no summary. m3 is empty; its peer
	// (another fresh replacement) holds no data.
	o := planner.Observation{ClusterName: "kit", Self: planner.Self{Name: "m3"}, Local: planner.Local{Empty: true}, HoldsLock: true, NewToken: "n",
		Instances: []planner.Instance{{Name: "m3"}, {Name: "m4"}}, Peers: []planner.PeerStatus{{Name: "m4"}},
		RecoveryGrace: time.Minute, QuorumLostFor: time.Hour, RecordMissingFor: 2 * time.Minute}
	m3.observeLatestSnapshot(ctx, &o, now)
	m3.observeKnownHealthy(ctx, &o, now)
	d := planner.Plan(o)
	if len(o.KnownHealthy) != 1 || d.Kind != planner.Wait {
		t.Fatalf("the snapshot's taker serves cluster %x (the snapshot is of %x): known healthy %q, unlisted %q; %s (%s), want it named and a wait", bID, aID, o.KnownHealthy, o.UnlistedVoters, d.Kind, d.Reason)
	}
	// Asked again for the id it answered with, it stays named.
	o.KnownHealthy, o.UnlistedVoters = nil, nil
	m3.observeKnownHealthy(ctx, &o, now.Add(time.Second))
	if len(o.KnownHealthy) != 1 {
		t.Fatalf("second probe: known healthy %q, want the taker still named", o.KnownHealthy)
	}
}
