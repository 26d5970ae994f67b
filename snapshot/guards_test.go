package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Invariant 7: a snapshot whose own trailing hash (etcd's format: the
// database then its sha256) does not match is refused, even when the
// sha256 recorded at save time matches — a snapshot damaged before it was
// saved, or a stream that is not an etcd snapshot at all.
func TestDecodeRefusesABadTrailingHashEvenWithAMatchingRecord(t *testing.T) {
	db := bytes.Repeat([]byte("etcd backend page "), 1000)
	sum := sha256.Sum256(db)
	good := append(append([]byte{}, db...), sum[:]...)
	bad := append([]byte{}, good...)
	bad[10] ^= 1 // damaged before the save: the save's sha256 covers it
	for _, c := range []struct {
		name  string
		plain []byte
		ok    bool
	}{{"intact", good, true}, {"damaged before save", bad, false}} {
		var enc bytes.Buffer
		size, sha, err := Encode(&enc, bytes.NewReader(c.plain), Encryption{})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err = Decode(&out, &enc, Meta{Name: c.name, Size: size, SHA256: sha, Codec: Codec}, Encryption{})
		if c.ok && err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !c.ok && !errors.Is(err, ErrChecksum) {
			t.Fatalf("%s: Decode returned %v, want ErrChecksum", c.name, err)
		}
	}
}

// Invariant 7: a restore never writes over an existing data dir; what is
// there stays untouched: a fetch into an existing dir and a restore over a
// dir holding a WAL are refused before anything is written or removed.
func TestRestoreNeverOverwritesADataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	if err := os.MkdirAll(filepath.Join(dir, "member", "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(dir, "member", "wal", "0000000000000000-0000000000000000.wal")
	if err := os.WriteFile(keep, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dbPath(dir)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dbPath(dir), []byte("a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := FetchInto(context.Background(), nil, "missing", dir, Encryption{}, nil)
	if err == nil || !strings.Contains(err.Error(), "never overwritten") {
		t.Fatalf("fetch into an existing dir: %v, want a refusal", err)
	}
	err = Restore(RestoreOptions{DataDir: dir, Name: "m0", PeerURL: "http://127.0.0.1:1", Token: "t"})
	if err == nil || !strings.Contains(err.Error(), "never restored over") {
		t.Fatalf("restore over a WAL: %v, want a refusal", err)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "data" {
		t.Fatalf("the existing data changed: %q %v", b, err)
	}
	if b, err := os.ReadFile(dbPath(dir)); err != nil || string(b) != "a database" {
		t.Fatalf("the existing database changed: %q %v", b, err)
	}
}
