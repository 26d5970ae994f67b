package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Kinds of stored objects (Meta.Kind).
const (
	// KindFull is a full snapshot: etcd's database. Written as "" so
	// that metadata saved before deltas existed reads as full.
	KindFull = ""
	// KindDelta is a delta segment: the changes of a revision range,
	// recorded by a watch, to be replayed over the full snapshot (Base)
	// its chain starts from.
	KindDelta = "delta"
)

// ErrChainGap reports deltas that do not follow on from each other or
// from their full snapshot: what lies after the gap cannot be replayed.
var ErrChainGap = errors.New("gap in the delta chain")

// DeltaName names a delta segment by cluster, epoch, last revision and
// time, beside the full snapshots (ObjectName) of the same cluster.
func DeltaName(cluster string, epoch uint64, last int64, created time.Time, encrypted bool) string {
	ext := ".delta.zst"
	if encrypted {
		ext += ".age"
	}
	return fmt.Sprintf("%s-e%d-r%020d-%s%s", cluster, epoch, last, created.UTC().Format("20060102T150405Z"), ext)
}

// Full returns the full snapshots of a listing, in its order.
func Full(list []Meta) []Meta {
	var out []Meta
	for _, m := range list {
		if m.Kind == KindFull {
			out = append(out, m)
		}
	}
	return out
}

// Chain returns the deltas that follow on from base without a gap, in
// revision order: the first starts at base.Revision+1 or earlier (a
// delta may begin before the snapshot's revision: a recorder starts from
// what it knew), each next one right after the last. Deltas beyond a gap
// are left out; gap reports whether there were any.
func Chain(list []Meta, base Meta) (chain []Meta, gap bool) {
	var deltas []Meta
	for _, m := range list {
		if m.Kind == KindDelta && m.Base == base.Name {
			deltas = append(deltas, m)
		}
	}
	sort.SliceStable(deltas, func(i, j int) bool { return deltas[i].FirstRevision < deltas[j].FirstRevision })
	next := base.Revision + 1
	for i, d := range deltas {
		if d.Revision < next {
			continue // wholly inside what is already covered
		}
		if d.FirstRevision > next {
			return chain, len(deltas[i:]) > 0
		}
		chain = append(chain, d)
		next = d.Revision + 1
	}
	return chain, false
}

// Reach is the highest revision whose writes object m may hold, as the
// listing all (every object, authentic or not) shows it: a delta's own
// last revision; for a full snapshot, the last revision of any delta of
// all that follows on from it (Base), whatever authenticates and
// whatever gaps lie between. A caller weighing an object it refuses
// weighs its whole chain: the deltas of a refused snapshot may
// authenticate (an operator's Adopt stopped part way signs them before
// it), and they hold writes no chain a member replays reaches.
func Reach(all []Meta, m Meta) int64 {
	end := m.Revision
	if m.Kind != KindFull {
		return end
	}
	for _, d := range all {
		if d.Kind == KindDelta && d.Base == m.Name {
			end = max(end, d.Revision)
		}
	}
	return end
}

// Newest returns the newest full snapshot of a listing (by epoch and
// revision: Later) with the deltas that follow on from it, and the last
// revision they cover together.
// ok is false when the listing holds no full snapshot.
func Newest(list []Meta) (full Meta, chain []Meta, end int64, ok bool) {
	fulls := Full(list)
	if len(fulls) == 0 {
		return Meta{}, nil, 0, false
	}
	sortOldestFirst(fulls)
	full = fulls[len(fulls)-1]
	chain, _ = Chain(list, full)
	end = full.Revision
	if n := len(chain); n > 0 {
		end = chain[n-1].Revision
	}
	return full, chain, end, true
}

// A segment's plaintext: a header line, then records, each a type byte,
// a uvarint length and a payload; etcd's snapshot format is followed in
// that the sha256 of everything before comes last, so the codec checks
// a segment the way it checks a full snapshot.
var segmentMagic = []byte("etcd-nomad delta v1\n")

const (
	recordEvent byte = 1 // an mvccpb.Event, protobuf
	recordLease byte = 2 // a lease seen on a put: id, granted TTL (s), as uvarints
)

// Lease is a lease that keys written in a segment are attached to, with
// the TTL it was granted, so that a replay can grant it again.
type Lease struct {
	ID  int64
	TTL int64
}

// Segment is the content of one delta: events in revision order and the
// leases their puts use.
type Segment struct {
	Events []*mvccpb.Event
	Leases []Lease
}

// First and Last are the revisions of the segment's first and last
// events (0 without events).
func (s Segment) First() int64 {
	if len(s.Events) == 0 {
		return 0
	}
	return s.Events[0].Kv.ModRevision
}

func (s Segment) Last() int64 {
	if len(s.Events) == 0 {
		return 0
	}
	return s.Events[len(s.Events)-1].Kv.ModRevision
}

// Marshal writes the segment's plaintext, its sha256 last.
func (s Segment) Marshal() ([]byte, error) {
	var b bytes.Buffer
	b.Write(segmentMagic)
	put := func(kind byte, payload []byte) {
		b.WriteByte(kind)
		b.Write(binary.AppendUvarint(nil, uint64(len(payload))))
		b.Write(payload)
	}
	for _, l := range s.Leases {
		put(recordLease, binary.AppendUvarint(binary.AppendUvarint(nil, uint64(l.ID)), uint64(l.TTL)))
	}
	for _, ev := range s.Events {
		p, err := ev.Marshal()
		if err != nil {
			return nil, fmt.Errorf("encode event at revision %d: %w", ev.Kv.ModRevision, err)
		}
		put(recordEvent, p)
	}
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes(), nil
}

// UnmarshalSegment reads a segment's plaintext, checking its sha256 and
// that its events' revisions never go backwards.
func UnmarshalSegment(p []byte) (Segment, error) {
	if len(p) < len(segmentMagic)+sha256.Size || !bytes.HasPrefix(p, segmentMagic) {
		return Segment{}, errors.New("not a delta segment")
	}
	body, sum := p[:len(p)-sha256.Size], p[len(p)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return Segment{}, fmt.Errorf("delta segment: %w", ErrChecksum)
	}
	var s Segment
	r := bytes.NewReader(body[len(segmentMagic):])
	for r.Len() > 0 {
		kind, _ := r.ReadByte()
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return Segment{}, errors.New("delta segment: truncated record")
		}
		payload := make([]byte, n)
		_, _ = io.ReadFull(r, payload)
		switch kind {
		case recordLease:
			pr := bytes.NewReader(payload)
			id, err1 := binary.ReadUvarint(pr)
			ttl, err2 := binary.ReadUvarint(pr)
			if err1 != nil || err2 != nil {
				return Segment{}, errors.New("delta segment: bad lease record")
			}
			s.Leases = append(s.Leases, Lease{ID: int64(id), TTL: int64(ttl)})
		case recordEvent:
			ev := &mvccpb.Event{}
			if err := ev.Unmarshal(payload); err != nil || ev.Kv == nil {
				return Segment{}, fmt.Errorf("delta segment: bad event: %v", err)
			}
			if last := s.Last(); ev.Kv.ModRevision < last {
				return Segment{}, fmt.Errorf("delta segment: revision %d after %d", ev.Kv.ModRevision, last)
			}
			s.Events = append(s.Events, ev)
		default:
			return Segment{}, fmt.Errorf("delta segment: unknown record type %d", kind)
		}
	}
	return s, nil
}
