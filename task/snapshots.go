package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Snapshots configure the member's backups. Every member carries them;
// the leader decides when the scheduled one is due, and the save runs in
// the background, holding the snapshot lease, never the coordination lock
// (see startSnapshot), so the cluster uploads once per interval and the
// loop keeps supervising while it does.
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

// Bounds of the snapshot work.
const (
	// snapshotCheckEvery bounds how often the leader looks at the store.
	snapshotCheckEvery = time.Minute
	// snapshotTimeout bounds one save: streaming, compressing, uploading.
	snapshotTimeout = 30 * time.Minute
	// pruneTimeout bounds retention after a save.
	pruneTimeout = 5 * time.Minute
	// snapshotListTimeout bounds the listing that tells whether a
	// scheduled snapshot is due.
	snapshotListTimeout = time.Minute
	// snapshotLeaseFor is how long a lease is valid: longer than any save
	// and its retention, so a lease never expires under a running upload;
	// the lease of a member killed mid-upload blocks scheduled snapshots
	// that long at most.
	snapshotLeaseFor = snapshotTimeout + pruneTimeout + time.Minute
	// backgroundStopWait bounds how long a stopping member waits for its
	// cancelled upload to clean up (abort the upload, delete the object,
	// release the lease) before it stops etcd anyway.
	backgroundStopWait = 5 * time.Second
)

type snapshotMetrics struct {
	last     prometheus.Gauge
	revision prometheus.Gauge
	size     prometheus.Gauge
	duration prometheus.Gauge
	failures prometheus.Counter
	// Continuous backup: the last delta segment stored.
	deltaRevision prometheus.Gauge
	deltaLast     prometheus.Gauge
	// newest is the newest full snapshot in the store, as this member
	// last listed it or saved it (the leader lists it at every check);
	// deltaCaughtUp is when this member's recorder last held no change
	// unstored: time() minus it is the live RPO. The intervals say what
	// the alerts compare them with (0: off).
	newest        prometheus.Gauge
	deltaCaughtUp prometheus.Gauge
	interval      prometheus.Gauge
	deltaInterval prometheus.Gauge
}

func newSnapshotMetrics(reg *prometheus.Registry, labels prometheus.Labels, s *Snapshots) *snapshotMetrics {
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

		newest:        g("etcd_nomad_snapshot_newest_timestamp_seconds", "Creation time of the newest full snapshot in the store, as this member last listed or saved it (0: not yet known)."),
		deltaCaughtUp: g("etcd_nomad_delta_caught_up_timestamp_seconds", "When this member's continuous backup last had every change stored (time() minus it is the live RPO; 0: not recording here)."),
		interval:      g("etcd_nomad_snapshot_interval_seconds", "The scheduled full snapshots' interval (0: snapshots off)."),
		deltaInterval: g("etcd_nomad_delta_interval_seconds", "How often continuous backup flushes its changes (0: continuous backup off)."),
	}
	if s != nil {
		sm.interval.Set(s.Interval.Seconds())
		sm.deltaInterval.Set(max(s.DeltaEvery, 0).Seconds())
	}
	reg.MustRegister(sm.last, sm.revision, sm.size, sm.duration, sm.failures, sm.deltaRevision, sm.deltaLast,
		sm.newest, sm.deltaCaughtUp, sm.interval, sm.deltaInterval)
	return sm
}

// snapshotEndpoint is the client URL a snapshot of o's cluster is streamed
// from: this member's own server when it runs, else a healthy voter's.
func (m *Member) snapshotEndpoint(o planner.Observation) string {
	if o.Running {
		return m.clientURL(m.self)
	}
	for _, mem := range o.Members {
		if mem.Healthy && !mem.Learner && len(mem.PeerURLs) > 0 {
			return m.memberClientURL(mem)
		}
	}
	return ""
}

// saveSnapshot saves one snapshot streamed from ep and applies retention.
// It holds no lock: the background saves hold the snapshot lease.
func (m *Member) saveSnapshot(ctx context.Context, ep, why string) error {
	s := m.opts.Snapshots
	if s == nil {
		return nil
	}
	if ep == "" {
		return fmt.Errorf("snapshot (%s): no healthy member to read from", why)
	}
	src, lineage, err := m.snapshotSource()
	if err != nil {
		return fmt.Errorf("snapshot (%s): %w", why, err)
	}
	if err := os.MkdirAll(m.dir.Root, 0o700); err != nil {
		return fmt.Errorf("snapshot (%s): spool dir: %w", why, err)
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	// Streamed from ep alone (not the shared client, which balances over
	// every member) and spooled beside the member's data.
	meta, err := snapshot.Save(sctx, snapshot.From{Endpoint: ep, TLS: m.trust.PeerTLS(), SpoolDir: m.dir.Root}, s.Store, src, s.Encryption, nil)
	if err != nil {
		m.snapMetrics.failures.Inc()
		return fmt.Errorf("snapshot (%s): %w", why, err)
	}
	took := time.Since(start)
	m.snapMetrics.last.Set(float64(meta.Created.Unix()))
	m.snapMetrics.revision.Set(float64(meta.Revision))
	m.snapMetrics.size.Set(float64(meta.Size))
	m.snapMetrics.duration.Set(took.Seconds())
	m.snapMetrics.newest.Set(float64(meta.Created.Unix()))
	m.log.Info("snapshot saved", "why", why, "name", meta.Name, "revision", meta.Revision, "bytes", meta.Size, "took", took)
	m.wantFullSnapshot.Store(false) // a base for a new delta chain
	pctx, pcancel := context.WithTimeout(ctx, pruneTimeout)
	defer pcancel()
	removed, err := snapshot.Prune(pctx, s.Store, s.Encryption, lineage, s.RetainCount, s.RetainAge, time.Now())
	for _, name := range removed {
		m.log.Info("retention: removed", "name", name)
	}
	if err != nil {
		m.log.Warn("retention incomplete", "error", err)
	}
	return nil
}

// errRecordDisagrees: the cluster record names another incarnation than
// the one this member's data runs, so no snapshot is stamped and saved.
var errRecordDisagrees = errors.New("the cluster record and this member's data disagree")

// snapshotSource is what a snapshot this member saves is of, and the
// lineage its retention ranks: the epoch and cluster id this member's own
// data runs (its etcd-nomad.json), which the record must name too. The
// MAC vouches for what the member stamps: stamped from the Consul record
// alone, a Consul key writer who rewrote the record (another epoch or
// cluster id) would get genuine snapshots MACed as of an incarnation of
// its choosing. So while the record is not confirmed or names another
// incarnation than the local data (a recovery or restore under way, a
// record rewritten), the save is skipped with the reason: a member whose
// data is of the record's incarnation saves it.
func (m *Member) snapshotSource() (snapshot.Source, snapshot.Lineage, error) {
	m.mu.Lock()
	rec := m.record
	m.mu.Unlock()
	src := snapshot.Source{Cluster: m.opts.Cluster.Name}
	meta, err := m.dir.ReadMeta()
	if err != nil {
		return src, snapshot.Lineage{}, fmt.Errorf("read this member's metadata: %w", err)
	}
	switch {
	case rec == nil:
		return src, snapshot.Lineage{}, fmt.Errorf("%w: no cluster record", errRecordDisagrees)
	case rec.ClusterID == 0 || meta.ClusterID == 0:
		return src, snapshot.Lineage{}, fmt.Errorf("%w: not confirmed yet (record cluster id %x, data's %x)", errRecordDisagrees, rec.ClusterID, meta.ClusterID)
	case rec.Token != meta.Token || rec.Epoch != meta.Epoch || rec.ClusterID != meta.ClusterID:
		return src, snapshot.Lineage{}, fmt.Errorf("%w: the record names token %.8s epoch %d cluster id %x, this member's data token %.8s epoch %d cluster id %x",
			errRecordDisagrees, rec.Token, rec.Epoch, rec.ClusterID, meta.Token, meta.Epoch, meta.ClusterID)
	}
	src.Epoch, src.ClusterID = meta.Epoch, fmt.Sprintf("%x", meta.ClusterID)
	return src, snapshot.Lineage{ClusterID: meta.ClusterID, Epoch: meta.Epoch}, nil
}

// listLineage is listAuthentic without the snapshots of another
// incarnation than the record's (snapshot.Lineage.Of): what decides
// whether a save is due, the base of a delta chain, whether a snapshot
// before stopping is needed. A genuine snapshot of another incarnation
// put back (a higher epoch, ranked first by snapshot.Later) is never
// "the newest" there, so it neither makes every check due nor stands as
// the base the chain waits for.
func (m *Member) listLineage(ctx context.Context) ([]snapshot.Meta, error) {
	list, err := m.listAuthentic(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	rec := m.record
	m.mu.Unlock()
	if rec == nil {
		return list, nil
	}
	of, _ := snapshot.Lineage{ClusterID: rec.ClusterID, Epoch: rec.Epoch}.Split(list)
	return of, nil
}

// scheduledSnapshot carries out Upkeep.Snapshot (this member leads, the
// check is due): it starts the scheduled snapshot unless a save of this
// member runs. The listing, the lease and the upload run in the background
// (startSnapshot), so the loop keeps its pace during an upload of any
// length.
func (m *Member) scheduledSnapshot(o planner.Observation) {
	s := m.opts.Snapshots
	if s == nil {
		return
	}
	if m.startSnapshot(m.snapshotEndpoint(o), "scheduled", true) {
		m.nextSnapshotCheck = m.now().Add(min(snapshotCheckEvery, s.Interval/4))
	}
}

// startSnapshot starts a save from ep in the background unless one of this
// member's runs already; it reports whether it started one. A scheduled
// save first checks that the store's newest snapshot is older than the
// interval, and again once it holds the lease (another member's upload may
// have ended meanwhile).
//
// Exclusion without the coordination lock: the save holds the snapshot
// lease (takeSnapshotLease), a value in the coordinator that the lock
// guards only while it is read and written. So joins, promotions and
// removals never wait for an upload; a leader change during an upload
// does not start a second one (the new leader finds the lease held); a
// member stopped mid-upload cancels it (the store aborts on a fresh
// context) and releases the lease, which otherwise expires after
// snapshotLeaseFor. Two uploads at once would only waste work: snapshots
// are named by revision and time and each is complete or absent.
func (m *Member) startSnapshot(ep, why string, scheduled bool) bool {
	m.mu.Lock()
	if m.snapRunning || m.bgCtx.Err() != nil {
		m.mu.Unlock()
		return false
	}
	m.snapRunning = true
	ctx, cancel := context.WithCancel(m.bgCtx)
	m.snapCancel = cancel
	m.bg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.bg.Done()
		defer func() {
			cancel()
			m.mu.Lock()
			m.snapRunning, m.snapCancel = false, nil
			m.mu.Unlock()
		}()
		err := m.leasedSnapshot(ctx, ep, why, scheduled)
		if err != nil {
			m.log.Warn("snapshot failed", "why", why, "error", err)
		}
		m.mu.Lock()
		m.snapshotErr = ""
		if err != nil {
			m.snapshotErr = fmt.Sprintf("%s: %v", m.now().UTC().Format(time.RFC3339), err)
		}
		m.mu.Unlock()
	}()
	return true
}

func (m *Member) leasedSnapshot(ctx context.Context, ep, why string, scheduled bool) error {
	if scheduled {
		if due, err := m.snapshotDue(ctx); err != nil || !due {
			return err
		}
	}
	release, err := m.takeSnapshotLease(ctx)
	if errors.Is(err, errSnapshotLeaseHeld) {
		m.log.Debug("snapshot skipped", "why", why, "reason", err)
		return nil
	}
	if err != nil {
		return err
	}
	defer release()
	if scheduled {
		if due, err := m.snapshotDue(ctx); err != nil || !due {
			return err
		}
	}
	return m.saveSnapshot(ctx, ep, why)
}

// snapshotDue reports whether the store's newest snapshot is older than
// the interval.
func (m *Member) snapshotDue(ctx context.Context) (bool, error) {
	s := m.opts.Snapshots
	lctx, cancel := context.WithTimeout(ctx, snapshotListTimeout)
	defer cancel()
	list, err := m.listLineage(lctx)
	if err != nil {
		m.snapMetrics.failures.Inc()
		return false, fmt.Errorf("snapshot store unavailable: %w", err)
	}
	full, _, _, ok := snapshot.Newest(list)
	if ok {
		m.snapMetrics.newest.Set(float64(full.Created.Unix()))
	}
	if m.wantFullSnapshot.Load() {
		return true, nil // a new delta chain needs a full snapshot of this incarnation now
	}
	if msg := snapshot.ClockDisagrees(list); msg != "" {
		m.log.Warn("a member's clock is off: snapshots are ordered by their epoch and revision, never by the time their takers wrote on them", "detail", msg)
	}
	return !ok || time.Since(full.Created) >= s.Interval, nil
}

// snapshotLeaseKey names the coordinator value that says which member
// saves a snapshot now.
const snapshotLeaseKey = "snapshot-lease"

// snapshotLease is the value under snapshotLeaseKey. An empty Holder, or
// an Until in the past, is a free lease.
type snapshotLease struct {
	Holder string    `json:"holder"`
	Until  time.Time `json:"until"`
}

// errSnapshotLeaseHeld: another member holds the snapshot lease.
var errSnapshotLeaseHeld = errors.New("another member is saving a snapshot")

// valueStore is implemented by coordinators that can overwrite a value
// their Load reads (the snapshot lease).
type valueStore interface {
	Store(ctx context.Context, key string, value []byte) error
}

// takeSnapshotLease takes the snapshot lease for this member, holding the
// coordination lock only while it reads and writes the lease. The returned
// release frees it. A coordinator that cannot store values gives no
// lease: the save goes ahead (at worst one duplicate upload).
func (m *Member) takeSnapshotLease(ctx context.Context) (release func(), err error) {
	vs, ok := m.opts.Coordinator.(valueStore)
	if !ok {
		return func() {}, nil
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := m.opts.Coordinator.Lock(lctx, m.opts.Name)
	if err != nil {
		return nil, fmt.Errorf("snapshot lease: lock: %w", err)
	}
	defer l.Unlock(context.WithoutCancel(ctx))
	held, err := m.loadSnapshotLease(lctx)
	if err != nil {
		return nil, err
	}
	if held.Holder != "" && held.Holder != m.opts.Name && time.Now().Before(held.Until) {
		return nil, fmt.Errorf("%w: %s, until %s", errSnapshotLeaseHeld, held.Holder, held.Until.Format(time.RFC3339))
	}
	if err := m.storeSnapshotLease(lctx, vs, snapshotLease{Holder: m.opts.Name, Until: time.Now().Add(snapshotLeaseFor)}); err != nil {
		return nil, err
	}
	return func() { m.releaseSnapshotLease(ctx, vs) }, nil
}

// releaseSnapshotLease frees this member's lease, on a fresh short
// context (ctx may be the cancelled upload's). It takes no lock: the lease
// cannot have passed to another member while this one's was valid.
func (m *Member) releaseSnapshotLease(ctx context.Context, vs valueStore) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	held, err := m.loadSnapshotLease(rctx)
	if err == nil && held.Holder == m.opts.Name {
		err = m.storeSnapshotLease(rctx, vs, snapshotLease{})
	}
	if err != nil {
		m.log.Warn("snapshot lease not released; it expires on its own", "error", err, "after", snapshotLeaseFor)
	}
}

func (m *Member) loadSnapshotLease(ctx context.Context) (snapshotLease, error) {
	var l snapshotLease
	b, err := m.opts.Coordinator.Load(ctx, snapshotLeaseKey)
	if errors.Is(err, coord.ErrNotStored) {
		return l, nil
	}
	if err != nil {
		return l, fmt.Errorf("snapshot lease: %w", err)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		// A damaged lease is overwritten rather than blocking backups.
		m.log.Warn("snapshot lease unreadable; taking it", "error", err)
		return snapshotLease{}, nil
	}
	return l, nil
}

func (m *Member) storeSnapshotLease(ctx context.Context, vs valueStore, l snapshotLease) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if err := vs.Store(ctx, snapshotLeaseKey, b); err != nil {
		return fmt.Errorf("snapshot lease: %w", err)
	}
	return nil
}

// stopBackground cancels this member's background save and waits for it
// to clean up, at most backgroundStopWait. Safe to call more than once.
func (m *Member) stopBackground() {
	m.mu.Lock()
	m.bgCancel()
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.bg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(backgroundStopWait):
		m.log.Warn("a cancelled snapshot is still cleaning up; stopping anyway", "waited", backgroundStopWait)
	}
}

// listAuthentic lists the snapshot store and keeps the objects whose
// metadata authenticates (snapshot.Encryption.Authentic): what the member
// chooses from a listing (the newest snapshot a recovery starts from, the
// chain end the planner compares, the base of a delta chain, whether a
// save is due) is never a forged or unauthenticated object, so a forged
// segment ends the observed chain as a damaged one does and a forged
// snapshot never wedges a recovery. Each refused object is logged once,
// by name; an unauthenticated one (written before this version) is only
// restored by an operator, by name: etcd-nomad recover -from
// snapshot:NAME -accept-unauthenticated (its deltas with
// -accept-unauthenticated-deltas).
func (m *Member) listAuthentic(ctx context.Context) ([]snapshot.Meta, error) {
	kept, _, err := m.listSplit(ctx)
	return kept, err
}

// refusedObject is an object of the store listAuthentic refused: its
// metadata as listed (unauthenticated: nothing in it is vouched for) and
// why.
type refusedObject struct {
	meta snapshot.Meta
	why  error
}

// listSplit is listAuthentic with the objects it refused.
func (m *Member) listSplit(ctx context.Context) ([]snapshot.Meta, []refusedObject, error) {
	s := m.opts.Snapshots
	list, err := s.Store.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	kept, refused := s.Encryption.Authentic(list)
	m.refusedMu.Lock()
	defer m.refusedMu.Unlock()
	// Rebuilt from each listing, not only added to: names a store writer
	// planted and removed again would otherwise stay for the life of the
	// process. A name still listed keeps its entry (warnForeignOnce's
	// too), so each is logged once while it stays.
	next := make(map[string]bool, len(refused))
	for _, meta := range list {
		if m.refusedSnapshots[meta.Name] {
			next[meta.Name] = true
		}
	}
	var out []refusedObject
	for _, meta := range list {
		err, ok := refused[meta.Name]
		if !ok {
			continue
		}
		out = append(out, refusedObject{meta: meta, why: err})
		if !next[meta.Name] {
			next[meta.Name] = true
			if meta.Corrupt != "" {
				m.log.Warn("snapshot store: object with corrupt metadata refused, never restored automatically nor deleted by retention: nothing restores it without its metadata; an operator puts its metadata back or deletes it", "snapshot", meta.Name, "error", err)
				continue
			}
			m.log.Warn("snapshot store: object refused, never restored automatically nor deleted by retention: an operator restores it by name (recover -from snapshot:NAME -accept-unauthenticated; a delta with -accept-unauthenticated-deltas) or deletes it", "snapshot", meta.Name, "error", err)
		}
	}
	m.refusedSnapshots = next
	return kept, out, nil
}

// revisionBump is how far a recovery from meta bumps revisions: derived
// from the write rate the store's listing shows and the snapshot's age
// (snapshot.RevisionBump). Without a listing the assumed rate stands in.
func (m *Member) revisionBump(ctx context.Context, meta snapshot.Meta) uint64 {
	var history []snapshot.Meta
	if s := m.opts.Snapshots; s != nil {
		list, err := m.listAuthentic(ctx)
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
