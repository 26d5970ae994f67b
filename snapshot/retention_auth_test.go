package snapshot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Retention (Prune) ranks and keeps by what members restore: refused full
// snapshots of a higher epoch or revision (a store writer's plants, the
// previous KEK's snapshots after the key was created again, pre-upgrade
// snapshots) never take the retained places or "the newest", so the only
// snapshot members can restore is never deleted, nor its deltas; and the
// refused ones are left to the operator, not deleted (review data11 F4).
// Before, Prune ranked the unfiltered listing.
func TestRetentionNeverDeletesTheNewestAuthenticSnapshot(t *testing.T) {
	ctx := context.Background()
	store, enc := macStore(t)
	var err error
	put := func(epoch uint64, rev int64, created time.Time) snapshot.Meta {
		t.Helper()
		m := fullMeta(epoch, rev, created)
		if m.StoredSize, err = store.Put(ctx, m.Name, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
		if err := store.PutMeta(ctx, m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	now := time.Now().UTC()
	// Two refused snapshots (no MAC) of a higher epoch, older by the clock.
	r1 := put(5, 1000, now.Add(-3*time.Hour))
	r2 := put(5, 1001, now.Add(-2*time.Hour))
	// The one snapshot that authenticates: the running cluster's newest.
	genuine := put(1, 20, now.Add(-time.Minute))
	if _, err := snapshot.Adopt(ctx, store, enc, []snapshot.Meta{genuine}); err != nil {
		t.Fatal(err)
	}
	list, _ := store.List(ctx)
	kept, _ := enc.Authentic(list)
	if full, _, _, ok := snapshot.Newest(kept); !ok || full.Name != genuine.Name {
		t.Fatalf("members' newest %v, want %s", full.Name, genuine.Name)
	}
	// A delta of the genuine snapshot, and an older genuine snapshot
	// retention (retain_count 1) does remove.
	older := put(1, 10, now.Add(-2*time.Minute))
	d := snapshot.Meta{Cluster: "c", ClusterID: "abc", Epoch: 1, Kind: snapshot.KindDelta, Base: genuine.Name, FirstRevision: 21, Revision: 30, Events: 10,
		Created: now, Codec: snapshot.Codec, Size: 1, SHA256: strings.Repeat("0", 64)}
	d.Name = snapshot.DeltaName("c", 1, d.Revision, d.Created, false)
	if d.StoredSize, err = store.Put(ctx, d.Name, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := store.PutMeta(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Adopt(ctx, store, enc, []snapshot.Meta{older, d}); err != nil {
		t.Fatal(err)
	}
	removed, err := snapshot.Prune(ctx, store, enc, snapshot.Lineage{}, 1, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range removed {
		switch n {
		case genuine.Name, d.Name:
			t.Fatalf("retention (retain_count 1) removed %s, the newest snapshot members can restore (or its delta), and kept the refused ones: removed %v", n, removed)
		case r1.Name, r2.Name:
			t.Fatalf("retention removed %s, which members refuse: it is the operator's to restore or delete; removed %v", n, removed)
		}
	}
	if len(removed) != 1 || removed[0] != older.Name {
		t.Fatalf("retention removed %v, want the older authentic snapshot %s alone", removed, older.Name)
	}
}
