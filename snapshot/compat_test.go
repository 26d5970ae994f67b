package snapshot_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// testdata/v1 holds two objects of cluster "fix" as snapshot.Encode wrote
// them before the stored format could name its hash and codec (zstd,
// sha256; one plain, one encrypted to testdata/v1/identity.txt), with
// their metadata, signed with fixtureMACKey: what stores hold today.

// fixturePlain is the plaintext of the testdata/v1 objects: 16 KiB of
// JSON-like lines, then its sha256 as etcd ends a snapshot.
func fixturePlain() []byte {
	rng := rand.New(rand.NewPCG(27, 1))
	var b []byte
	for len(b) < 16<<10 {
		b = fmt.Appendf(b, `{"key":"k/%05d","rev":%d,"val":"%x"}`+"\n", rng.IntN(100000), rng.IntN(1<<20), rng.Uint64())
	}
	b = b[:16<<10]
	s := sha256.Sum256(b)
	return append(b, s[:]...)
}

func fixtureMACKey(t *testing.T) []byte {
	t.Helper()
	k, err := snapshot.DeriveMACKey([]byte("fixture secret, not a real one"), "fix")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// fixtureStore copies the testdata/v1 objects and metadata into a new
// file store of cluster "fix".
func fixtureStore(t *testing.T) *file.Store {
	t.Helper()
	store, err := file.New(filepath.Join(t.TempDir(), "store"), "fix")
	if err != nil {
		t.Fatal(err)
	}
	metas, err := filepath.Glob("testdata/v1/*.meta.json")
	if err != nil || len(metas) != 2 {
		t.Fatalf("fixture metadata: %v %v", metas, err)
	}
	for _, mp := range metas {
		f, err := os.Open(mp)
		if err != nil {
			t.Fatal(err)
		}
		m, err := snapshot.DecodeMeta(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		obj, err := os.ReadFile(filepath.Join("testdata/v1", m.Name))
		if err != nil {
			t.Fatal(err)
		}
		putObject(t, store, m, obj)
	}
	return store
}

// putObject puts obj and its metadata m into store.
func putObject(t *testing.T, store *file.Store, m snapshot.Meta, obj []byte) {
	t.Helper()
	ctx := context.Background()
	if _, err := store.Put(ctx, m.Name, bytes.NewReader(obj)); err != nil {
		t.Fatal(err)
	}
	if err := store.PutMeta(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// TestTodaysSnapshotsStillRestore: objects written in the first stored
// format (zstd, sha256 recorded) still verify and restore byte for byte,
// with their MACs.
func TestTodaysSnapshotsStillRestore(t *testing.T) {
	store := fixtureStore(t)
	enc, err := snapshot.X25519(nil, "testdata/v1/identity.txt")
	if err != nil {
		t.Fatal(err)
	}
	enc.MACKey = fixtureMACKey(t)
	ctx := context.Background()
	list, err := store.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	want := fixturePlain()
	for _, m := range list {
		if m.Codec != "zstd" {
			t.Fatalf("%s: codec %q, want the fixture's zstd", m.Name, m.Codec)
		}
		if _, err := snapshot.Verify(ctx, store, m.Name, enc, nil); err != nil {
			t.Fatalf("verify %s: %v", m.Name, err)
		}
		out := filepath.Join(t.TempDir(), "out.db")
		if _, err := snapshot.Fetch(ctx, store, m.Name, out, enc, nil); err != nil {
			t.Fatalf("fetch %s: %v", m.Name, err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s restored %d bytes that differ from the %d written", m.Name, len(got), len(want))
		}
	}
}
