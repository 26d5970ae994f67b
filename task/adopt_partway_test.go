package task

// Review rev12-data F1: an operator's Adopt stopped between the deltas and their snapshot.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// failingMetaStore fails PutMeta for the object named failAt and every
// PutMeta after it: the store went away part way through an operator's
// Adopt (its undo cannot put anything back either).
type failingMetaStore struct {
	snapshot.Store
	failAt string
	down   bool
}

func (s *failingMetaStore) PutMeta(ctx context.Context, m snapshot.Meta) error {
	if s.down || m.Name == s.failAt {
		s.down = true
		return errors.New("store unavailable")
	}
	return s.Store.PutMeta(ctx, m)
}

// TestRev12AdoptStoppedPartWayLetsMembersRecoverBelowTheSignedDeltas: an
// operator recovers from a pre-upgrade snapshot U with its deltas (to
// revision end). Adopt signs the deltas first, then the snapshot; the
// store goes away (or the operator's process is killed) between the two.
// Adopt's doc says the snapshot "is still refused (members wait for an
// operator beside it)". But now the deltas authenticate and their base
// does not: they are in no chain the member sees (orphans) and not
// refused either, so Observation.RefusedSnapshot is U at U's own revision.
// A survivor whose data is above U's revision but below the deltas' end
// is recovered from: the deltas' writes are set aside.
func TestRev12AdoptStoppedPartWayLetsMembersRecoverBelowTheSignedDeltas(t *testing.T) {
	f := newAuthFixture(t, func(snapshot.Encryption) snapshot.Encryption { return snapshot.Encryption{} })
	ctx := context.Background()
	seg := storeDelta(t, f.store, f.snap, f.snap.Revision+1, 50) // no MAC: pre-upgrade segment
	survivor := f.snap.Revision + 5

	plan := func() planner.Decision {
		var o planner.Observation
		f.m.snapshotListed, f.m.latestSnapshot, f.m.refusedSnapshot = time.Time{}, nil, nil
		f.m.observeLatestSnapshot(ctx, &o, time.Now())
		obs := planner.Observation{Self: planner.Self{Name: "m0", PeerURL: "http://m0:2380"}, Running: true, SelfID: 1, HoldsLock: true, NewToken: "n",
			RecoveryGrace: 1, QuorumLostFor: 2, ClusterName: "kit",
			Local:          planner.Local{Cluster: "kit", Name: "m0", MemberID: 1, ClusterID: 0xc1, Token: "tokA", Epoch: 1, Revision: survivor},
			Record:         &planner.Record{ClusterID: 0xc1, Token: "tokA", Epoch: 1, Seeder: "m0"},
			Peers:          []planner.PeerStatus{{Name: "m1", Token: "tokA", Epoch: 1, Revision: survivor - 1}},
			LatestSnapshot: o.LatestSnapshot, RefusedSnapshot: o.RefusedSnapshot}
		d := planner.Plan(obs)
		t.Logf("refused %+v latest %+v -> %s: %s", o.RefusedSnapshot, o.LatestSnapshot, d.Kind, d.Reason)
		return d
	}
	if d := plan(); d.Kind == planner.RecoverQuorum || !d.AwaitsOperator {
		t.Fatalf("control: %s before the adoption", d.Kind)
	}
	st := &failingMetaStore{Store: f.store, failAt: f.snap.Name}
	_, err := snapshot.Adopt(ctx, st, f.enc, []snapshot.Meta{f.snap, seg})
	t.Logf("adopt: %v", err)
	if err == nil {
		t.Fatal("adopt did not fail")
	}
	if d := plan(); d.Kind == planner.RecoverQuorum || !d.AwaitsOperator {
		t.Fatalf("after an adoption stopped part way: %s from member data at revision %d while the store holds signed deltas of %s to revision %d: %s",
			d.Kind, survivor, f.snap.Name, seg.Revision, d.Reason)
	}
}
