package task

// Objects of the store members refuse (no MAC, or the previous KEK's) are
// data that exists and may not be taken: the planner is shown the newest
// (Observation.RefusedSnapshot) and never seeds an empty cluster or
// recovers from anything older beside it (review data11 F1, F3).

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord/local"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// After an upgrade the store holds only snapshots without a MAC (or, after
// the KEK was created again, snapshots whose MAC is under the old key).
// Consul loses its state and every member its data: the cluster's data
// lives only in the store. The member must not seed a new empty cluster
// (invariant 8: "with no data anywhere, the newest snapshot is restored
// rather than an empty seed").
func TestNoEmptySeedBesideRefusedSnapshots(t *testing.T) {
	for _, tc := range []struct {
		name     string
		saveWith func(snapshot.Encryption) snapshot.Encryption
	}{
		{"pre-upgrade snapshot without a MAC", func(snapshot.Encryption) snapshot.Encryption { return snapshot.Encryption{} }},
		{"snapshot signed under the previous KEK", func(snapshot.Encryption) snapshot.Encryption {
			old, err := snapshot.DeriveMACKey(bytes.Repeat([]byte{1}, 32), "kit")
			if err != nil {
				t.Fatal(err)
			}
			return snapshot.Encryption{MACKey: old}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newAuthFixture(t, tc.saveWith)
			ctx := context.Background()
			// Every copy of the data is lost...
			f.m.halt()
			if err := os.RemoveAll(f.m.dir.Root); err != nil {
				t.Fatal(err)
			}
			// ...and Consul lost its state (a fresh coordinator).
			co, err := local.New(filepath.Join(f.k.dir, "coord-after-loss"))
			if err != nil {
				t.Fatal(err)
			}
			m := f.k.memberWith("m0", co, &backup.Snapshots{Store: f.store, Encryption: f.enc})
			m.lockForTest(t)
			defer m.releaseLock(ctx)
			m.snapshotListed = time.Time{}
			o, err := m.observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			d := planner.Plan(o)
			if d.Kind == planner.Seed || d.Kind == planner.RecoverQuorum {
				t.Fatalf("%s (%s) while the store holds the cluster's snapshot %s (epoch %d, revision %d); observed LatestSnapshot=%v",
					d.Kind, d.Reason, f.snap.Name, f.snap.Epoch, f.snap.Revision, o.LatestSnapshot)
			}
			if !d.AwaitsOperator || !strings.Contains(d.Reason, "recover -from snapshot:"+f.snap.Name+" -accept-unauthenticated") {
				t.Fatalf("want a wait for an operator naming the recover command for %s, got %s: %s", f.snap.Name, d.Kind, d.Reason)
			}
		})
	}
}

// A quorum is lost while the store holds genuine but unauthenticated
// segments (an old-version leader during the rolling upgrade, or a member
// whose KEK came from the Nomad variable and so has no MAC key) beyond the
// surviving member's data. Before the change the planner compared that
// chain end and restored it; now it is shown no snapshot and recovers from
// the older data: the writes between are left behind (and retention later
// removes the only copy, as the new epoch's snapshots rank above them).
func TestNoRecoveryFromOlderDataBesideNewerRefusedSegments(t *testing.T) {
	f := newAuthFixture(t, func(snapshot.Encryption) snapshot.Encryption { return snapshot.Encryption{} })
	ctx := context.Background()
	seg := storeDelta(t, f.store, f.snap, f.snap.Revision+1, 50) // no MAC: recorded by a member without the key
	var o planner.Observation
	f.m.observeLatestSnapshot(ctx, &o, time.Now())

	all, err := f.store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unfiltered, _ := newestSnapshot(all, nil)
	if unfiltered == nil || unfiltered.Revision != seg.Revision {
		t.Fatalf("store chain end %+v, want %d", unfiltered, seg.Revision)
	}
	survivor := f.snap.Revision + 5 // the survivor lagged behind the recorder
	obs := planner.Observation{Self: planner.Self{Name: "m0", PeerURL: "http://m0:2380"}, Running: true, SelfID: 1, HoldsLock: true, NewToken: "n",
		RecoveryGrace: 1, QuorumLostFor: 2, ClusterName: "kit",
		Local:          planner.Local{Cluster: "kit", Name: "m0", MemberID: 1, ClusterID: 0xc1, Token: "tokA", Epoch: 1, Revision: survivor},
		Record:         &planner.Record{ClusterID: 0xc1, Token: "tokA", Epoch: 1, Seeder: "m0"},
		Peers:          []planner.PeerStatus{{Name: "m1", Token: "tokA", Epoch: 1, Revision: survivor - 1}},
		LatestSnapshot: o.LatestSnapshot, RefusedSnapshot: o.RefusedSnapshot}
	d := planner.Plan(obs)
	if d.Kind == planner.RecoverQuorum || !d.AwaitsOperator {
		t.Fatalf("%s, not a wait for an operator, from member data at revision %d while the store holds this incarnation's writes to revision %d (refused: %v): %s",
			d.Kind, survivor, seg.Revision, o.RefusedSnapshot, d.Reason)
	}
}
