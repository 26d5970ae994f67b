package backup

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// deltaRetry is how long after a failed or refused start the leader tries
// to start recording again.
const deltaRetry = 10 * time.Second

// deltaRun is the continuous backup running on this member.
type deltaRun struct {
	base string
	// source is what every segment is stamped with (the base's epoch
	// and cluster id, which this member's data ran when it started).
	source snapshot.Source
	cancel context.CancelFunc
	done   chan error
}

// SuperviseDeltas keeps the continuous backup running on the etcd leader
// (one recorder per cluster, where the writes are ordered): it starts a
// snapshot.Recorder after the chain of the newest full snapshot of the
// running incarnation (among the record's lineage's, ofLineage), stops it
// when this member stops leading, and when the chain broke (compacted
// away, or the store refused too long) asks for a full snapshot now,
// which starts a new chain. A recorder still running on a former leader
// for a moment writes segments that overlap the new leader's; a chain
// skips what it already covers (snapshot.Chain). record
// (SideJobs.RecordDeltas) says whether it runs here.
//
// Segments are MACed with the base's stamp, so a recorder runs only while
// that stamp is what this member's own data runs and the record names too
// (snapshotSource, as for a full save): taken from the Consul record
// alone, a Consul key writer who rewrote the record's cluster id to that
// of another incarnation's genuine snapshot put back in the store got the
// running cluster's writes MACed as deltas of it. A running recorder is
// stopped, logged, as soon as the two disagree (a record rewritten, a
// recovery under way).
func (b *Backups) SuperviseDeltas(ctx context.Context, record bool) {
	s := b.cfg.Snapshots
	if s == nil || s.DeltaEvery <= 0 {
		return
	}
	if r := b.deltas; r != nil {
		select {
		case err := <-r.done:
			b.deltas = nil
			b.nextDeltaStart = b.now().Add(deltaRetry)
			if errors.Is(err, snapshot.ErrChainGap) {
				b.wantFullSnapshot.Store(true)
				b.log.Warn("continuous backup: the delta chain broke; a full snapshot starts a new one", "base", r.base, "error", err)
			} else {
				b.log.Warn("continuous backup stopped", "base", r.base, "error", err)
			}
		default:
		}
	}
	if r := b.deltas; r != nil {
		if !record || b.wantFullSnapshot.Load() {
			b.StopDeltas(false)
			return
		}
		if src, _, err := b.snapshotSource(); err != nil || src != r.source {
			b.log.Warn("continuous backup: stopping: its segments are stamped as of another incarnation than the one this member's data runs and the record names",
				"base", r.base, "stamp_epoch", r.source.Epoch, "stamp_cluster_id", r.source.ClusterID, "now", src, "error", err)
			b.StopDeltas(false)
			b.nextDeltaStart = b.now().Add(deltaRetry)
		}
		return
	}
	if !record || b.wantFullSnapshot.Load() || b.now().Before(b.nextDeltaStart) {
		return
	}
	b.nextDeltaStart = b.now().Add(deltaRetry)
	src, of, err := b.snapshotSource()
	if err != nil {
		b.log.Debug("continuous backup: not starting", "reason", err)
		return
	}
	list, err := b.listLineage(ctx)
	if err != nil {
		b.log.Warn("continuous backup: snapshot store unavailable", "error", err)
		return
	}
	// The base is the newest snapshot of the lineage this member's data
	// runs (which the record names too): a genuine snapshot of another
	// incarnation put back in the store (a higher epoch) is never one, or
	// no chain would ever start again.
	lineage := make([]snapshot.Meta, 0, len(list))
	for _, meta := range list {
		if meta.Kind != snapshot.KindFull || of.Of(meta) {
			lineage = append(lineage, meta)
		}
	}
	full, _, end, ok := snapshot.Newest(lineage)
	if !ok || full.Epoch != src.Epoch || full.ClusterID != src.ClusterID {
		// No full snapshot of this incarnation yet: the scheduled one
		// comes first (at once when the store has none), then the chain.
		b.wantFullSnapshot.Store(len(snapshot.Full(list)) > 0)
		return
	}
	if _, gap := snapshot.Chain(list, full); gap {
		b.wantFullSnapshot.Store(true)
		return
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{b.cfg.Self}, TLS: b.cfg.TLS, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.log.Warn("continuous backup: client", "error", err)
		return
	}
	rctx, cancel := context.WithCancel(context.Background())
	run := &deltaRun{base: full.Name, source: src, cancel: cancel, done: make(chan error, 1)}
	memberID := b.cfg.MemberID()
	r := &snapshot.Recorder{
		Client: cli, Store: s.Store, Encryption: s.Encryption,
		Source: src,
		Base:   full, From: end + 1, FlushEvery: s.DeltaEvery,
		// Each segment names this member, which leads: a member about
		// to recover asks it whether it still serves (sim seeds 71 and
		// 172 with CollectRunning).
		Endpoint: b.cfg.Self, MemberID: memberID,
		OnFlush: func(d snapshot.Meta) {
			b.snapMetrics.deltaRevision.Set(float64(d.Revision))
			b.snapMetrics.deltaLast.Set(float64(d.Created.Unix()))
		},
		OnCaughtUp: func(at time.Time) { b.snapMetrics.deltaCaughtUp.Set(float64(at.Unix())) },
	}
	go func() {
		err := r.Run(rctx)
		cli.Close()
		run.done <- err
	}()
	b.deltas = run
	b.log.Info("continuous backup started", "base", full.Name, "from_revision", end+1, "flush_every", s.DeltaEvery)
}

// StopDeltas stops the recorder, which flushes what it holds on its own
// bounded context (at most 30 s): waited for on shutdown, not by the loop
// (a former leader's last segment overlaps the next one's, harmlessly).
func (b *Backups) StopDeltas(wait bool) {
	r := b.deltas
	if r == nil {
		return
	}
	b.deltas = nil
	r.cancel()
	if !wait {
		go func() { b.log.Info("continuous backup stopped", "base", r.base, "error", <-r.done) }()
		return
	}
	b.log.Info("continuous backup stopped", "base", r.base, "error", <-r.done)
}
