package snapshot

import (
	"bytes"
	"crypto/sha256"
	"math/rand/v2"
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
