package task

import (
	"context"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/provider"
)

// observeLoop is the loop's observation: the member's (observe) with the
// state of its side jobs, for planner.PlanSideJobs.
func (m *Member) observeLoop(ctx context.Context, reads Reads) (planner.Observation, error) {
	o, err := m.observeFrom(ctx, reads)
	if err != nil {
		return o, err
	}
	now := m.now()
	s := m.opts.Snapshots
	_, summary := m.opts.Coordinator.(summaryWriter)
	o.SideJobs = planner.SideJobState{
		Leaving:          m.observeLeaving(ctx),
		CA:               m.trust.CA() != nil,
		CACheckDue:       m.trust.CheckDue(now),
		Summary:          summary,
		Access:           m.opts.Cluster.Access != nil,
		AccessDue:        !now.Before(m.access.next),
		CACertDue:        m.trust.PublishDue(now),
		Snapshots:        s != nil && s.Interval > 0,
		SnapshotDue:      m.backups.CheckDue(now),
		Deltas:           s != nil && s.DeltaEvery > 0,
		WantFullSnapshot: m.backups.WantFull(),
		PruneDue:         m.backups.PruneDue(now),
	}
	return o, nil
}

// observeLeaving reports whether a provider.Departer is taking this
// instance away and has not been told yet that it left.
func (m *Member) observeLeaving(ctx context.Context) bool {
	dp, ok := m.opts.Provider.(provider.Departer)
	if !ok || m.leaving.departed {
		return false
	}
	lctx, cancel := context.WithTimeout(ctx, providerTimeout)
	defer cancel()
	leaving, err := dp.Leaving(lctx)
	if err != nil {
		// Said once per distinct error: a provider that cannot tell keeps
		// this member from departing (its lifecycle hook waits).
		if msg := err.Error(); msg != m.leaving.err {
			m.log.Warn("cannot tell whether this instance is being taken away", "error", err)
			m.leaving.err = msg
		}
		return false
	}
	m.leaving.err = ""
	return leaving
}

// runSideJobs carries out the side jobs the planner decided (planner.PlanSideJobs),
// in this order; Depart is carried out by the loop before it.
func (m *Member) runSideJobs(ctx context.Context, o planner.Observation, u planner.SideJobs) {
	if u.CheckCA {
		m.trust.Check(ctx)
	}
	if u.ClearForceNew {
		m.clearForceNew()
	}
	if u.PublishSummary {
		m.publishSummary(ctx, o)
	}
	if u.ReconcileAccess {
		m.applyAccess(ctx)
	}
	if u.PublishCACert {
		m.trust.PublishCACert(ctx)
	}
	if u.Snapshot {
		m.backups.Scheduled(o)
	}
	m.backups.SuperviseDeltas(ctx, u.RecordDeltas)
	if u.PruneAsides {
		m.backups.StartPruneAsides(o)
	}
}
