package task

import (
	"context"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// The loop's side of the backups (task/backup): the endpoint a snapshot
// streams from, the stop's snapshot, which observes first, and the stop of
// the background work.

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

// stopSnapshot saves a snapshot as this member stops (backup.BeforeStop),
// within the stop budget (LeaveTimeout fits the job's kill_timeout), from
// an observation of its running server.
func (m *Member) stopSnapshot() {
	s := m.opts.Snapshots
	if s == nil || m.leaving.left {
		return
	}
	budget := max(m.opts.StopTimeout, m.opts.LeaveTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	o, err := m.observe(ctx)
	if err != nil || !o.Running || !o.MembersKnown {
		return
	}
	m.backups.BeforeStop(ctx, o, budget)
}

// stopBackground cancels this member's background work (the backups'
// saves and pruning, trust's renewal) and waits for the backups' to clean
// up (backup.Stop). Safe to call more than once.
func (m *Member) stopBackground() {
	m.mu.Lock()
	m.cancelBackground()
	m.mu.Unlock()
	m.backups.Stop()
}
