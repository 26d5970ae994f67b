package task

import (
	"context"
	"errors"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Run supervises the member until ctx ends, then stops it gracefully:
// leadership is handed over if this member leads, within StopTimeout.
func (m *Member) Run(ctx context.Context) error {
	if err := m.serveStatus(); err != nil {
		return err
	}
	defer m.shutdown()
	go m.trust.RenewLoop(m.backgroundCtx)
	m.log.Info("supervising member", "data_dir", m.dir.Root, "peer_url", m.status.PeerURL, "client_url", m.status.ClientURL)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-m.proc.Stopped():
			m.log.Warn("etcd stopped on its own")
			m.reapStopped()
		}
		again := m.loop(ctx)
		if again {
			timer.Reset(0)
		} else {
			timer.Reset(m.opts.LoopInterval)
		}
	}
}

// loop runs one observe → plan → act cycle; it returns true when the next
// cycle should start at once.
func (m *Member) loop(ctx context.Context) bool {
	reads, watched := m.idleReads()
	o, err := m.observeLoop(ctx, reads)
	if err != nil {
		m.log.Warn("observation failed", "error", err)
		m.publishSummaryUnobserved(ctx)
		m.releaseLock(ctx)
		m.fenceUnobserved(ctx)
		return false
	}
	m.fenceStreak = 0
	if planner.PlanSideJobs(o).Depart {
		// Leaving changes the membership: the rest of the loop works
		// from what the cluster looks like afterwards.
		m.depart(ctx, o)
		watched = false
		if o, err = m.observeLoop(ctx, m.opts.Coordinator); err != nil {
			m.log.Warn("observation failed", "error", err)
			m.releaseLock(ctx)
			return false
		}
	}
	d := planner.Plan(o)
	if watched && (d.Kind != planner.Wait || d.NeedsLock) {
		// A decision that acts (or takes the lock to act) is taken from
		// consistent reads: the watched copy only tells the loop that
		// nothing is to be done.
		if o, err = m.observeLoop(ctx, m.opts.Coordinator); err != nil {
			m.log.Warn("observation failed", "error", err)
			m.releaseLock(ctx)
			return false
		}
		d = planner.Plan(o)
	}
	m.retryMeta()
	m.runSideJobs(ctx, o, planner.PlanSideJobs(o))
	m.metrics.observed(o)
	m.metrics.decision(d)
	m.setDecision(d)
	if d.Kind != planner.Wait || d.NeedsLock {
		m.log.Info("decision", "kind", d.Kind, "reason", d.Reason)
	} else {
		m.log.Debug("decision", "kind", d.Kind, "reason", d.Reason)
	}
	if d.NeedsLock {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		l, err := m.opts.Coordinator.Lock(lctx, m.opts.Name)
		cancel()
		if err != nil {
			m.log.Warn("lock not taken", "error", err)
			return false
		}
		m.mu.Lock()
		m.lock = l
		m.mu.Unlock()
		return true
	}
	err = m.act(ctx, o, d)
	m.releaseLock(ctx)
	if d.Kind == planner.ReclaimSpace {
		m.reclaimFailed, m.reclaimFailedAt = "", time.Time{}
		if err != nil {
			m.reclaimFailed, m.reclaimFailedAt = err.Error(), m.now()
		}
	}
	if err != nil {
		m.metrics.failures.Inc()
		m.log.Warn("action failed", "kind", d.Kind, "error", err)
		return false
	}
	return d.Kind != planner.Wait
}

func (m *Member) shutdown() {
	m.backups.StopDeltas(true)
	m.mu.Lock()
	e := m.proc.Server()
	m.cancelBackground() // a background upload stops now, not after the leave
	m.mu.Unlock()
	if e != nil {
		m.leave()
		m.stopSnapshot()
		// From here this shutdown closes the server: forgotten by the
		// process, it is never closed a second time (embed.Etcd.Close
		// panics "close of closed channel"; CI saw it when a Close that
		// outlasted StopTimeout was followed by the test kit's Stop).
		// Under metaMu, as stopEtcd: a completeMeta in flight finishes
		// first, a later one finds the server gone and writes nothing
		// beside MarkStopped below (review rev18h).
		m.metaMu.Lock()
		m.proc.Take()
		m.metaMu.Unlock()
		m.log.Info("stopping etcd", "timeout", m.opts.StopTimeout)
		done := make(chan struct{})
		go func() { e.Close(); close(done) }()
		select {
		case <-done:
			m.log.Info("etcd stopped")
			if err := m.dir.MarkStopped(); err != nil {
				m.log.Warn("could not mark the data cleanly stopped (a replacement will not adopt it)", "error", err)
			}
		case <-time.After(m.opts.StopTimeout):
			m.log.Warn("etcd did not stop in time", "timeout", m.opts.StopTimeout)
		}
	}
	m.closeResources()
}

// closeResources releases what a member holds besides etcd: its
// background save, the lock, its etcd client and the status server. Safe
// to call more than once.
func (m *Member) closeResources() {
	m.stopBackground()
	m.releaseLock(context.Background())
	m.mu.Lock()
	if m.client != nil {
		m.client.Close()
		m.client = nil
	}
	m.mu.Unlock()
	if m.port != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = m.port.Shutdown(ctx)
		cancel()
	}
}

// fenceUnobserved runs when the loop's observation failed (the provider
// does not answer: this host may be cut off from the Nomad servers, or
// Nomad collected its allocation while it runs): it reads the record from
// the coordinator all the same, and whether its own server answers a
// linearizable member list (its incarnation has a quorum), and stops etcd,
// keeping the data and the membership, when planner.PlanUnobserved says a
// newer confirmed epoch replaced this member's (StopSuperseded). A member
// that only skipped kept its old incarnation running blind, and a
// partition that healed gave it its quorum back beside the recovered one
// (sim seed 41704). The next observation that succeeds decides what the
// data becomes.
func (m *Member) fenceUnobserved(ctx context.Context) {
	m.mu.Lock()
	e := m.proc.Server()
	m.mu.Unlock()
	if e == nil { // never call into etcd while holding m.mu
		return
	}
	rec, err := m.opts.Coordinator.Record(ctx)
	if err != nil {
		// Unreachable, or no record (Consul lost its state): nothing
		// newer is known.
		return
	}
	o := planner.Observation{
		ClusterName: m.opts.Cluster.Name,
		Self:        planner.Self{Name: m.opts.Name},
		Running:     true,
		SelfID:      uint64(e.Server.MemberID()),
		Local:       m.dir.Observe(true),
		Record:      &rec,
	}
	if p, err := m.opts.Coordinator.Pause(ctx); err == nil {
		o.Paused = p.String()
	} else if !errors.Is(err, coord.ErrNotPaused) {
		o.Paused = "pause flag unreadable" // an operator's pause must hold while it cannot be read
	}
	if planner.PlanUnobserved(o).Kind != planner.StopSuperseded {
		m.fenceStreak = 0
		return // nothing newer recorded: no member list to wait for
	}
	if _, _, err := m.memberList(ctx, []string{m.clientURL(m.self)}); err == nil {
		o.MembersKnown = true
	}
	d := planner.PlanUnobserved(o)
	if d.Kind != planner.StopSuperseded {
		m.fenceStreak = 0
		return
	}
	// One member list that timed out (an fsync stall, an election) is
	// not a lost quorum: stop only when the loop before found the same
	// (review rev18g R5: a planted or stale record and a Nomad outage for
	// everyone could otherwise stop a healthy majority in one loop).
	if m.fenceStreak++; m.fenceStreak < 2 {
		m.log.Warn("running without a quorum under a newer recorded epoch while the provider does not answer: stopping at the next loop if it stays so", "record_epoch", rec.Epoch)
		return
	}
	m.fenceStreak = 0
	m.setDecision(d)
	m.log.Warn("decision", "kind", d.Kind, "reason", d.Reason)
	m.stopEtcd()
}
