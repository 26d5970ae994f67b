package snapshot

import (
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// frameSize is the plaintext compressed into one zstd frame. Frames are
// compressed independently, so frameWriter can keep both cores busy: a
// streaming encoder compresses one block at a time beside its caller
// (`make bench` e.save: 1.07 cores used of 2). 4 MiB is half of the 8 MiB
// window SpeedFastest uses; cross-frame matches lost cost under 1% here.
const frameSize = 4 << 20

// frameWriter compresses what is written in frames of frameSize, each an
// independent zstd frame compressed on its own goroutine (at most workers
// at once), and writes the frames to out in order. Frames one after the
// other are one zstd stream to any decoder (RFC 8878, section 3.1): the
// stored format is unchanged. Memory: about workers+2 chunks of plaintext
// and as many frames.
type frameWriter struct {
	enc   *zstd.Encoder
	out   io.Writer
	chunk []byte
	sem   chan struct{}    // a slot per compressing goroutine
	queue chan chan []byte // frames in the order of their chunks
	done  chan struct{}    // closed when the writing goroutine ends
	bufs  sync.Pool        // *[]byte, frameSize capacity
	mu    sync.Mutex       // guards err
	err   error            // the first write error
	wrote bool             // a frame was queued
}

func newFrameWriter(out io.Writer, workers int) (*frameWriter, error) {
	// SpeedFastest with entropy coding of literals even in blocks without
	// matches (`make bench`, 2 shared cores, 1.1 GiB snapshots): on values
	// of random hex text, as small as SpeedDefault, and a save took 7-8 s
	// instead of 15.5 s on a busy machine; on JSON-like objects, 7% larger
	// and 12% faster. Without the literal coding SpeedFastest leaves
	// hex-like values uncompressed.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithAllLitEntropyCompression(true), zstd.WithEncoderConcurrency(workers))
	if err != nil {
		return nil, err
	}
	w := &frameWriter{enc: enc, out: out, sem: make(chan struct{}, workers), queue: make(chan chan []byte, workers+1), done: make(chan struct{})}
	w.bufs.New = func() any { b := make([]byte, 0, frameSize); return &b }
	w.chunk = w.getBuf()
	go w.writeFrames()
	return w, nil
}

func (w *frameWriter) getBuf() []byte { return (*w.bufs.Get().(*[]byte))[:0] }

func (w *frameWriter) putBuf(b []byte) {
	if cap(b) >= frameSize {
		w.bufs.Put(&b)
	}
}

// writeFrames writes each frame as it is ready, in order; after an error
// it keeps draining so that compressing goroutines never block.
func (w *frameWriter) writeFrames() {
	defer close(w.done)
	for res := range w.queue {
		frame := <-res
		if w.failed() == nil {
			if _, err := w.out.Write(frame); err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
			}
		}
		w.putBuf(frame)
	}
}

func (w *frameWriter) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Write buffers p and hands every full chunk to a compressing goroutine.
func (w *frameWriter) Write(p []byte) (int, error) {
	if err := w.failed(); err != nil {
		return 0, err
	}
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), frameSize-len(w.chunk))
		w.chunk = append(w.chunk, p[:k]...)
		p = p[k:]
		if len(w.chunk) == frameSize {
			w.flush()
		}
	}
	return n, nil
}

// flush queues the current chunk's frame (blocking while workers+1 frames
// wait: the reader never runs far ahead of the compressors).
func (w *frameWriter) flush() {
	chunk := w.chunk
	w.chunk = w.getBuf()
	res := make(chan []byte, 1)
	w.queue <- res
	w.wrote = true
	w.sem <- struct{}{}
	go func() {
		frame := w.enc.EncodeAll(chunk, w.getBuf())
		<-w.sem
		w.putBuf(chunk)
		res <- frame
	}()
}

// Close compresses what is left, waits for every frame to be written and
// returns the first error.
func (w *frameWriter) Close() error {
	if len(w.chunk) > 0 || !w.wrote {
		w.flush() // an empty input still makes one (empty) frame
	}
	close(w.queue)
	<-w.done
	return w.failed()
}
