package task

// The attacker can write the snapshot store and knows what the Nomad job
// holds in the clear; not the KEK the snapshot MAC key is derived from.

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// authFixture is a one-member cluster m whose snapshots are authenticated
// (enc: a MAC key, no age), with one genuine snapshot in store.
type authFixture struct {
	chainFixture
	enc snapshot.Encryption
}

func newAuthFixture(t *testing.T, saveWith func(snapshot.Encryption) snapshot.Encryption) authFixture {
	t.Helper()
	key, err := snapshot.DeriveMACKey(bytes.Repeat([]byte{9}, 32), "c")
	if err != nil {
		t.Fatal(err)
	}
	f := authFixture{chainFixture: chainFixture{k: newKit(t, "m0")}, enc: snapshot.Encryption{MACKey: key}}
	f.dir = filepath.Join(f.k.dir, "snapshots")
	if f.store, err = file.New(f.dir, f.k.cl.Name); err != nil {
		t.Fatal(err)
	}
	f.m = f.k.memberWith("m0", f.k.co, &backup.Snapshots{Store: f.store, Encryption: f.enc})
	cli := f.k.seedForTest(f.m)
	put(t, cli, "saved", "genuine")
	f.rec, _ = f.k.co.Record(context.Background())
	f.snap = f.save(t, saveWith(f.enc))
	// What the attacker's snapshot holds: an application user made root.
	put(t, cli, "evil", "the attacker's")
	for _, err := range []error{
		second(cli.RoleAdd(context.Background(), "root")),
		second(cli.UserAdd(context.Background(), "app", "attacker-knows-this")),
		second(cli.UserGrantRole(context.Background(), "app", "root")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func second[T any](_ T, err error) error { return err }

// save saves a snapshot of the running member with enc.
func (f authFixture) save(t *testing.T, enc snapshot.Encryption) snapshot.Meta {
	t.Helper()
	time.Sleep(1100 * time.Millisecond) // object names carry the second
	m, err := snapshot.Save(context.Background(), snapshot.From{Endpoint: f.m.clientURL(f.m.self), SpoolDir: f.k.dir}, f.store,
		snapshot.Source{Cluster: f.k.cl.Name, ClusterID: strconv.FormatUint(f.rec.ClusterID, 16), Epoch: 1}, enc, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAutomaticRecoveryRefusesForgedSnapshotsAndDeltas: a snapshot the
// attacker wrote without the key (newer and at a higher revision than the
// genuine one, holding a key of theirs) is never what the observation
// offers the planner, nor is a delta appended to the genuine snapshot's
// chain: the chain end stays the genuine one. A recovery told to restore
// the forged snapshot anyway (a decision from a listing taken before, an
// operator's record) refuses it by name before anything is recorded or
// set aside.
func TestAutomaticRecoveryRefusesForgedSnapshotsAndDeltas(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return e })
	ctx := context.Background()
	forged := f.save(t, snapshot.Encryption{}) // no MAC: the attacker has no key
	if forged.Revision <= f.snap.Revision {
		t.Fatalf("forged revision %d not above the genuine %d: the test proves nothing", forged.Revision, f.snap.Revision)
	}
	forgedDelta := storeDelta(t, f.store, f.snap, f.snap.Revision+1, 10)

	var o planner.Observation
	f.m.observeLatestSnapshot(ctx, &o, time.Now())
	if o.LatestSnapshot == nil || o.LatestSnapshot.Name != f.snap.Name || o.LatestSnapshot.Revision != f.snap.Revision {
		t.Fatalf("observed %+v, want the genuine %s at revision %d (not the forged %s, nor a chain through %s)", o.LatestSnapshot, f.snap.Name, f.snap.Revision, forged.Name, forgedDelta.Name)
	}

	before, _ := f.m.dir.ReadMeta()
	d := planner.Decision{Kind: planner.RecoverQuorum, Name: "m0", From: planner.FromSnapshot, Snapshot: forged.Name,
		Record: &planner.Record{Token: coord.NewToken(), Epoch: 2, Seeder: "m0", Source: planner.SnapshotSource(forged.Name)}}
	f.m.lockForTest(t)
	err := f.m.act(ctx, o, d)
	f.m.releaseLock(ctx)
	if !errors.Is(err, snapshot.ErrUnauthenticated) {
		t.Fatalf("recovery from the forged snapshot: %v, want it refused as unauthenticated", err)
	}
	if got, err := f.k.co.Record(ctx); err != nil || got.Epoch != 1 || got.Token != f.rec.Token {
		t.Fatalf("record after the refused recovery: %+v (%v), want epoch 1 untouched", got, err)
	}
	if aside := f.m.asideEntries(t); len(aside) != 0 {
		t.Fatalf("data set aside by a refused recovery: %v", aside)
	}
	if meta, err := f.m.dir.ReadMeta(); err != nil || meta != before {
		t.Fatalf("metadata after the refused recovery: %+v (%v), want %+v", meta, err, before)
	}

	// The recovery the planner chose from the authentic listing installs
	// the genuine snapshot without the forged delta.
	d.Snapshot, d.Record.Source = f.snap.Name, planner.SnapshotSource(f.snap.Name)
	f.m.lockForTest(t)
	err = f.m.act(ctx, o, d)
	f.m.releaseLock(ctx)
	if err != nil {
		t.Fatalf("recovery from the genuine snapshot: %v", err)
	}
	if got, err := f.k.co.Record(ctx); err != nil || got.Epoch != 2 {
		t.Fatalf("record after the recovery: %+v (%v), want epoch 2", got, err)
	}
}

// TestAutomaticRecoveryNeverTakesAnUnauthenticatedSnapshot: after an
// upgrade the store may hold only snapshots written before they were
// authenticated. A member never restores one on its own (anyone who can
// write the store could have written it): the observation offers none.
// The way out is the operator's: 'recover -from snapshot:NAME
// -accept-unauthenticated' verifies it and signs its metadata
// (snapshot.Adopt), and then the member takes it.
func TestAutomaticRecoveryNeverTakesAnUnauthenticatedSnapshot(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return snapshot.Encryption{} })
	ctx := context.Background()
	var o planner.Observation
	f.m.observeLatestSnapshot(ctx, &o, time.Now())
	if o.LatestSnapshot != nil {
		t.Fatalf("observed %+v: an unauthenticated snapshot offered to the planner", o.LatestSnapshot)
	}

	accept := f.enc
	accept.AcceptUnauthenticated = true
	verified, err := snapshot.Verify(ctx, f.store, f.snap.Name, accept, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Adopt(ctx, f.store, f.enc, []snapshot.Meta{verified}); err != nil {
		t.Fatal(err)
	}
	f.m.snapshotListed = time.Time{}
	f.m.observeLatestSnapshot(ctx, &o, time.Now())
	if o.LatestSnapshot == nil || o.LatestSnapshot.Name != f.snap.Name {
		t.Fatalf("observed %+v after the operator accepted %s", o.LatestSnapshot, f.snap.Name)
	}
}
