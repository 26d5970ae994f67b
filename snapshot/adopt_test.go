package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// failingMetaStore fails PutMeta after ok successful calls (a store error
// or the operator's ^C mid-Adopt).
type failingMetaStore struct {
	snapshot.Store
	ok int
}

func (s *failingMetaStore) PutMeta(ctx context.Context, m snapshot.Meta) error {
	if s.ok == 0 {
		return context.Canceled
	}
	s.ok--
	return s.Store.PutMeta(ctx, m)
}

// Adopt signs the deltas first and the snapshot last, and puts back what
// it signed when it stops part way: a failed adoption never leaves an
// AUTHENTIC snapshot whose authentic chain ends at the first unsigned
// segment while the unsigned rest holds the later writes (the members'
// automatic paths would restore that short chain). Before, Adopt signed
// the snapshot first and stopped at the first failure (review data11 F6).
func TestAdoptIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	fs, enc := macStore(t)
	now := time.Now().UTC().Add(-time.Hour)
	full := fullMeta(1, 100, now)
	metas := []snapshot.Meta{full}
	for i := range 3 {
		first := int64(101 + 10*i)
		created := now.Add(time.Duration(i+1) * time.Minute)
		d := snapshot.Meta{Cluster: "c", ClusterID: "abc", Epoch: 1, Kind: snapshot.KindDelta, Base: full.Name, FirstRevision: first, Revision: first + 9,
			Events: 10, Created: created, Codec: snapshot.Codec, Size: 1, SHA256: strings.Repeat("0", 64)}
		d.Name = snapshot.DeltaName("c", 1, d.Revision, created, false)
		metas = append(metas, d)
	}
	for _, m := range metas {
		if _, err := fs.Put(ctx, m.Name, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
		if err := fs.PutMeta(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// The snapshot and the first segment are signed, then the store fails.
	_, aerr := snapshot.Adopt(ctx, &failingMetaStore{Store: fs, ok: 2}, enc, metas)
	if aerr == nil {
		t.Fatal("Adopt did not fail: the test proves nothing")
	}
	list, err := fs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, _, rawEnd, _ := snapshot.Newest(list)
	kept, _ := enc.Authentic(list)
	if f, _, end, ok := snapshot.Newest(kept); ok {
		t.Fatalf("after a failed Adopt (%v) members see snapshot %s authentic with its chain ending at %d, while the store's chain holds writes to %d", aerr, f.Name, end, rawEnd)
	}
}

// A store that fails once, then works: Adopt puts back unsigned what it
// signed, so that the store is as before.
func TestFailedAdoptPutsBackWhatItSigned(t *testing.T) {
	ctx := context.Background()
	fs, enc := macStore(t)
	now := time.Now().UTC().Add(-time.Hour)
	full := fullMeta(1, 100, now)
	d := snapshot.Meta{Cluster: "c", ClusterID: "abc", Epoch: 1, Kind: snapshot.KindDelta, Base: full.Name, FirstRevision: 101, Revision: 110,
		Events: 10, Created: now.Add(time.Minute), Codec: snapshot.Codec, Size: 1, SHA256: strings.Repeat("0", 64)}
	d.Name = snapshot.DeltaName("c", 1, d.Revision, d.Created, false)
	for _, m := range []snapshot.Meta{full, d} {
		if _, err := fs.Put(ctx, m.Name, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
		if err := fs.PutMeta(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := snapshot.Adopt(ctx, &onceFailingMetaStore{Store: fs, failAt: 2}, enc, []snapshot.Meta{full, d}); err == nil {
		t.Fatal("Adopt did not fail: the test proves nothing")
	}
	list, err := fs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list {
		if m.MAC != "" {
			t.Fatalf("after a failed Adopt %s stays signed", m.Name)
		}
	}
	// A forged object among them refuses the whole adoption up front.
	forged := d
	forged.MAC = strings.Repeat("ab", 32)
	if _, err := snapshot.Adopt(ctx, fs, enc, []snapshot.Meta{full, forged}); !errors.Is(err, snapshot.ErrForged) {
		t.Fatalf("Adopt with a forged delta: %v, want ErrForged", err)
	}
	if list, _ := fs.List(ctx); list[0].MAC != "" || list[1].MAC != "" {
		t.Fatalf("a refused Adopt signed something: %+v", list)
	}
}

// onceFailingMetaStore fails its failAt-th PutMeta (1-based) only.
type onceFailingMetaStore struct {
	snapshot.Store
	failAt, n int
}

func (s *onceFailingMetaStore) PutMeta(ctx context.Context, m snapshot.Meta) error {
	s.n++
	if s.n == s.failAt {
		return context.Canceled
	}
	return s.Store.PutMeta(ctx, m)
}

// macStore is a file store of cluster c and the encryption that
// authenticates its objects.
func macStore(t *testing.T) (snapshot.Store, snapshot.Encryption) {
	t.Helper()
	fs, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	key, err := snapshot.DeriveMACKey(bytes.Repeat([]byte{7}, 32), "c")
	if err != nil {
		t.Fatal(err)
	}
	return fs, snapshot.Encryption{MACKey: key}
}

// fullMeta is the metadata of a one-byte full snapshot of cluster c.
func fullMeta(epoch uint64, rev int64, created time.Time) snapshot.Meta {
	m := snapshot.Meta{Cluster: "c", ClusterID: "abc", Epoch: epoch, Revision: rev, Created: created, Codec: snapshot.Codec, Size: 1, SHA256: strings.Repeat("0", 64)}
	m.Name = snapshot.ObjectName("c", epoch, rev, created, false)
	return m
}
