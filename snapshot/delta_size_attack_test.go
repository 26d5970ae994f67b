package snapshot_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// TestSwappedDeltaObjectIsNotReadWhole: a store writer replaces the
// object of a genuine delta (its metadata, MAC and stored_size untouched)
// with 64 MiB. A member fetching the chain (a recovery, an install) reads
// the object whole into memory before comparing its size with the
// stored_size the MAC vouches for, five times over: at a few GiB, an OOM
// of the process that runs etcd, and the mismatch was a read error, not a
// damaged segment, so the recovery failed again and again. The read stops
// past stored_size and the segment is damaged: the chain ends before it
// (session-13 security review, red before).
func TestSwappedDeltaObjectIsNotReadWhole(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := file.New(dir, "c")
	if err != nil {
		t.Fatal(err)
	}
	key, _ := snapshot.DeriveMACKey(bytes.Repeat([]byte{7}, 32), "c")
	enc := snapshot.Encryption{MACKey: key}
	now := time.Now().UTC()
	m := snapshot.Meta{Cluster: "c", ClusterID: "abc", Epoch: 1, Revision: 10, FirstRevision: 6, Kind: snapshot.KindDelta, Base: snapshot.ObjectName("c", 1, 5, now.Add(-time.Minute), false),
		Created: now, Codec: snapshot.Codec, Size: 1, StoredSize: 1, SHA256: strings.Repeat("0", 64), Events: 1}
	m.Name = strings.TrimSuffix(snapshot.ObjectName("c", 1, 10, now, false), ".snap.zst") + ".delta.zst"
	if _, err := store.Put(ctx, m.Name, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := store.PutMeta(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Adopt(ctx, store, enc, []snapshot.Meta{m}); err != nil {
		t.Fatal(err)
	}
	list, err := store.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("%v %v", list, err)
	}
	kept, refused := enc.Authentic(list)
	if len(kept) != 1 {
		t.Fatalf("fixture: the delta does not authenticate: %v", refused)
	}
	// The store writer's swap: 64 MiB in place of the 1-byte object.
	if err := os.WriteFile(filepath.Join(dir, m.Name), bytes.Repeat([]byte{0}, 64<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fc, err := snapshot.FetchChain(ctx, store, kept, enc)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("FetchChain: damaged %q, err %v; allocated %d MiB", fc.Damaged, err, alloc>>20)
	if alloc > 16<<20 {
		t.Fatalf("a genuine delta of stored_size 1 whose object a store writer swapped for 64 MiB made the fetch allocate %d MiB: read whole before its size is checked", alloc>>20)
	}
	if err != nil || fc.Damaged != m.Name || len(fc.Segments) != 0 {
		t.Fatalf("the swapped segment: damaged %q, %d segments, err %v; want it damaged (the chain ends before it), no error", fc.Damaged, len(fc.Segments), err)
	}
	// Short of stored_size, with a clean end of the object: damaged too.
	if err := os.WriteFile(filepath.Join(dir, m.Name), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if fc, err := snapshot.FetchChain(ctx, store, kept, enc); err != nil || fc.Damaged != m.Name {
		t.Fatalf("an empty object in place of the segment: damaged %q, err %v; want it damaged", fc.Damaged, err)
	}
}
