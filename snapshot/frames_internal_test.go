package snapshot

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// The frames of frameWriter, compressed on several goroutines, decode as
// one zstd stream to exactly the input, in order, whatever the sizes of
// the writes; an empty input is one empty frame.
func TestFramesDecodeInOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	text := make([]byte, 3*frameSize+12345)
	for i := range text {
		if i%3 == 0 {
			text[i] = byte(rng.Intn(256)) // some entropy: frames differ
		} else {
			text[i] = byte('a' + i%7)
		}
	}
	for _, in := range [][]byte{text, text[:100], nil} {
		var out bytes.Buffer
		w, err := newFrameWriter(&out, 3)
		if err != nil {
			t.Fatal(err)
		}
		for rest := in; len(rest) > 0; {
			k := min(len(rest), 1+rng.Intn(3<<20)) // writes across chunk edges
			if _, err := w.Write(rest[:k]); err != nil {
				t.Fatal(err)
			}
			rest = rest[k:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if out.Len() == 0 {
			t.Fatalf("%d bytes in: nothing written", len(in))
		}
		d, err := zstd.NewReader(&out, zstd.WithDecoderMaxWindow(MaxWindow))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(d)
		d.Close()
		if err != nil {
			t.Fatalf("%d bytes in: decode: %v", len(in), err)
		}
		if !bytes.Equal(got, in) {
			t.Fatalf("%d bytes in, %d decoded: not the input", len(in), len(got))
		}
	}
}

type failingWriter struct{ after int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("store gone")
	}
	f.after--
	return len(p), nil
}

// A failed write of a frame is returned by a later Write or by Close, and
// nothing blocks.
func TestFramesReportTheWriteError(t *testing.T) {
	w, err := newFrameWriter(&failingWriter{after: 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	buf := bytes.Repeat([]byte("etcd"), frameSize/4)
	var werr error
	for i := 0; i < 8 && werr == nil; i++ {
		_, werr = w.Write(buf)
	}
	cerr := w.Close()
	if cerr == nil || cerr.Error() != "store gone" || werr == nil || werr.Error() != "store gone" {
		t.Fatalf("write error %v, close error %v: want the store's error from both", werr, cerr)
	}
}
