package snapshot_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// putAdopted stores m (content "x") with its metadata signed under enc's
// key: a genuine object.
func putAdopted(t *testing.T, store snapshot.Store, enc snapshot.Encryption, m snapshot.Meta) snapshot.Meta {
	t.Helper()
	ctx := context.Background()
	if _, err := store.Put(ctx, m.Name, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := store.PutMeta(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Adopt(ctx, store, enc, []snapshot.Meta{m}); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCreatedShiftedBy2To64FailsTheMAC (rev12-sec F3): a store writer
// moves a genuine object's creation time by 2^64 ns (about 584 years),
// through the store's own JSON. The MAC covered Created.UnixNano(), which
// wraps modulo 2^64 outside 1678-2262, so the edited object verified, and
// the recovery's revision bump (which reads the snapshot's age from
// Created) fell to its floor. Now seconds and nanoseconds are MACed
// apart: the edit is forged.
func TestCreatedShiftedBy2To64FailsTheMAC(t *testing.T) {
	ctx := context.Background()
	store, enc := macStore(t)
	genuine := putAdopted(t, store, enc, fullMeta(1, 100, time.Now().UTC().Add(-6*time.Hour)))
	list, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	genuine = list[0]
	if err := enc.Authenticated(genuine); err != nil {
		t.Fatal(err)
	}
	edited := genuine
	edited.Created = time.Unix(genuine.Created.Unix()+18446744073, int64(genuine.Created.Nanosecond())+709551616).UTC()
	if err := store.PutMeta(ctx, edited); err != nil {
		t.Fatal(err)
	}
	list, _ = store.List(ctx)
	back := list[0]
	if back.Created.Equal(genuine.Created) {
		t.Fatal("the edit did not survive the store's JSON")
	}
	if err := enc.Authenticated(back); !errors.Is(err, snapshot.ErrForged) {
		t.Fatalf("Created moved by 2^64 ns (%s to %s): Authenticated = %v, want ErrForged (revision bump genuine %d, edited %d)",
			genuine.Created, back.Created, err, snapshot.RevisionBump(genuine, nil, time.Now()), snapshot.RevisionBump(back, nil, time.Now()))
	}
}

// TestRetentionKeepsTheLineagesNewestBesideAPutBackIncarnation (rev12-sec
// F2): a store writer puts back a genuine snapshot of an earlier
// incarnation of the job (same name and KEK, cluster id "old", a higher
// epoch), which snapshot.Later ranks first. Members' retention
// (retain_count 1) deleted the running incarnation's only snapshot, and
// then each new one. Retention now ranks only the snapshots of the
// record's lineage, and leaves the foreign one (and its deltas) to the
// operator: never deleted, never counted.
func TestRetentionKeepsTheLineagesNewestBesideAPutBackIncarnation(t *testing.T) {
	ctx := context.Background()
	store, enc := macStore(t)
	now := time.Now().UTC()
	foreign := fullMeta(7, 5000, now.Add(-365*24*time.Hour))
	foreign.ClusterID = "01d"
	foreign = putAdopted(t, store, enc, foreign)
	foreignDelta := snapshot.Meta{Cluster: "c", ClusterID: "01d", Epoch: 7, Kind: snapshot.KindDelta, Base: foreign.Name, FirstRevision: 5001, Revision: 5010, Events: 10,
		Created: now.Add(-364 * 24 * time.Hour), Codec: snapshot.Codec, Size: 1, SHA256: strings.Repeat("0", 64)}
	foreignDelta.Name = snapshot.DeltaName("c", 7, foreignDelta.Revision, foreignDelta.Created, false)
	foreignDelta = putAdopted(t, store, enc, foreignDelta)
	older := putAdopted(t, store, enc, fullMeta(2, 200, now.Add(-2*time.Minute)))
	mine := putAdopted(t, store, enc, fullMeta(2, 300, now.Add(-time.Minute)))
	lineage := snapshot.Lineage{ClusterID: 0xabc, Epoch: 2}
	removed, err := snapshot.Prune(ctx, store, enc, lineage, 1, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range removed {
		switch n {
		case mine.Name:
			t.Errorf("retention (retain_count 1) removed %s, the running incarnation's newest, keeping the put-back %s: removed %v", mine.Name, foreign.Name, removed)
		case foreign.Name, foreignDelta.Name:
			t.Errorf("retention removed %s, another incarnation's object: it is the operator's to delete (removed %v)", n, removed)
		}
	}
	if len(removed) != 1 || removed[0] != older.Name {
		t.Errorf("removed %v, want only %s (beyond retain_count 1 of the lineage)", removed, older.Name)
	}
}
