package snapshot_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// fuzzIdentity is a test-only age key: the encrypted seeds in
// testdata/fuzz/FuzzFetch are encrypted to it. X25519, not a passphrase:
// scrypt would spend a second on every input.
const fuzzIdentity = "AGE-SECRET-KEY-1NXQMUUKW02CQAE8J265TZDLW33M6VCUQVNACQLG3HUH42L9YL2YSTNPDV2"

// fuzzObject is the object name every fuzzed snapshot is stored under.
var fuzzObject = snapshot.ObjectName("c", 1, 7, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), false)

// fakeEtcdSnapshot is data followed by its sha256, the shape of etcd's
// snapshot stream that Decode checks.
func fakeEtcdSnapshot(n int) []byte {
	db := bytes.Repeat([]byte("etcd-nomad fuzz "), n/16+1)[:n]
	sum := sha256.Sum256(db)
	return append(db, sum[:]...)
}

// fuzzSeed returns a stored object and its metadata as a store holds them.
func fuzzSeed(tb testing.TB, plain []byte, enc snapshot.Encryption) (obj, meta []byte) {
	var buf bytes.Buffer
	size, sum, err := snapshot.Encode(&buf, bytes.NewReader(plain), enc)
	if err != nil {
		tb.Fatal(err)
	}
	m := snapshot.Meta{Name: fuzzObject, Cluster: "c", Epoch: 1, Revision: 7, Size: size, SHA256: sum,
		StoredSize: int64(buf.Len()), Encrypted: enc.Enabled(), Codec: snapshot.Codec}
	mb, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), mb
}

// FuzzFetch: any stored object and metadata give a verified plaintext
// snapshot or an error, never a panic, and on an error nothing is left
// where the snapshot would go (no partial restore). What Fetch accepts
// has the recorded size and sha256 and etcd's trailing hash, and Verify
// agrees. Seeds: testdata/fuzz/FuzzFetch (plain, encrypted, damaged).
func FuzzFetch(f *testing.F) {
	id, err := age.ParseX25519Identity(fuzzIdentity)
	if err != nil {
		f.Fatal(err)
	}
	enc := snapshot.Encryption{Recipients: []age.Recipient{id.Recipient()}, Identities: []age.Identity{id}}
	for _, e := range []snapshot.Encryption{{}, enc} {
		obj, meta := fuzzSeed(f, fakeEtcdSnapshot(3000), e)
		f.Add(obj, meta)
	}
	storeDir, outDir := filepath.Join(f.TempDir(), "store"), filepath.Join(f.TempDir(), "out")
	store, err := file.New(storeDir, "c")
	if err != nil {
		f.Fatal(err)
	}
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, obj, meta []byte) {
		if err := os.WriteFile(filepath.Join(storeDir, fuzzObject), obj, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(storeDir, fuzzObject+".meta.json"), meta, 0o600); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(outDir, "snapshot.db")
		m, ferr := snapshot.Fetch(ctx, store, fuzzObject, dst, enc, nil)
		_, verr := snapshot.Verify(ctx, store, fuzzObject, enc, nil)
		if (ferr == nil) != (verr == nil) {
			t.Fatalf("fetch: %v; verify: %v", ferr, verr)
		}
		if ferr != nil {
			if left, _ := os.ReadDir(outDir); len(left) != 0 {
				t.Fatalf("fetch failed (%v) and left %s behind", ferr, left[0].Name())
			}
			return
		}
		got, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(dst)
		sum := sha256.Sum256(got)
		if int64(len(got)) != m.Size || hex.EncodeToString(sum[:]) != m.SHA256 {
			t.Fatalf("fetched %d bytes with sha256 %x, recorded %d and %s", len(got), sum, m.Size, m.SHA256)
		}
		if len(got) < sha256.Size {
			t.Fatalf("fetched %d bytes: no room for etcd's hash", len(got))
		}
		db := sha256.Sum256(got[:len(got)-sha256.Size])
		if !bytes.Equal(db[:], got[len(got)-sha256.Size:]) {
			t.Fatal("fetched a snapshot whose trailing hash does not match")
		}
		if m.Encrypted != bytes.HasPrefix(obj, []byte("age-encryption.org/")) {
			t.Fatalf("metadata says encrypted=%v of an object that starts %q", m.Encrypted, obj[:min(len(obj), 20)])
		}
	})
}
