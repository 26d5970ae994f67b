package snapshot

import (
	"bytes"
	"crypto/sha256"
	"math/rand/v2"
	"testing"
)

// A behind writer hands its consumer exactly the bytes written, in order,
// across chunk edges and with the caller reusing its buffer at once.
func TestBehindKeepsTheStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	want := make([]byte, 5*behindChunk+12345)
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	var got bytes.Buffer
	b := newBehind(&got, 2)
	scratch := make([]byte, 3*behindChunk)
	for rest := want; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(3*behindChunk))
		if rng.IntN(4) == 0 {
			n = min(len(rest), 1+rng.IntN(40))
		}
		copy(scratch, rest[:n])
		if k, err := b.Write(scratch[:n]); k != n || err != nil {
			t.Fatalf("Write = %d, %v; want %d, nil", k, err, n)
		}
		for i := range scratch[:n] { // the caller reuses its buffer
			scratch[i] = 0
		}
		rest = rest[n:]
	}
	b.Close()
	if sha256.Sum256(got.Bytes()) != sha256.Sum256(want) {
		t.Fatalf("the consumer got %d bytes that differ from the %d written", got.Len(), len(want))
	}
}
