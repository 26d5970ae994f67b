package task

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// TestReplayedSnapshotOfAnotherIncarnationIsNotRestored: the MAC binds a
// snapshot to the cluster's name and key, not to an incarnation. A
// genuine snapshot of an earlier incarnation of the job (same name, same
// ca_kek, cluster id "0ld", epoch 7) put back in the store is newer than
// anything of the record's lineage (cluster id the record's, epoch 1).
// The observation offers no snapshot then (neither it nor the older one
// of the lineage: only an operator can tell a replay from a Consul record
// restored from before later incarnations), and a recovery told to
// restore it anyway (a decision from another listing) refuses it by name
// before anything is recorded. Before it was put back, the lineage's own
// snapshot was offered. Red before: the replayed snapshot was offered and
// restored (rev-sec11
// TestRevSec11ReplayedGenuineSnapshotOfAnotherClusterIDIsRestored). It is
// also shown to the planner as an object members refuse, so a member's
// older data is not recovered from beside it either (it may be this
// cluster's newest data: a Consul record restored from before it): the
// planner waits for an operator, naming it. Red before (branch mac7's
// merge of macsec with macfix): no snapshot offered, the planner
// recovered from the older data.
func TestReplayedSnapshotOfAnotherIncarnationIsNotRestored(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return e })
	ctx := context.Background()
	var o planner.Observation
	o.Record = &f.rec
	f.m.observeLatestSnapshot(ctx, &o, time.Now())
	if o.LatestSnapshot == nil || o.LatestSnapshot.Name != f.snap.Name {
		t.Fatalf("control: the lineage's own snapshot %s is not offered: %+v", f.snap.Name, o.LatestSnapshot)
	}

	time.Sleep(1100 * time.Millisecond)
	// Genuine (signed with the cluster's key) but of another incarnation;
	// its data: the application user "app" with root (fixture).
	old, err := snapshot.Save(ctx, snapshot.From{Endpoint: f.m.clientURL(f.m.self), SpoolDir: f.k.dir}, f.store,
		snapshot.Source{Cluster: f.k.cl.Name, ClusterID: "0ld", Epoch: 7}, f.enc, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.m.snapshotListed, f.m.latestSnapshot = time.Time{}, nil
	o = planner.Observation{Record: &f.rec}
	f.m.observeLatestSnapshot(ctx, &o, time.Now())
	t.Logf("record cluster id %x epoch %d; observed %+v", f.rec.ClusterID, f.rec.Epoch, o.LatestSnapshot)
	if o.LatestSnapshot != nil {
		t.Errorf("the observation offers %s beside a snapshot of another incarnation (%s, cluster id 0ld, epoch 7)", o.LatestSnapshot.Name, old.Name)
	}
	// It is shown as an object members refuse: it may also be this
	// cluster's newest data (a Consul record restored from before it), so
	// no recovery starts from anything older beside it.
	if rs := o.RefusedSnapshot; rs == nil || rs.Name != old.Name || rs.Revision != old.Revision {
		t.Fatalf("the snapshot of another incarnation is not shown as refused: %+v", rs)
	}
	survivor := f.snap.Revision // a member's data, older than the replayed snapshot
	obs := planner.Observation{Self: planner.Self{Name: "m0", PeerURL: "http://m0:2380"}, Running: true, SelfID: 1, HoldsLock: true, NewToken: "n",
		RecoveryGrace: 1, QuorumLostFor: 2, ClusterName: f.k.cl.Name,
		Local:  planner.Local{Cluster: f.k.cl.Name, Name: "m0", MemberID: 1, ClusterID: f.rec.ClusterID, Token: f.rec.Token, Epoch: f.rec.Epoch, Revision: survivor},
		Record: &f.rec, LatestSnapshot: o.LatestSnapshot, RefusedSnapshot: o.RefusedSnapshot}
	if d := planner.Plan(obs); d.Kind == planner.RecoverQuorum || !d.AwaitsOperator || !strings.Contains(d.Reason, old.Name) {
		t.Errorf("%s from member data at revision %d beside %s at revision %d, not a wait for an operator naming it: %s", d.Kind, survivor, old.Name, old.Revision, d.Reason)
	}

	d := planner.Decision{Kind: planner.RecoverQuorum, Name: "m0", From: planner.FromSnapshot, Snapshot: old.Name,
		Record: &planner.Record{Token: coord.NewToken(), Epoch: 8, Seeder: "m0", Source: planner.SnapshotSource(old.Name)}}
	f.m.lockForTest(t)
	err = f.m.act(ctx, o, d)
	f.m.releaseLock(ctx)
	t.Logf("act: %v", err)
	if err == nil {
		t.Fatalf("automatic recovery restored %s, a genuine snapshot of cluster id 0ld (not %x), epoch 7 above the record's %d", old.Name, f.rec.ClusterID, f.rec.Epoch)
	}
	if rec, rerr := f.k.co.Record(ctx); rerr != nil || rec.Token != f.rec.Token || rec.Epoch != f.rec.Epoch {
		t.Fatalf("the record after the refusal: %+v (%v), want %+v", rec, rerr, f.rec)
	}
}
