package task

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Snapshots configure the member's backups. Every member carries them;
// the leader takes the scheduled ones, under the lock, after checking the
// store, so the cluster uploads once per interval.
type Snapshots struct {
	Store       snapshot.Store
	Encryption  snapshot.Encryption
	Interval    time.Duration
	RetainCount int
	RetainAge   time.Duration
	// DeltaEvery, when positive, turns continuous backup on: the leader
	// records every change after the newest full snapshot into delta
	// segments flushed this often (superviseDeltas).
	DeltaEvery time.Duration
}

// snapshotCheckEvery bounds how often the leader looks at the store.
const snapshotCheckEvery = time.Minute

type snapshotMetrics struct {
	last     prometheus.Gauge
	revision prometheus.Gauge
	size     prometheus.Gauge
	duration prometheus.Gauge
	failures prometheus.Counter
	// Continuous backup: the last delta segment stored.
	deltaRevision prometheus.Gauge
	deltaLast     prometheus.Gauge
}

func newSnapshotMetrics(reg *prometheus.Registry, labels prometheus.Labels) *snapshotMetrics {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels})
	}
	sm := &snapshotMetrics{
		last:     g("etcd_nomad_snapshot_last_timestamp_seconds", "Time of the last snapshot this member saved."),
		revision: g("etcd_nomad_snapshot_last_revision", "Revision of the last snapshot this member saved."),
		size:     g("etcd_nomad_snapshot_last_size_bytes", "Plaintext size of the last snapshot this member saved."),
		duration: g("etcd_nomad_snapshot_last_duration_seconds", "How long the last snapshot took."),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "etcd_nomad_snapshot_failures_total", Help: "Snapshots that failed.", ConstLabels: labels}),

		deltaRevision: g("etcd_nomad_delta_last_revision", "Last revision of the last delta segment this member stored (continuous backup)."),
		deltaLast:     g("etcd_nomad_delta_last_timestamp_seconds", "Time of the last delta segment this member stored."),
	}
	reg.MustRegister(sm.last, sm.revision, sm.size, sm.duration, sm.failures, sm.deltaRevision, sm.deltaLast)
	return sm
}

// saveSnapshot saves one snapshot, from this member's own server when it
// runs, else from a healthy member of o, and applies retention. The caller
// holds the lock when it matters.
func (m *Member) saveSnapshot(ctx context.Context, o planner.Observation, why string) error {
	s := m.opts.Snapshots
	if s == nil {
		return nil
	}
	m.mu.Lock()
	rec := m.record
	m.mu.Unlock()
	ep := ""
	if o.Running {
		ep = m.clientURL(m.self)
	} else {
		for _, mem := range o.Members {
			if mem.Healthy && !mem.Learner && len(mem.PeerURLs) > 0 {
				ep = m.memberClientURL(mem)
				break
			}
		}
	}
	if ep == "" {
		return fmt.Errorf("snapshot (%s): no healthy member to read from", why)
	}
	src := snapshot.Source{Cluster: m.opts.Cluster.Name}
	if rec != nil {
		src.Epoch, src.ClusterID = rec.Epoch, fmt.Sprintf("%x", rec.ClusterID)
	}
	if err := os.MkdirAll(m.dir.root, 0o700); err != nil {
		return fmt.Errorf("snapshot (%s): spool dir: %w", why, err)
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	// Streamed from ep alone (not the shared client, which balances over
	// every member) and spooled beside the member's data.
	meta, err := snapshot.Save(sctx, snapshot.From{Endpoint: ep, TLS: m.peerTLS, SpoolDir: m.dir.root}, s.Store, src, s.Encryption, nil)
	if err != nil {
		m.snapMetrics.failures.Inc()
		return fmt.Errorf("snapshot (%s): %w", why, err)
	}
	took := time.Since(start)
	m.snapMetrics.last.Set(float64(meta.Created.Unix()))
	m.snapMetrics.revision.Set(float64(meta.Revision))
	m.snapMetrics.size.Set(float64(meta.Size))
	m.snapMetrics.duration.Set(took.Seconds())
	m.log.Info("snapshot saved", "why", why, "name", meta.Name, "revision", meta.Revision, "bytes", meta.Size, "took", took)
	removed, err := snapshot.Prune(ctx, s.Store, s.RetainCount, s.RetainAge, time.Now())
	for _, name := range removed {
		m.log.Info("retention: removed", "name", name)
	}
	if err != nil {
		m.log.Warn("retention incomplete", "error", err)
	}
	return nil
}

// maybeSnapshot takes the scheduled snapshot when this member leads and
// the store's newest snapshot is older than the interval.
func (m *Member) maybeSnapshot(ctx context.Context, o planner.Observation) {
	s := m.opts.Snapshots
	if s == nil || s.Interval <= 0 || !o.Running || !o.MembersKnown || o.LeaderID != o.SelfID || time.Now().Before(m.nextSnapshotCheck) {
		return
	}
	m.nextSnapshotCheck = time.Now().Add(min(snapshotCheckEvery, s.Interval/4))
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	l, err := m.opts.Coordinator.Lock(lctx, m.opts.Name)
	cancel()
	if err != nil {
		return
	}
	defer l.Unlock(context.Background())
	list, err := s.Store.List(ctx)
	if err != nil {
		m.log.Warn("snapshot store unavailable", "error", err)
		m.snapMetrics.failures.Inc()
		return
	}
	if full, _, _, ok := snapshot.Newest(list); ok && time.Since(full.Created) < s.Interval && !m.snapshotDue {
		return
	}
	why := "scheduled"
	if m.snapshotDue {
		why = "a new delta chain"
	}
	if err := m.saveSnapshot(ctx, o, why); err != nil {
		m.log.Warn("scheduled snapshot failed", "error", err)
		return
	}
	m.snapshotDue = false
}

// revisionBump is how far a recovery from meta bumps revisions: derived
// from the write rate the store's listing shows and the snapshot's age
// (snapshot.RevisionBump). Without a listing the assumed rate stands in.
func (m *Member) revisionBump(ctx context.Context, meta snapshot.Meta) uint64 {
	var history []snapshot.Meta
	if s := m.opts.Snapshots; s != nil {
		list, err := s.Store.List(ctx)
		if err != nil {
			m.log.Warn("revision bump: snapshot store unavailable; assuming the default write rate", "error", err, "rate", snapshot.AssumedWriteRate)
		}
		history = list
	}
	bump := snapshot.RevisionBump(meta, history, time.Now())
	rate, measured := snapshot.WriteRate(history)
	m.log.Info("revision bump", "snapshot", meta.Name, "revision", meta.Revision, "age", time.Since(meta.Created).Round(time.Second), "rate", rate, "measured", measured, "bump", bump)
	return bump
}
