package task

// Review rev12-data F3: the delta recorder's base is a snapshot of the record's lineage.

import (
	"context"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// TestRev12ReplayedIncarnationStopsContinuousBackup: with the replayed
// snapshot of a higher epoch in the store, the delta recorder's base
// (snapshot.Newest of the authentic listing) is always that snapshot, of
// another incarnation: no delta chain ever starts, and every check asks
// for another full snapshot.
func TestRev12ReplayedIncarnationStopsContinuousBackup(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return e })
	ctx := context.Background()
	f.m.opts.Snapshots.RetainCount = 24
	f.m.opts.Snapshots.DeltaEvery = time.Second
	time.Sleep(1100 * time.Millisecond)
	if _, err := snapshot.Save(ctx, snapshot.From{Endpoint: f.m.clientURL(f.m.self), SpoolDir: f.k.dir}, f.store,
		snapshot.Source{Cluster: f.k.cl.Name, ClusterID: "0ld", Epoch: 7}, f.enc, nil); err != nil {
		t.Fatal(err)
	}
	// The member runs under the confirmed record: its scheduled snapshot
	// is stamped with the record's cluster id, as the base must be.
	f.m.mu.Lock()
	f.m.record = &f.rec
	f.m.mu.Unlock()
	time.Sleep(1100 * time.Millisecond)
	if err := f.m.backups.Save(ctx, f.m.clientURL(f.m.self), "scheduled"); err != nil {
		t.Fatal(err)
	}
	f.m.backups.RetryDeltasNow()
	f.m.backups.SuperviseDeltas(ctx, true)
	defer f.m.backups.StopDeltas(true)
	if f.m.backups.Recording() == "" {
		t.Fatalf("no delta chain started after a full snapshot of this incarnation was saved (wantFullSnapshot=%v): the replayed snapshot of epoch 7 is taken as the base", f.m.backups.WantFull())
	}
}
