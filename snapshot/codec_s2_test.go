package snapshot_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// s2Plain is a plaintext in etcd's form (data, then its sha256) of about
// n bytes, compressible as a database is.
func s2Plain(n int) []byte {
	rng := rand.New(rand.NewPCG(5, 6))
	b := make([]byte, 0, n+64)
	for len(b) < n {
		b = append(b, "key/"...)
		for range 24 {
			b = append(b, "0123456789abcdef"[rng.IntN(16)])
		}
	}
	b = b[:n]
	h := sha256.Sum256(b)
	return append(b, h[:]...)
}

// putSigned puts obj under m in a new file store of cluster "c" and signs
// its metadata with key (Adopt), as a member holding the key would.
func putSigned(t *testing.T, m snapshot.Meta, obj []byte, enc snapshot.Encryption) (*file.Store, snapshot.Meta) {
	t.Helper()
	ctx := context.Background()
	store, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	putObject(t, store, m, obj)
	if _, err := snapshot.Adopt(ctx, store, enc, []snapshot.Meta{m}); err != nil {
		t.Fatal(err)
	}
	_, signed, err := store.Open(ctx, m.Name)
	if err != nil {
		t.Fatal(err)
	}
	if signed.MAC == "" {
		t.Fatal("not signed")
	}
	return store, signed
}

func s2Meta(name string, size int64, sum string, stored int) snapshot.Meta {
	return snapshot.Meta{Name: name, Cluster: "c", ClusterID: "abc", Epoch: 1, Revision: 5, Created: time.Now().UTC(),
		Codec: snapshot.CodecS2, Size: size, SHA256: sum, StoredSize: int64(stored)}
}

// A byte flipped anywhere in an S2 object (its stream header, a block,
// the last byte) fails verification with an error naming the object,
// and a fetch leaves nothing behind.
func TestFlippedByteInAnS2SnapshotIsRefused(t *testing.T) {
	key, _ := snapshot.DeriveMACKey(bytes.Repeat([]byte{9}, 32), "c")
	enc := snapshot.Encryption{MACKey: key}
	plain := s2Plain(6 << 20) // two blocks
	var obj bytes.Buffer
	size, sum, err := snapshot.EncodeWith(&obj, bytes.NewReader(plain), snapshot.Encryption{}, snapshot.CodecS2)
	if err != nil {
		t.Fatal(err)
	}
	name := snapshot.ObjectName("c", 1, 5, time.Now(), false)
	store, m := putSigned(t, s2Meta(name, size, sum, obj.Len()), obj.Bytes(), enc)
	ctx := context.Background()
	if _, err := snapshot.Verify(ctx, store, name, enc, nil); err != nil {
		t.Fatalf("intact: %v", err)
	}
	for _, at := range []int{4, obj.Len() / 3, obj.Len() / 2, obj.Len() - 1} {
		if err := os.WriteFile(filepath.Join(store.Dir, name), flip(obj.Bytes(), at), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := snapshot.Verify(ctx, store, name, enc, nil)
		if err == nil || !strings.Contains(err.Error(), m.Name) || !errors.Is(err, snapshot.ErrChecksum) && !strings.Contains(err.Error(), "corrupt") {
			t.Fatalf("byte %d of %d flipped: verify returned %v, want a checksum or corrupt-input error naming %s", at, obj.Len(), err, m.Name)
		}
		t.Logf("byte %d flipped: %v", at, err)
		out := filepath.Join(t.TempDir(), "out.db")
		if _, err := snapshot.Fetch(ctx, store, name, out, enc, nil); err == nil {
			t.Fatalf("byte %d flipped: fetch succeeded", at)
		}
		if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
			t.Fatalf("fetch left files behind: %v", ents)
		}
	}
}

// Metadata naming a codec this version does not read is refused by
// that name, MAC or not: never decoded as another codec, never skipped.
func TestUnknownCodecIsRefusedByName(t *testing.T) {
	key, _ := snapshot.DeriveMACKey(bytes.Repeat([]byte{9}, 32), "c")
	enc := snapshot.Encryption{MACKey: key}
	plain := s2Plain(64 << 10)
	var obj bytes.Buffer
	size, sum, err := snapshot.EncodeWith(&obj, bytes.NewReader(plain), snapshot.Encryption{}, snapshot.CodecS2)
	if err != nil {
		t.Fatal(err)
	}
	for _, codec := range []string{"lz4", ""} {
		m := s2Meta(snapshot.ObjectName("c", 1, 5, time.Now(), false), size, sum, obj.Len())
		m.Codec = codec
		store, _ := putSigned(t, m, obj.Bytes(), enc)
		_, err := snapshot.Verify(context.Background(), store, m.Name, enc, nil)
		if !errors.Is(err, snapshot.ErrUnknownCodec) || !strings.Contains(err.Error(), `"`+codec+`"`) || !strings.Contains(err.Error(), m.Name) {
			t.Fatalf("codec %q: verify returned %v, want %v naming the codec and %s", codec, err, snapshot.ErrUnknownCodec, m.Name)
		}
	}
}

// An S2 object that inflates past its MAC'd plaintext size (a store
// writer's bomb in a genuine object's place) is cut at that size and a
// byte, on the sequential path (small objects) and the concurrent one.
func TestS2BombStopsAtTheMACdSize(t *testing.T) {
	key, _ := snapshot.DeriveMACKey(bytes.Repeat([]byte{9}, 32), "c")
	enc := snapshot.Encryption{MACKey: key}
	var z bytes.Buffer
	zw := s2.NewWriter(&z, s2.WriterBlockSize(4<<20), s2.WriterBestCompression())
	if _, err := io.Copy(zw, io.LimitReader(zeroReader{}, 96<<20)); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	for _, size := range []int64{1000, 40 << 20} {
		m := s2Meta(snapshot.ObjectName("c", 1, 5, time.Now(), false), size, strings.Repeat("0", 64), z.Len())
		_, signed := putSigned(t, m, z.Bytes(), enc)
		var c countW
		err := snapshot.Decode(&c, bytes.NewReader(z.Bytes()), signed, enc)
		if c.n > size+1 || !errors.Is(err, snapshot.ErrChecksum) || !strings.Contains(err.Error(), "inflates past") {
			t.Fatalf("a %d KiB S2 object of 96 MiB under a MAC'd size of %d: wrote %d bytes, %v", z.Len()>>10, size, c.n, err)
		}
	}
}
