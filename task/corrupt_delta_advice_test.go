package task

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// a delta whose metadata is corrupt is listed by its name, which
// does not encode its base: the refused object has no Base, and the
// operator is told to restore the delta itself as a snapshot
// ('recover -from snapshot:<delta> -accept-unauthenticated'), which
// chooseRestore refuses ("no full snapshot"), and that nothing restores.
// The advice is to put its metadata back or delete it, or to recover
// from a member with -accept-data-loss.
func TestCorruptDeltaAdviceNamesNoRestore(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return e })
	ctx := context.Background()
	seg := storeDelta(t, f.store, f.snap, f.snap.Revision+1, 50)
	if _, err := snapshot.Adopt(ctx, f.store, f.enc, []snapshot.Meta{seg}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, seg.Name+".meta.json"), []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
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
	d := planner.Plan(obs)
	t.Logf("refused %+v\n%s: %s", o.RefusedSnapshot, d.Kind, d.Reason)
	if strings.Contains(d.Reason, "recover -from snapshot:"+seg.Name) {
		t.Fatalf("the operator is told to restore delta %s (corrupt metadata) as a snapshot; nothing restores it", seg.Name)
	}
	if !strings.Contains(d.Reason, "put its metadata back") || !strings.Contains(d.Reason, "-accept-data-loss") {
		t.Fatalf("advice beside a delta with corrupt metadata: %s; want: put its metadata back, delete it, or recover -from MEMBER -accept-data-loss", d.Reason)
	}
}
