package snapshot

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Recorder defaults.
const (
	DefaultDeltaFlushEvery = 5 * time.Second
	DefaultDeltaFlushBytes = 8 << 20
	// deltaBufferLimit bounds what a recorder holds while the store
	// refuses its flushes: beyond it the recorder gives up (the chain
	// has a gap from then on and a new full snapshot must start one).
	deltaBufferLimit = 8
	// defaultLeaseTTL stands in for a lease's granted TTL when the lease
	// is gone by the time the recorder asks (its keys' deletions follow
	// in the watch).
	defaultLeaseTTL = 60
)

// Recorder records every change after a full snapshot into delta
// segments: a watch over the whole keyspace from From, flushed to the
// store every FlushEvery or FlushBytes, each segment encoded like a full
// snapshot (zstd, age, sha256 of the plaintext) and chained to Base by
// its revision range. It runs until ctx ends or the chain breaks
// (ErrChainGap: the revisions it needed were compacted away, or the
// store refused too much for too long); a new full snapshot then starts
// a new chain.
type Recorder struct {
	Client     *clientv3.Client
	Store      Store
	Encryption Encryption
	Source     Source
	// Base is the full snapshot the chain starts from.
	Base Meta
	// From is the first revision to record: Base.Revision+1, or the
	// revision after the last delta already stored for Base.
	From       int64
	FlushEvery time.Duration
	FlushBytes int
	// OnFlush, optional, is told of every stored segment.
	OnFlush func(Meta)
	// OnCaughtUp, optional, is told when every change the recorder saw
	// is stored: after each flush, and at each FlushEvery tick with
	// nothing pending (an idle cluster loses nothing). The time since it
	// was last called is the live recovery point objective.
	OnCaughtUp func(time.Time)
	// Now, optional, is the clock (names and metadata times).
	Now func() time.Time
	// Endpoint and MemberID, optional, name the member whose recorder
	// writes the segments (the leader, whose server Client reaches):
	// each segment's metadata carries them, as a full snapshot's names
	// the member it was streamed from. A member about to recover asks
	// it whether it still serves (task's observeKnownHealthy): the
	// newest segment names the leader of a few seconds ago.
	Endpoint string
	MemberID string

	leases  map[int64]bool
	pending Segment
	bytes   int
	next    int64 // first revision the pending segment covers
}

// Run records until ctx ends (it then flushes what it holds, on a fresh
// bounded context, and returns ctx's error) or the chain breaks.
func (r *Recorder) Run(ctx context.Context) error {
	if r.Base.Name == "" || r.Base.Kind != KindFull || r.From <= 0 {
		return errors.New("delta recorder: a full snapshot and a first revision are required")
	}
	every, limit := r.FlushEvery, r.FlushBytes
	if every <= 0 {
		every = DefaultDeltaFlushEvery
	}
	if limit <= 0 {
		limit = DefaultDeltaFlushBytes
	}
	r.leases, r.next = map[int64]bool{}, r.From
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := r.Client.Watch(wctx, "", clientv3.WithPrefix(), clientv3.WithRev(r.From))
	tick := time.NewTicker(every)
	defer tick.Stop()
	final := func(err error) error {
		cctx, ccancel := CleanupContext(ctx)
		defer ccancel()
		return errors.Join(err, r.flush(cctx))
	}
	for {
		select {
		case <-ctx.Done():
			return final(ctx.Err())
		case <-tick.C:
			if err := r.flushOrHold(ctx, limit); err != nil {
				return err
			}
			r.caughtUp()
		case resp, ok := <-wch:
			if !ok {
				return final(fmt.Errorf("delta recorder: watch closed: %w", ctx.Err()))
			}
			if resp.CompactRevision != 0 {
				return final(fmt.Errorf("%w: revisions up to %d were compacted before they were recorded (next to record: %d)", ErrChainGap, resp.CompactRevision, r.next+int64(len(r.pending.Events))))
			}
			if err := resp.Err(); err != nil {
				return final(fmt.Errorf("delta recorder: watch: %w", err))
			}
			for _, ev := range resp.Events {
				r.add(ctx, ev)
			}
			if r.bytes >= limit {
				if err := r.flushOrHold(ctx, limit); err != nil {
					return err
				}
				r.caughtUp()
			}
		}
	}
}

// caughtUp tells OnCaughtUp when nothing is pending.
func (r *Recorder) caughtUp() {
	if r.OnCaughtUp == nil || len(r.pending.Events) > 0 {
		return
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	r.OnCaughtUp(now())
}

// add appends one event, asking for the TTL of a lease not seen before.
func (r *Recorder) add(ctx context.Context, ev *clientv3.Event) {
	e := (*mvccpb.Event)(ev)
	if id := e.Kv.Lease; e.Type == mvccpb.PUT && id != 0 && !r.leases[id] {
		r.leases[id] = true
		ttl := int64(defaultLeaseTTL)
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if resp, err := r.Client.TimeToLive(lctx, clientv3.LeaseID(id)); err == nil && resp.GrantedTTL > 0 {
			ttl = resp.GrantedTTL
		}
		cancel()
		r.pending.Leases = append(r.pending.Leases, Lease{ID: id, TTL: ttl})
	}
	r.pending.Events = append(r.pending.Events, e)
	r.bytes += len(e.Kv.Key) + len(e.Kv.Value) + 32
}

// flushOrHold flushes; a failure keeps the events for the next attempt
// until they pass deltaBufferLimit flushes' worth.
func (r *Recorder) flushOrHold(ctx context.Context, limit int) error {
	err := r.flush(ctx)
	if err != nil && r.bytes > deltaBufferLimit*limit {
		return fmt.Errorf("%w: the store refused %d bytes of changes: %w", ErrChainGap, r.bytes, err)
	}
	return nil
}

// flush stores the pending events as one segment. Events of one revision
// (one transaction) are never split: a watch response carries a
// revision's events together and flush runs between responses.
func (r *Recorder) flush(ctx context.Context) error {
	if len(r.pending.Events) == 0 {
		return nil
	}
	plain, err := r.pending.Marshal()
	if err != nil {
		return err
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	created := now().UTC()
	m := Meta{
		Cluster: r.Source.Cluster, ClusterID: r.Source.ClusterID, Epoch: r.Source.Epoch,
		Kind: KindDelta, Base: r.Base.Name, FirstRevision: r.next, Revision: r.pending.Last(),
		Events: len(r.pending.Events), Created: created, Encrypted: r.Encryption.Enabled(), Codec: Codec,
		EtcdVersion: r.Base.EtcdVersion, Endpoint: r.Endpoint, MemberID: r.MemberID,
	}
	m.Name = DeltaName(m.Cluster, m.Epoch, m.Revision, created, m.Encrypted)
	tail, stored, err := upload(ctx, r.Store, m.Name, bytes.NewReader(plain), r.Encryption)
	if err != nil {
		return fmt.Errorf("delta %s: %w", m.Name, err)
	}
	m.Size, m.SHA256, m.StoredSize = tail.n, hex.EncodeToString(tail.sum()), stored
	m = r.Encryption.sign(m)
	if err := putMeta(ctx, r.Store, m); err != nil {
		return fmt.Errorf("delta %s: %w", m.Name, err)
	}
	r.next = m.Revision + 1
	r.pending, r.bytes = Segment{}, 0
	if r.OnFlush != nil {
		r.OnFlush(m)
	}
	return nil
}
