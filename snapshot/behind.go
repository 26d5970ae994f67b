package snapshot

import "io"

// behindChunk is how much a behind writer hands over at once.
const behindChunk = 1 << 20

// behind writes to dst on its own goroutine: Write copies p into a chunk
// and hands full chunks over (at most depth wait), so a slow consumer
// runs beside the caller instead of after it. It carries the snapshot
// hash (sha256 costs 0.75 CPU-s per GiB with the CPU's SHA instructions
// and 4.4 without, as much as zstd's whole decompression): on the
// caller's goroutine it came after decompressing and writing every
// chunk; behind it, the three share both cores. dst must not fail; read
// its state only after Close.
type behind struct {
	dst   io.Writer
	chunk []byte
	full  chan []byte
	free  chan []byte
	done  chan struct{}
}

func newBehind(dst io.Writer, depth int) *behind {
	b := &behind{dst: dst, full: make(chan []byte, depth), free: make(chan []byte, depth+2), done: make(chan struct{})}
	for range depth + 2 {
		b.free <- make([]byte, 0, behindChunk)
	}
	b.chunk = <-b.free
	go func() {
		defer close(b.done)
		for c := range b.full {
			_, _ = b.dst.Write(c)
			b.free <- c[:0]
		}
	}()
	return b
}

func (b *behind) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), behindChunk-len(b.chunk))
		b.chunk = append(b.chunk, p[:k]...)
		p = p[k:]
		if len(b.chunk) == behindChunk {
			b.full <- b.chunk
			b.chunk = <-b.free
		}
	}
	return n, nil
}

// Close hands over what is left and waits until dst has taken it all.
func (b *behind) Close() {
	if len(b.chunk) > 0 {
		b.full <- b.chunk
	}
	close(b.full)
	<-b.done
}
