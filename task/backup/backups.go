// Package backup is the member's backups: the scheduled full snapshots
// and the snapshots before a change or a stop, under the snapshot lease;
// the continuous backup (the delta recorder) on the leader; the store's
// listing, authenticated, with the objects it refuses.
//
// It is one part of the member supervisor (docs/redesign.md): the loop in
// package task decides when (planner.SideJobs) and calls down into it; it
// never calls back into the loop and imports no other part.
package backup

import (
	"context"
	"crypto/tls"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Config is what the backups take from the member.
type Config struct {
	// Snapshots, nil when backups are off.
	Snapshots *Snapshots
	Cluster   string // the cluster's name: what a snapshot is of
	Name      string // the member's: the snapshot lease's holder
	Dir       datadir.Dir
	Log       hclog.Logger
	// Now is the loop's clock (the pacing of checks and retries).
	Now     func() time.Time
	Metrics prometheus.Registerer
	Labels  prometheus.Labels
	// Coordinator holds the snapshot lease: locked while the lease is
	// read and written; a coordinator without Store gives no lease.
	Coordinator coord.Coordinator
	// Record is the cluster record the loop holds (nil: none read yet):
	// a save and a delta chain are of its incarnation only.
	Record func() *coord.Record
	// TLS is the client side a save and the recorder dial etcd with (nil:
	// TLS off).
	TLS *tls.Config
	// Self is this member's client URL: where the recorder reads the
	// changes, the endpoint each segment names.
	Self string
	// Endpoint is the client URL a snapshot of o's cluster streams from
	// ("" when no member serves).
	Endpoint func(o planner.Observation) string
	// MemberID is the running server's member id, hex ("" when none runs).
	MemberID func() string
	// Context ends when the member stops: the background saves end with it.
	Context context.Context
}

// Backups carries out the member's backups: the loop says when (its
// SideJobs), Backups does the work, the long part in the background.
type Backups struct {
	cfg Config
	log hclog.Logger
	dir datadir.Dir

	snapMetrics       *snapshotMetrics
	nextSnapshotCheck time.Time
	// wantFullSnapshot: a full snapshot is wanted now (a new delta
	// chain; read by the background save); deltas is the continuous
	// backup running here (SuperviseDeltas, loop only).
	wantFullSnapshot atomic.Bool
	deltas           *deltaRun
	nextDeltaStart   time.Time
	lastPreChange    time.Time
	// nextAsidePrune paces StartPruneAsides (loop only); asides is what
	// /status reports of the set-aside copies (Asides).
	nextAsidePrune time.Time
	asides         asideCache

	mu sync.Mutex
	// snapRunning (under mu): a background save runs (Start); snapCancel
	// cancels it (CancelSave: it may stream from this member's server).
	snapRunning bool
	snapCancel  context.CancelFunc
	// snapshotErr (under mu): why this member's last snapshot failed or
	// was not taken, with its time ("" once one succeeds or is not due):
	// /status's snapshot_error.
	snapshotErr string
	// pruning (under mu): pruneAsides runs.
	pruning bool
	// backgroundCtx ends when the member stops; background counts the
	// background saves and pruning runs.
	backgroundCtx    context.Context
	cancelBackground context.CancelFunc
	background       sync.WaitGroup

	// refusedSnapshots: objects whose metadata failed authentication
	// (listAuthentic), each logged once; guarded by refusedMu.
	refusedMu        sync.Mutex
	refusedSnapshots map[string]bool
}

// New builds the backups. It starts nothing.
func New(cfg Config) *Backups {
	b := &Backups{cfg: cfg, log: cfg.Log, dir: cfg.Dir}
	b.backgroundCtx, b.cancelBackground = context.WithCancel(cfg.Context)
	b.snapMetrics = newSnapshotMetrics(cfg.Metrics, cfg.Labels, cfg.Snapshots)
	return b
}

func (b *Backups) now() time.Time { return b.cfg.Now() }

// CheckDue reports whether the leader's next look at the store is due.
func (b *Backups) CheckDue(now time.Time) bool { return !now.Before(b.nextSnapshotCheck) }

// WantFull reports whether a full snapshot is wanted now (a new delta
// chain).
func (b *Backups) WantFull() bool { return b.wantFullSnapshot.Load() }

// SnapshotErr is why this member's last snapshot failed or was not taken
// ("" once one succeeds).
func (b *Backups) SnapshotErr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.snapshotErr
}

// CancelSave cancels the background save running here, if any: it
// streams from this member's server, which is stopping.
func (b *Backups) CancelSave() {
	b.mu.Lock()
	cancelSave := b.snapCancel
	b.mu.Unlock()
	if cancelSave != nil {
		cancelSave()
	}
}

// PruneDue reports whether pruning set-aside data is due.
func (b *Backups) PruneDue(now time.Time) bool { return !now.Before(b.nextAsidePrune) }

// Asides are this member's set-aside copies, newest first, at most
// status.MaxAsides, and how many more there are (/status).
func (b *Backups) Asides() ([]status.AsideCopy, int) {
	return b.asides.list(b.dir.AsideDir(), b.log)
}

// backgroundStopWait bounds how long a stopping member waits for its
// cancelled upload to clean up (abort the upload, delete the object,
// release the lease) before it stops etcd anyway.
const backgroundStopWait = 5 * time.Second

// Stop cancels this member's background save and pruning and waits for
// them to clean up, at most backgroundStopWait. Safe to call more than
// once.
func (b *Backups) Stop() {
	b.mu.Lock()
	b.cancelBackground()
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.background.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(backgroundStopWait):
		b.log.Warn("a cancelled snapshot is still cleaning up; stopping anyway", "waited", backgroundStopWait)
	}
}

// Recording is the base snapshot of the continuous backup running here
// ("" when none).
func (b *Backups) Recording() string {
	if b.deltas == nil {
		return ""
	}
	return b.deltas.base
}

// RetryDeltasNow forgets the pacing of the recorder's retries: the next
// SuperviseDeltas may start one at once.
func (b *Backups) RetryDeltasNow() { b.nextDeltaStart = time.Time{} }

// Saving reports whether a background save of this member runs.
func (b *Backups) Saving() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.snapRunning
}

// RefusedNames is how many refused objects' names are remembered (each
// logged once while the store lists it).
func (b *Backups) RefusedNames() int {
	b.refusedMu.Lock()
	defer b.refusedMu.Unlock()
	return len(b.refusedSnapshots)
}
