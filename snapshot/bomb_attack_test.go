package snapshot_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// Third security review (rev13b): a store writer swaps a genuine delta's object for an object of
// exactly its MAC'd stored_size (so the size bound passes) that is an
// age-encrypted (public recipient) zstd bomb: Decode inflates it into a
// bytes.Buffer before the sha256/size check. Memory is bounded by the
// plaintext, not by stored_size.
func TestDeltaZstdBombOfExactStoredSize(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := file.New(dir, "c")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := age.GenerateX25519Identity()
	key, _ := snapshot.DeriveMACKey(bytes.Repeat([]byte{7}, 32), "c")
	enc := snapshot.Encryption{MACKey: key, Recipients: []age.Recipient{id.Recipient()}, Identities: []age.Identity{id}}

	// The writer's bomb: 128 MiB of zeros, compressed, then encrypted to
	// the public recipient, padded with a zstd skippable frame to the
	// genuine segment's stored size.
	const storedSize = 64 << 10
	var z bytes.Buffer
	zw, _ := zstd.NewWriter(&z, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	io.Copy(zw, io.LimitReader(zeroReader{}, 128<<20))
	zw.Close()
	comp := z.Bytes()
	build := func(pad int) []byte {
		p := append([]byte{}, comp...)
		if pad >= 8 {
			hdr := make([]byte, 8)
			binary.LittleEndian.PutUint32(hdr, 0x184D2A50)
			binary.LittleEndian.PutUint32(hdr[4:], uint32(pad-8))
			p = append(p, hdr...)
			p = append(p, make([]byte, pad-8)...)
		}
		var out bytes.Buffer
		w, _ := age.Encrypt(&out, id.Recipient()) // the recipient is public
		w.Write(p)
		w.Close()
		return out.Bytes()
	}
	pad := 8
	var bomb []byte
	for i := 0; i < 20; i++ {
		bomb = build(pad)
		if len(bomb) == storedSize {
			break
		}
		pad += storedSize - len(bomb)
	}
	if len(bomb) != storedSize {
		t.Fatalf("fixture: bomb is %d bytes", len(bomb))
	}
	t.Logf("compressed %d bytes, bomb %d bytes", len(comp), len(bomb))

	now := time.Now().UTC()
	m := snapshot.Meta{Cluster: "c", ClusterID: "abc", Epoch: 1, Revision: 10, FirstRevision: 6, Kind: snapshot.KindDelta, Base: snapshot.ObjectName("c", 1, 5, now.Add(-time.Minute), true),
		Created: now, Codec: snapshot.CodecZstd, Size: 1000, StoredSize: storedSize, SHA256: strings.Repeat("0", 64), Events: 1, Encrypted: true}
	m.Name = strings.TrimSuffix(snapshot.ObjectName("c", 1, 10, now, false), ".snap.zst") + ".delta.zst"
	if _, err := store.Put(ctx, m.Name, bytes.NewReader(make([]byte, storedSize))); err != nil {
		t.Fatal(err)
	}
	if err := store.PutMeta(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Adopt(ctx, store, enc, []snapshot.Meta{m}); err != nil {
		t.Fatal(err)
	}
	list, _ := store.List(ctx)
	kept, refused := enc.Authentic(list)
	if len(kept) != 1 {
		t.Fatalf("fixture: %v", refused)
	}
	// The swap: same size as recorded.
	if err := os.WriteFile(filepath.Join(dir, m.Name), bomb, 0o600); err != nil {
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
		t.Fatalf("a genuine delta (size 1000, stored_size %d) whose object a store writer swapped for a same-size zstd bomb made the fetch allocate %d MiB", storedSize, alloc>>20)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type countW struct{ n int64 }

func (c *countW) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// Third security review (rev13b): Decode (a full snapshot's FetchInto writes its output to the
// data dir's disk) writes everything the object inflates to, long past
// the MAC'd plaintext size, before the size check: a swapped full
// snapshot object fills the member's disk.
func TestDecodeWritesPastTheMACdSize(t *testing.T) {
	key, _ := snapshot.DeriveMACKey(bytes.Repeat([]byte{7}, 32), "c")
	enc := snapshot.Encryption{MACKey: key}
	var z bytes.Buffer
	zw, _ := zstd.NewWriter(&z, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	io.Copy(zw, io.LimitReader(zeroReader{}, 64<<20))
	zw.Close()
	now := time.Now().UTC()
	m := snapshot.Meta{Name: snapshot.ObjectName("c", 1, 5, now, false), Cluster: "c", ClusterID: "abc", Epoch: 1, Revision: 5, Kind: snapshot.KindFull,
		Created: now, Codec: snapshot.CodecZstd, Size: 1000, StoredSize: int64(z.Len()), SHA256: strings.Repeat("0", 64)}
	dir := t.TempDir()
	store, _ := file.New(dir, "c")
	ctx := context.Background()
	store.Put(ctx, m.Name, bytes.NewReader(z.Bytes()))
	store.PutMeta(ctx, m)
	if _, err := snapshot.Adopt(ctx, store, enc, []snapshot.Meta{m}); err != nil {
		t.Fatal(err)
	}
	_, signed, err := store.Open(ctx, m.Name)
	if err != nil {
		t.Fatal(err)
	}
	var c countW
	err = snapshot.Decode(&c, bytes.NewReader(z.Bytes()), signed, enc)
	t.Logf("decode: wrote %d bytes for a MAC'd size of %d: %v", c.n, m.Size, err)
	if c.n > m.Size+1<<20 {
		t.Fatalf("Decode wrote %d MiB for a snapshot whose MAC'd size is %d bytes", c.n>>20, m.Size)
	}
}
