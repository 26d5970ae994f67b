package snapshot_test

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// endless yields prefix, then chunk again and again, up to limit bytes
// in all, then errLimit: a store object that does not end.
type endless struct {
	prefix, chunk []byte
	off           int
	n, limit      int64
}

var errLimit = errors.New("reader limit reached")

func (e *endless) Read(p []byte) (int, error) {
	if e.n >= e.limit {
		return 0, errLimit
	}
	k := 0
	for k < len(p) && e.n < e.limit {
		var src []byte
		if len(e.prefix) > 0 {
			src = e.prefix
		} else {
			src = e.chunk[e.off:]
		}
		c := copy(p[k:], src)
		if len(e.prefix) > 0 {
			e.prefix = e.prefix[c:]
		} else {
			e.off = (e.off + c) % len(e.chunk)
		}
		k += c
		e.n += int64(c)
	}
	return k, nil
}

// rev15-sec: a store writer serves, in place of a genuine MAC'd object of
// a few KiB (StoredSize MAC'd), an S2 stream header followed by skippable
// chunks without end: no plaintext is ever produced, so the MAC'd-size
// bound (pastSize) never trips, and Decode (Verify/Fetch/FetchInto) reads
// on for as long as the store sends. Deltas were bounded by stored_size
// (readSegment), full snapshots not; now Decode cuts every object one byte
// past it (red before: 512 MiB read). Same for zstd skippable frames.
func TestAnObjectThatDoesNotEndIsCutPastItsStoredSize(t *testing.T) {
	key, _ := snapshot.DeriveMACKey(bytes.Repeat([]byte{9}, 32), "c")
	enc := snapshot.Encryption{MACKey: key}
	plain := s2Plain(64 << 10)
	var obj bytes.Buffer
	size, sum, err := snapshot.EncodeWith(&obj, bytes.NewReader(plain), snapshot.Encryption{}, snapshot.CodecS2)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 512 << 20
	for _, tc := range []struct {
		codec         string
		prefix, chunk []byte
	}{
		// S2 stream identifier, then skippable chunk 0x80 of 16 MiB-1 of zeros.
		{snapshot.CodecS2, []byte("\xff\x06\x00\x00S2sTwO"), append([]byte{0x80, 0xff, 0xff, 0xff}, make([]byte, 0xffffff)...)},
		// zstd skippable frame: magic 0x184D2A50, 4-byte LE length.
		{snapshot.CodecZstd, nil, append([]byte{0x50, 0x2a, 0x4d, 0x18, 0x00, 0x00, 0x00, 0x01}, make([]byte, 1<<24)...)},
	} {
		m := s2Meta(snapshot.ObjectName("c", 1, 5, time.Now(), false), size, sum, obj.Len())
		m.Codec = tc.codec
		_, signed := putSigned(t, m, obj.Bytes(), enc)
		r := &endless{prefix: tc.prefix, chunk: tc.chunk, limit: limit}
		var out countW
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		err := snapshot.Decode(&out, r, signed, enc)
		runtime.ReadMemStats(&after)
		t.Logf("%s: MAC'd stored_size %d; Decode read %d MiB (%.0fx), wrote %d, in %v, allocated %d MiB: %v",
			tc.codec, signed.StoredSize, r.n>>20, float64(r.n)/float64(signed.StoredSize), out.n, time.Since(start).Round(time.Millisecond), (after.TotalAlloc-before.TotalAlloc)>>20, err)
		if err == nil || r.n > signed.StoredSize+1+(1<<20) {
			t.Fatalf("%s: Decode read %d bytes of an object whose MAC'd stored size is %d: %v", tc.codec, r.n, signed.StoredSize, err)
		}
	}
}
