package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/pkg/v3/traceutil"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"
)

// ReplayResult tells what a replay applied.
type ReplayResult struct {
	Segments int
	Events   int
	Txns     int // transactions the replay used (several original revisions each)
	Keys     int // distinct keys written, each read back after the replay
	// Last is the last revision (of the original cluster) replayed.
	Last int64
	// Stopped, when not empty, says why the chain was not replayed to
	// its end (a segment failed its checksum or did not decrypt): what
	// follows that segment is not applied. A segment that cannot be
	// read is never a reason to stop: it is an error.
	Stopped string
}

// FetchedChain is a delta chain fetched and verified, ready to apply.
type FetchedChain struct {
	// Segments are the segments that verified, in chain order, and
	// Chain their metadata: a prefix of the chain given.
	Segments []Segment
	Chain    []Meta
	// End is the last revision the verified segments cover (the
	// metadata's Revision of the last one; 0 with none).
	End int64
	// Damaged names the first segment that failed its checksum or did
	// not decrypt, Stopped says why ("" when the whole chain verified).
	// Undecryptable: it did not decrypt with the keys given
	// (NotDecrypted), which may be the reader's fault: not evidence of
	// damage for anyone else.
	Damaged       string
	Stopped       string
	Undecryptable bool
}

// Fetch attempts: a read error (the store unreachable for a moment, a
// connection reset, a short body) is retried fetchAttempts times in all,
// waiting fetchBackoff, then twice as long each time (3.75 s in all).
var (
	fetchAttempts = 5
	fetchBackoff  = 250 * time.Millisecond
)

// FetchChain fetches and verifies every segment of chain (Chain's result)
// before anything is applied. A segment that cannot be read is read again
// (bounded, with backoff); one that still cannot is an error, as is ctx
// ending: never a shorter chain. A segment whose object is not of the
// size its metadata records (stored_size, which the MAC vouches for), or
// whose content fails its checksum or does not decrypt, ends the chain
// there (Damaged, Stopped): the stored object itself is wrong, and
// reading it again gives the same bytes.
func FetchChain(ctx context.Context, store Store, chain []Meta, enc Encryption) (FetchedChain, error) {
	var fc FetchedChain
	for _, m := range chain {
		raw, err := readSegment(ctx, store, m)
		var size *sizeMismatch
		if errors.As(err, &size) {
			fc.Damaged, fc.Stopped = m.Name, fmt.Sprintf("delta %s: %v", m.Name, err)
			return fc, nil
		}
		if err != nil {
			return fc, err
		}
		var buf bytes.Buffer
		var s Segment
		err = Decode(&buf, bytes.NewReader(raw), m, enc)
		if err == nil {
			s, err = UnmarshalSegment(buf.Bytes())
		}
		if err != nil {
			fc.Damaged, fc.Stopped, fc.Undecryptable = m.Name, fmt.Sprintf("delta %s: %v", m.Name, err), NotDecrypted(err)
			return fc, nil
		}
		fc.Segments, fc.Chain, fc.End = append(fc.Segments, s), append(fc.Chain, m), m.Revision
	}
	return fc, nil
}

// readSegment reads a segment's stored bytes whole, retrying read errors
// (a connection reset, a body cut short: the reader's error). An object
// that ends cleanly at another size than the recorded stored size is no
// read error: it is the object (sizeMismatch), and is not read again.
func readSegment(ctx context.Context, store Store, m Meta) ([]byte, error) {
	wait := fetchBackoff
	var last error
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("fetch delta %s: %w", m.Name, err)
		}
		raw, err := readOnce(ctx, store, m)
		var size *sizeMismatch
		if err == nil || errors.As(err, &size) {
			return raw, err
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("fetch delta %s: %w (%v)", m.Name, cerr, err)
		}
		last = err
		if attempt >= fetchAttempts {
			return nil, fmt.Errorf("fetch delta %s: %d attempts, the last: %w", m.Name, attempt, last)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("fetch delta %s: %w (after %v)", m.Name, ctx.Err(), last)
		case <-t.C:
		}
		wait *= 2
	}
}

// sizeMismatch: a segment's object is longer than its recorded stored
// size, or ends (cleanly) short of it.
type sizeMismatch struct {
	stored int64
	read   int64 // stored+1: longer
}

func (e *sizeMismatch) Error() string {
	if e.read > e.stored {
		return fmt.Sprintf("the object is longer than its recorded %d bytes", e.stored)
	}
	return fmt.Sprintf("the object holds %d bytes, recorded %d", e.read, e.stored)
}

// readOnce reads a segment's object, at most one byte past its recorded
// stored size: a store writer's object of any size in its place costs
// that much memory, not its own size (before, a 64 MiB object swapped for
// a 1-byte segment was read whole, five times over, 788 MiB). Metadata
// without a stored size (written by no version that records deltas) is
// read whole.
func readOnce(ctx context.Context, store Store, m Meta) ([]byte, error) {
	rc, _, err := store.Open(ctx, m.Name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if m.StoredSize <= 0 {
		return io.ReadAll(rc)
	}
	// Grown as it is read, not sized from the metadata: a stored size
	// is only vouched for by a MAC, and an operator's unauthenticated
	// segment may claim any.
	raw, err := io.ReadAll(io.LimitReader(rc, m.StoredSize+1))
	if err != nil {
		return nil, err
	}
	if n := int64(len(raw)); n != m.StoredSize {
		return nil, &sizeMismatch{stored: m.StoredSize, read: n}
	}
	return raw, nil
}

// Replay fetches and verifies chain (Chain's result for the full snapshot
// restored into dataDir) and applies it offline (ApplyDeltas). A segment
// that fails its checksum ends the replay there (ReplayResult.Stopped);
// one that cannot be read is an error and nothing is applied.
func Replay(ctx context.Context, store Store, chain []Meta, enc Encryption, dataDir string) (ReplayResult, error) {
	fc, err := FetchChain(ctx, store, chain, enc)
	if err != nil {
		return ReplayResult{}, err
	}
	res, err := ApplyDeltas(ctx, dataDir, fc.Segments, 0)
	res.Stopped = fc.Stopped
	return res, err
}

// replayBatch and replayBatchBytes bound one replay transaction: the
// events of several original revisions go into one transaction (each
// revision whole, so every original transaction stays atomic) until it
// holds replayBatch operations or replayBatchBytes of keys and values.
// A key written again in the same batch replaces its earlier operation
// there (only the last state of a key is visible after the batch, and the
// history stays as small as the original's last states), so batches fill
// up even when the same keys are written over and over. A single original
// revision larger than that still goes whole.
const (
	replayBatch      = 4096
	replayBatchBytes = 8 << 20
)

// ApplyDeltas applies segs to the stopped etcd data dir dataDir offline,
// through etcd's own storage (mvcc over the data dir's backend, as etcd
// applies a committed entry), with no raft and no member running: the
// lessor is never promoted, so no lease expires or is revoked while the
// deltas are applied (a live replay started as a one-member leader
// counted every lease down and lost its keys when the replay outlasted
// the shortest TTL). A lease the deltas use that the data lacks is
// granted with its recorded ID and TTL before the keys that use it; when
// etcd starts on the data it gives every lease its whole TTL again, as
// after etcdutl's restore. Each original revision is applied whole in
// one transaction; revisions up to after (the snapshot's) are skipped.
// Every key written is then read back and compared with its last recorded
// state, its lease included. Neither the consistent index nor the term
// is touched: Restore's (before or after) stand.
func ApplyDeltas(ctx context.Context, dataDir string, segs []Segment, after int64) (res ReplayResult, err error) {
	res.Last = after
	if len(segs) == 0 {
		return res, nil
	}
	lg := zap.NewNop()
	be := backend.NewDefaultBackend(lg, filepath.Join(dataDir, "member", "snap", "db"))
	les := lease.NewLessor(lg, be, nil, lease.LessorConfig{})
	kv := mvcc.NewStore(lg, be, les, mvcc.StoreConfig{})
	defer func() {
		kv.Close()
		les.Stop()
		if cerr := be.Close(); err == nil && cerr != nil { // commits and syncs
			err = fmt.Errorf("replay: close the database: %w", cerr)
		}
	}()
	if err := apply(ctx, kv, les, segs, &res); err != nil {
		return res, err
	}
	return res, nil
}

type replayOp struct {
	key, value []byte
	lease      int64
	del        bool
}

func apply(ctx context.Context, kv mvcc.KV, les lease.Lessor, segs []Segment, res *ReplayResult) error {
	ttl := map[int64]int64{}
	final := map[string]*mvccpb.KeyValue{} // nil value: deleted
	var ops []replayOp
	inBatch := map[string]int{} // key -> its operation's index in ops
	batchBytes := 0
	commit := func() error {
		if len(ops) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("replay up to revision %d: %w", res.Last, err)
		}
		txn := kv.Write(traceutil.TODO())
		for _, op := range ops {
			if op.del {
				txn.DeleteRange(op.key, nil)
			} else {
				txn.Put(op.key, op.value, lease.LeaseID(op.lease))
			}
		}
		txn.End()
		res.Txns++
		ops, inBatch, batchBytes = ops[:0], map[string]int{}, 0
		return nil
	}
	for _, s := range segs {
		res.Segments++
		for _, l := range s.Leases {
			ttl[l.ID] = l.TTL
		}
		for i := 0; i < len(s.Events); {
			rev := s.Events[i].Kv.ModRevision
			j := i
			size := 0
			for j < len(s.Events) && s.Events[j].Kv.ModRevision == rev {
				size += len(s.Events[j].Kv.Key) + len(s.Events[j].Kv.Value)
				j++
			}
			group := s.Events[i:j]
			i = j
			if rev <= res.Last {
				continue // in the snapshot, or an overlapping segment (two recorders for a moment): applied already
			}
			if len(ops)+len(group) > replayBatch || batchBytes+size > replayBatchBytes {
				if err := commit(); err != nil {
					return err
				}
			}
			batchBytes += size
			for _, ev := range group {
				key := string(ev.Kv.Key)
				var op replayOp
				switch ev.Type {
				case mvccpb.PUT:
					if id := ev.Kv.Lease; id != 0 && les.Lookup(lease.LeaseID(id)) == nil {
						// Granted before the key is put (mvcc refuses a
						// key on an unknown lease).
						t := ttl[id]
						if t <= 0 {
							t = defaultLeaseTTL
						}
						if _, err := les.Grant(lease.LeaseID(id), t); err != nil {
							return fmt.Errorf("replay: grant lease %x again: %w", id, err)
						}
					}
					op = replayOp{key: ev.Kv.Key, value: ev.Kv.Value, lease: ev.Kv.Lease}
					final[key] = ev.Kv
				case mvccpb.DELETE:
					op = replayOp{key: ev.Kv.Key, del: true}
					final[key] = nil
				default:
					continue
				}
				if k, ok := inBatch[key]; ok {
					ops[k] = op // written again in this batch: the last write wins
				} else {
					inBatch[key] = len(ops)
					ops = append(ops, op)
				}
				res.Events++
			}
			res.Last = rev
		}
	}
	if err := commit(); err != nil {
		return err
	}
	res.Keys = len(final)
	return verifyReplay(ctx, kv, les, final)
}

// ErrReplayMismatch reports a replay whose read-back differs from what
// the deltas recorded.
var ErrReplayMismatch = errors.New("replayed data differs from the deltas")

// verifyReplay reads back every key the replay wrote and checks its value
// and its lease (attached, and existing) against the last recorded state.
func verifyReplay(ctx context.Context, kv mvcc.KV, les lease.Lessor, final map[string]*mvccpb.KeyValue) error {
	var wrong []string
	for k, want := range final {
		r, err := kv.Range(ctx, []byte(k), nil, mvcc.RangeOptions{})
		if err != nil {
			return fmt.Errorf("replay: read back %q: %w", k, err)
		}
		switch {
		case want == nil && len(r.KVs) != 0:
			wrong = append(wrong, fmt.Sprintf("%q present, deleted in the deltas", k))
		case want == nil:
		case len(r.KVs) != 1 && want.Lease != 0:
			wrong = append(wrong, fmt.Sprintf("%q missing (recorded on lease %x)", k, want.Lease))
		case len(r.KVs) != 1:
			wrong = append(wrong, fmt.Sprintf("%q missing", k))
		case r.KVs[0].Lease != want.Lease:
			wrong = append(wrong, fmt.Sprintf("%q on lease %x, recorded on lease %x", k, r.KVs[0].Lease, want.Lease))
		case want.Lease != 0 && les.Lookup(lease.LeaseID(want.Lease)) == nil:
			wrong = append(wrong, fmt.Sprintf("%q: its lease %x does not exist", k, want.Lease))
		case !bytes.Equal(r.KVs[0].Value, want.Value):
			wrong = append(wrong, fmt.Sprintf("%q differs from its last recorded value", k))
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("replay: %d keys not as recorded, e.g. %s: %w", len(wrong), wrong[0], ErrReplayMismatch)
	}
	return nil
}
