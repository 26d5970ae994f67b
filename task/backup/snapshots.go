package backup

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
// (see Start), so the cluster uploads once per interval and the
// loop keeps supervising while it does.
type Snapshots struct {
	Store       snapshot.Store
	Encryption  snapshot.Encryption
	Interval    time.Duration
	RetainCount int
	RetainAge   time.Duration
	// DeltaEvery, when positive, turns continuous backup on: the leader
	// records every change after the newest full snapshot into delta
	// segments flushed this often (SuperviseDeltas).
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

func newSnapshotMetrics(reg prometheus.Registerer, labels prometheus.Labels, s *Snapshots) *snapshotMetrics {
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

// Save saves one snapshot streamed from ep and applies retention.
// It holds no lock: the background saves hold the snapshot lease.
func (b *Backups) Save(ctx context.Context, ep, why string) error {
	s := b.cfg.Snapshots
	if s == nil {
		return nil
	}
	if ep == "" {
		return fmt.Errorf("snapshot (%s): no healthy member to read from", why)
	}
	src, lineage, err := b.snapshotSource()
	if err != nil {
		return fmt.Errorf("snapshot (%s): %w", why, err)
	}
	if err := os.MkdirAll(b.dir.Root, 0o700); err != nil {
		return fmt.Errorf("snapshot (%s): spool dir: %w", why, err)
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	// Streamed from ep alone (not the shared client, which balances over
	// every member) and spooled beside the member's data.
	meta, err := snapshot.Save(sctx, snapshot.From{Endpoint: ep, TLS: b.cfg.TLS, SpoolDir: b.dir.Root}, s.Store, src, s.Encryption, nil)
	if err != nil {
		b.snapMetrics.failures.Inc()
		return fmt.Errorf("snapshot (%s): %w", why, err)
	}
	took := time.Since(start)
	b.snapMetrics.last.Set(float64(meta.Created.Unix()))
	b.snapMetrics.revision.Set(float64(meta.Revision))
	b.snapMetrics.size.Set(float64(meta.Size))
	b.snapMetrics.duration.Set(took.Seconds())
	b.snapMetrics.newest.Set(float64(meta.Created.Unix()))
	b.log.Info("snapshot saved", "why", why, "name", meta.Name, "revision", meta.Revision, "bytes", meta.Size, "took", took)
	b.wantFullSnapshot.Store(false) // a base for a new delta chain
	pctx, pcancel := context.WithTimeout(ctx, pruneTimeout)
	defer pcancel()
	removed, err := snapshot.Prune(pctx, s.Store, s.Encryption, lineage, s.RetainCount, s.RetainAge, time.Now())
	for _, name := range removed {
		b.log.Info("retention: removed", "name", name)
	}
	if err != nil {
		b.log.Warn("retention incomplete", "error", err)
	}
	return nil
}

// ErrRecordDisagrees: the cluster record names another incarnation than
// the one this member's data runs, so no snapshot is stamped and saved.
var ErrRecordDisagrees = errors.New("the cluster record and this member's data disagree")

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
func (b *Backups) snapshotSource() (snapshot.Source, snapshot.Lineage, error) {
	rec := b.cfg.Record()
	src := snapshot.Source{Cluster: b.cfg.Cluster}
	meta, err := b.dir.ReadMeta()
	if err != nil {
		return src, snapshot.Lineage{}, fmt.Errorf("read this member's metadata: %w", err)
	}
	switch {
	case rec == nil:
		return src, snapshot.Lineage{}, fmt.Errorf("%w: no cluster record", ErrRecordDisagrees)
	case rec.ClusterID == 0 || meta.ClusterID == 0:
		return src, snapshot.Lineage{}, fmt.Errorf("%w: not confirmed yet (record cluster id %x, data's %x)", ErrRecordDisagrees, rec.ClusterID, meta.ClusterID)
	case rec.Token != meta.Token || rec.Epoch != meta.Epoch || rec.ClusterID != meta.ClusterID:
		return src, snapshot.Lineage{}, fmt.Errorf("%w: the record names token %.8s epoch %d cluster id %x, this member's data token %.8s epoch %d cluster id %x",
			ErrRecordDisagrees, rec.Token, rec.Epoch, rec.ClusterID, meta.Token, meta.Epoch, meta.ClusterID)
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
func (b *Backups) listLineage(ctx context.Context) ([]snapshot.Meta, error) {
	list, err := b.listAuthentic(ctx)
	if err != nil {
		return nil, err
	}
	rec := b.cfg.Record()
	if rec == nil {
		return list, nil
	}
	of, _ := snapshot.Lineage{ClusterID: rec.ClusterID, Epoch: rec.Epoch}.Split(list)
	return of, nil
}

// Scheduled carries out SideJobs.Snapshot (this member leads, the
// check is due): it starts the scheduled snapshot unless a save of this
// member runs. The listing, the lease and the upload run in the background
// (Start), so the loop keeps its pace during an upload of any
// length.
func (b *Backups) Scheduled(o planner.Observation) {
	s := b.cfg.Snapshots
	if s == nil {
		return
	}
	if b.Start(b.cfg.Endpoint(o), "scheduled", true) {
		b.nextSnapshotCheck = b.now().Add(min(snapshotCheckEvery, s.Interval/4))
	}
}

// Start starts a save from ep in the background unless one of this
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
func (b *Backups) Start(ep, why string, scheduled bool) bool {
	b.mu.Lock()
	if b.snapRunning || b.backgroundCtx.Err() != nil {
		b.mu.Unlock()
		return false
	}
	b.snapRunning = true
	ctx, cancel := context.WithCancel(b.backgroundCtx)
	b.snapCancel = cancel
	b.background.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.background.Done()
		defer func() {
			cancel()
			b.mu.Lock()
			b.snapRunning, b.snapCancel = false, nil
			b.mu.Unlock()
		}()
		err := b.leasedSnapshot(ctx, ep, why, scheduled)
		if err != nil {
			b.log.Warn("snapshot failed", "why", why, "error", err)
		}
		b.mu.Lock()
		b.snapshotErr = ""
		if err != nil {
			b.snapshotErr = fmt.Sprintf("%s: %v", b.now().UTC().Format(time.RFC3339), err)
		}
		b.mu.Unlock()
	}()
	return true
}

func (b *Backups) leasedSnapshot(ctx context.Context, ep, why string, scheduled bool) error {
	if scheduled {
		if due, err := b.snapshotDue(ctx); err != nil || !due {
			return err
		}
	}
	release, err := b.takeSnapshotLease(ctx)
	if errors.Is(err, errSnapshotLeaseHeld) {
		b.log.Debug("snapshot skipped", "why", why, "reason", err)
		return nil
	}
	if err != nil {
		return err
	}
	defer release()
	if scheduled {
		if due, err := b.snapshotDue(ctx); err != nil || !due {
			return err
		}
	}
	return b.Save(ctx, ep, why)
}

// snapshotDue reports whether the store's newest snapshot is older than
// the interval.
func (b *Backups) snapshotDue(ctx context.Context) (bool, error) {
	s := b.cfg.Snapshots
	lctx, cancel := context.WithTimeout(ctx, snapshotListTimeout)
	defer cancel()
	list, err := b.listLineage(lctx)
	if err != nil {
		b.snapMetrics.failures.Inc()
		return false, fmt.Errorf("snapshot store unavailable: %w", err)
	}
	full, _, _, ok := snapshot.Newest(list)
	if ok {
		b.snapMetrics.newest.Set(float64(full.Created.Unix()))
	}
	if b.wantFullSnapshot.Load() {
		return true, nil // a new delta chain needs a full snapshot of this incarnation now
	}
	if msg := snapshot.ClockDisagrees(list); msg != "" {
		b.log.Warn("a member's clock is off: snapshots are ordered by their epoch and revision, never by the time their takers wrote on them", "detail", msg)
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
func (b *Backups) takeSnapshotLease(ctx context.Context) (release func(), err error) {
	vs, ok := b.cfg.Coordinator.(valueStore)
	if !ok {
		return func() {}, nil
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := b.cfg.Coordinator.Lock(lctx, b.cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("snapshot lease: lock: %w", err)
	}
	defer l.Unlock(context.WithoutCancel(ctx))
	held, err := b.loadSnapshotLease(lctx)
	if err != nil {
		return nil, err
	}
	if held.Holder != "" && held.Holder != b.cfg.Name && time.Now().Before(held.Until) {
		return nil, fmt.Errorf("%w: %s, until %s", errSnapshotLeaseHeld, held.Holder, held.Until.Format(time.RFC3339))
	}
	if err := b.storeSnapshotLease(lctx, vs, snapshotLease{Holder: b.cfg.Name, Until: time.Now().Add(snapshotLeaseFor)}); err != nil {
		return nil, err
	}
	return func() { b.releaseSnapshotLease(ctx, vs) }, nil
}

// releaseSnapshotLease frees this member's lease, on a fresh short
// context (ctx may be the cancelled upload's). It takes no lock: the lease
// cannot have passed to another member while this one's was valid.
func (b *Backups) releaseSnapshotLease(ctx context.Context, vs valueStore) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	held, err := b.loadSnapshotLease(rctx)
	if err == nil && held.Holder == b.cfg.Name {
		err = b.storeSnapshotLease(rctx, vs, snapshotLease{})
	}
	if err != nil {
		b.log.Warn("snapshot lease not released; it expires on its own", "error", err, "after", snapshotLeaseFor)
	}
}

func (b *Backups) loadSnapshotLease(ctx context.Context) (snapshotLease, error) {
	var l snapshotLease
	raw, err := b.cfg.Coordinator.Load(ctx, snapshotLeaseKey)
	if errors.Is(err, coord.ErrNotStored) {
		return l, nil
	}
	if err != nil {
		return l, fmt.Errorf("snapshot lease: %w", err)
	}
	if err := json.Unmarshal(raw, &l); err != nil {
		// A damaged lease is overwritten rather than blocking backups.
		b.log.Warn("snapshot lease unreadable; taking it", "error", err)
		return snapshotLease{}, nil
	}
	return l, nil
}

func (b *Backups) storeSnapshotLease(ctx context.Context, vs valueStore, l snapshotLease) error {
	raw, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if err := vs.Store(ctx, snapshotLeaseKey, raw); err != nil {
		return fmt.Errorf("snapshot lease: %w", err)
	}
	return nil
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
func (b *Backups) listAuthentic(ctx context.Context) ([]snapshot.Meta, error) {
	kept, _, err := b.ListSplit(ctx)
	return kept, err
}

// Refused is an object of the store listAuthentic refused: its
// metadata as listed (unauthenticated: nothing in it is vouched for) and
// why.
type Refused struct {
	Meta snapshot.Meta
	Why  error
}

// ListSplit is listAuthentic with the objects it refused.
func (b *Backups) ListSplit(ctx context.Context) ([]snapshot.Meta, []Refused, error) {
	s := b.cfg.Snapshots
	list, err := s.Store.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	kept, refused := s.Encryption.Authentic(list)
	b.refusedMu.Lock()
	defer b.refusedMu.Unlock()
	// Rebuilt from each listing, not only added to: names a store writer
	// planted and removed again would otherwise stay for the life of the
	// process. A name still listed keeps its entry (warnForeignOnce's
	// too), so each is logged once while it stays.
	next := make(map[string]bool, len(refused))
	for _, meta := range list {
		if b.refusedSnapshots[meta.Name] {
			next[meta.Name] = true
		}
	}
	var out []Refused
	for _, meta := range list {
		err, ok := refused[meta.Name]
		if !ok {
			continue
		}
		out = append(out, Refused{Meta: meta, Why: err})
		if !next[meta.Name] {
			next[meta.Name] = true
			if meta.Corrupt != "" {
				b.log.Warn("snapshot store: object with corrupt metadata refused, never restored automatically nor deleted by retention: nothing restores it without its metadata; an operator puts its metadata back or deletes it", "snapshot", meta.Name, "error", err)
				continue
			}
			b.log.Warn("snapshot store: object refused, never restored automatically nor deleted by retention: an operator restores it by name (recover -from snapshot:NAME -accept-unauthenticated; a delta with -accept-unauthenticated-deltas) or deletes it", "snapshot", meta.Name, "error", err)
		}
	}
	b.refusedSnapshots = next
	return kept, out, nil
}

// RevisionBump is how far a recovery from meta bumps revisions: derived
// from the write rate the store's listing shows and the snapshot's age
// (snapshot.RevisionBump). Without a listing the assumed rate stands in.
func (b *Backups) RevisionBump(ctx context.Context, meta snapshot.Meta) uint64 {
	var history []snapshot.Meta
	if s := b.cfg.Snapshots; s != nil {
		list, err := b.listAuthentic(ctx)
		if err != nil {
			b.log.Warn("revision bump: snapshot store unavailable; assuming the default write rate", "error", err, "rate", snapshot.AssumedWriteRate)
		}
		history = list
	}
	bump := snapshot.RevisionBump(meta, history, time.Now())
	rate, measured := snapshot.WriteRate(history)
	b.log.Info("revision bump", "snapshot", meta.Name, "revision", meta.Revision, "age", time.Since(meta.Created).Round(time.Second), "rate", rate, "measured", measured, "bump", bump)
	return bump
}

// Refuse marks name refused (a snapshot of no incarnation of the record)
// and reports whether it was not yet: each is logged once while the
// store lists it (ListSplit forgets the names no longer listed).
func (b *Backups) Refuse(name string) bool {
	b.refusedMu.Lock()
	defer b.refusedMu.Unlock()
	if b.refusedSnapshots == nil {
		b.refusedSnapshots = map[string]bool{}
	}
	if b.refusedSnapshots[name] {
		return false
	}
	b.refusedSnapshots[name] = true
	return true
}

// LeaseHolder is the member the snapshot lease names ("" when free).
func (b *Backups) LeaseHolder(ctx context.Context) (string, error) {
	l, err := b.loadSnapshotLease(ctx)
	return l.Holder, err
}

// preChangeSnapshotEvery: a membership change retried (etcd refuses
// changes until peers have been connected for 5s) is backed up once.
const preChangeSnapshotEvery = time.Minute

// BeforeChange starts a backup before a member is removed, in the
// background (Start): the removal does not wait for it, as
// replacing a dead member must not wait for the snapshot store, nor hold
// the lock through an upload. The stream starts at once from a running
// member, and a removal changes no key. A save already running (scheduled,
// or another member's holding the lease) stands in for it. Adding a
// learner takes none: a learner does not vote, so adding one cannot cost
// quorum, and the joiner would spool a third copy of the database beside
// the one it receives.
func (b *Backups) BeforeChange(o planner.Observation, why string) {
	if b.cfg.Snapshots == nil || b.now().Sub(b.lastPreChange) < preChangeSnapshotEvery {
		return // a retried change needs no second backup
	}
	b.lastPreChange = b.now()
	b.Start(b.cfg.Endpoint(o), why, false)
}

// preStopSnapshotFresh: a voter that stops while others run (a rolling
// update of the job, which is how etcd-nomad and its embedded etcd are
// upgraded, a drain, a restart) saves a full snapshot first unless the
// store holds one this recent: the first member a rolling update stops
// saves it, the next ones find it.
const preStopSnapshotFresh = 10 * time.Minute

// BeforeStop saves a snapshot as this member stops (o: its running
// server's observation, its members known): always when it is the
// only voter left; before an update or any other stop of a voter of a
// cluster with a quorum unless the store's newest full snapshot is under
// preStopSnapshotFresh old. Bounded by ctx, the stop budget (budget: the
// loop's LeaveTimeout fits the job's kill_timeout): a save cut short is
// logged, and the stop goes on.
func (b *Backups) BeforeStop(ctx context.Context, o planner.Observation, budget time.Duration) {
	voters := 0
	for _, mem := range o.Members {
		if !mem.Learner {
			voters++
		}
	}
	if voters == 1 {
		if err := b.Save(ctx, b.cfg.Endpoint(o), "last voter stopping"); err != nil {
			b.log.Warn("snapshot of the last voter failed", "error", err)
		}
		return
	}
	if o.Local.Learner || o.LeaderID == 0 {
		return // a learner's data may lag; without a quorum a save fails
	}
	list, err := b.listLineage(ctx)
	if err != nil {
		b.log.Warn("no snapshot before stopping: snapshot store unavailable", "error", err)
		return
	}
	if full, _, _, ok := snapshot.Newest(list); ok && b.now().Sub(full.Created) < preStopSnapshotFresh {
		b.log.Info("no snapshot before stopping: the store's newest is recent", "snapshot", full.Name, "age", b.now().Sub(full.Created).Round(time.Second))
		return
	}
	b.log.Info("saving a snapshot before stopping (the first stop of a rolling update saves one)", "budget", budget)
	// Under the snapshot lease: while another member uploads one (a
	// scheduled save), that one is the snapshot before this stop.
	if err := b.leasedSnapshot(ctx, b.cfg.Endpoint(o), "before this member stops", false); err != nil {
		b.log.Warn("snapshot before stopping failed; stopping anyway", "error", err)
	}
}
