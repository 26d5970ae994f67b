package snapshot

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// TestTailHashOnePass checks that the single-pass hash gives both sums,
// whatever the write sizes: the sha256 of the whole stream, and etcd's
// trailing hash check (ok only when the last 32 bytes hash the rest).
func TestTailHashOnePass(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 31, 32, 33, 64, 1000, 100_000} {
		db := make([]byte, size)
		for i := range db {
			db[i] = byte(rng.Uint32())
		}
		sum := sha256.Sum256(db)
		good := append(append([]byte{}, db...), sum[:]...)
		bad := append([]byte{}, good...)
		bad[len(bad)/2] ^= 1
		for _, c := range []struct {
			name   string
			stream []byte
			ok     bool
		}{{"intact", good, true}, {"flipped", bad, false}} {
			th := &tailHash{h: sha256.New()}
			for rest := c.stream; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(70))
				th.Write(rest[:n])
				rest = rest[n:]
			}
			whole := sha256.Sum256(c.stream)
			if !bytes.Equal(th.sum(), whole[:]) || th.n != int64(len(c.stream)) {
				t.Errorf("size %d %s: whole-stream sum or count wrong", size, c.name)
			}
			if th.ok() != c.ok {
				t.Errorf("size %d %s: ok() = %v, want %v", size, c.name, th.ok(), c.ok)
			}
		}
	}
}

// hugeWindowFrame is a 10-byte zstd frame whose header names a 512 MiB
// window, followed by one raw byte.
var hugeWindowFrame = []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x98, 0x09, 0x00, 0x00, 'x'}

// A stored object cannot make Decode allocate what its header asks for:
// the window is bounded (MaxWindow). Before, these 10 bytes cost 512 MiB.
func TestDecodeBoundsTheWindowAnObjectNames(t *testing.T) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	err := Decode(io.Discard, bytes.NewReader(hugeWindowFrame), Meta{Name: "x", Size: 1, Codec: CodecZstd}, Encryption{})
	runtime.ReadMemStats(&m1)
	if err == nil || !strings.Contains(err.Error(), "read x") {
		t.Fatalf("Decode of a frame naming a 512 MiB window: %v, want an error naming the object", err)
	}
	if got := m1.TotalAlloc - m0.TotalAlloc; got > 2*MaxWindow {
		t.Fatalf("Decode allocated %d MiB for a 10-byte object", got>>20)
	}
	// What the zstd encoder writes still decodes, with a window of its own size.
	plain := make([]byte, 20<<20)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range plain {
		plain[i] = byte(rng.IntN(16)) // compressible, as a database is
	}
	sum := sha256.Sum256(plain)
	plain = append(plain, sum[:]...)
	var obj bytes.Buffer
	size, sha, err := EncodeWith(&obj, bytes.NewReader(plain), Encryption{}, CodecZstd)
	if err != nil {
		t.Fatal(err)
	}
	if err := Decode(io.Discard, &obj, Meta{Name: "big", Size: size, SHA256: sha, Codec: CodecZstd}, Encryption{}); err != nil {
		t.Fatalf("Decode of what Encode wrote (20 MiB): %v", err)
	}
}
