package task

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Third security review (rev13b): a store writer who overwrites the metadata of the genuine
// newest delta segment with a forged MAC is refused, and the members wait
// beside it (TestNoRecoveryFromOlderDataBesideNewerRefusedSegments). The
// same writer overwriting it with undecodable bytes instead gets it
// skipped as if deleted (file store since session 13; S3 before): no
// refused object, and the members recover automatically from a survivor
// that lags the store's chain, losing the segment's acknowledged writes.
// A write (no delete) is enough: S3 PutObject-only, or a file writable
// in a directory that is not.
func TestCorruptMetadataOfTheNewestSegmentIsNotHidden(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return e })
	ctx := context.Background()
	seg := storeDelta(t, f.store, f.snap, f.snap.Revision+1, 50)
	if _, err := snapshot.Adopt(ctx, f.store, f.enc, []snapshot.Meta{seg}); err != nil {
		t.Fatal(err)
	}
	plan := func() (planner.Decision, planner.Observation) {
		f.m.snapshotListed = time.Time{}
		var o planner.Observation
		f.m.observeLatestSnapshot(ctx, &o, time.Now())
		survivor := f.snap.Revision + 5
		obs := planner.Observation{Self: planner.Self{Name: "m0", PeerURL: "http://m0:2380"}, Running: true, SelfID: 1, HoldsLock: true, NewToken: "n",
			RecoveryGrace: 1, QuorumLostFor: 2, ClusterName: "kit",
			Local:          planner.Local{Cluster: "kit", Name: "m0", MemberID: 1, ClusterID: 0xc1, Token: "tokA", Epoch: 1, Revision: survivor},
			Record:         &planner.Record{ClusterID: 0xc1, Token: "tokA", Epoch: 1, Seeder: "m0"},
			Peers:          []planner.PeerStatus{{Name: "m1", Token: "tokA", Epoch: 1, Revision: survivor - 1}},
			LatestSnapshot: o.LatestSnapshot, RefusedSnapshot: o.RefusedSnapshot}
		return planner.Plan(obs), o
	}
	d, o := plan()
	t.Logf("genuine segment: %s latest %+v", d.Kind, o.LatestSnapshot)
	if o.LatestSnapshot == nil || o.LatestSnapshot.Revision != seg.Revision {
		t.Fatalf("fixture: the genuine chain should reach %d: %+v", seg.Revision, o.LatestSnapshot)
	}
	// The writer overwrites the segment's metadata with garbage.
	if err := os.WriteFile(filepath.Join(f.dir, seg.Name+".meta.json"), []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, o = plan()
	t.Logf("corrupt metadata: %s (awaits operator %v) latest %+v refused %+v: %s", d.Kind, d.AwaitsOperator, o.LatestSnapshot, o.RefusedSnapshot, d.Reason)
	if d.Kind == planner.RecoverQuorum || !d.AwaitsOperator {
		t.Fatalf("%s from member data at revision %d while the store holds the genuine segment to revision %d whose metadata a writer made undecodable: hidden, not refused",
			d.Kind, f.snap.Revision+5, seg.Revision)
	}
}
