package task

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// The loop's side of the backups (task/backup): what the part takes from
// the member, and the stop's snapshot, which observes first.

// newBackups builds the member's backups part (after trust: it dials
// etcd with trust's client TLS).
func (m *Member) newBackups() *backup.Backups {
	return backup.New(backup.Config{
		Snapshots: m.opts.Snapshots, Cluster: m.opts.Cluster.Name, Name: m.opts.Name, Dir: m.dir,
		Log: m.log, Now: m.now, Metrics: m.metrics.reg, Labels: prometheus.Labels{"cluster": m.opts.Cluster.Name, "member": m.opts.Name},
		Coordinator: m.opts.Coordinator,
		Record: func() *coord.Record {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.record
		},
		TLS: m.trust.PeerTLS(), Self: m.clientURL(m.self), Endpoint: m.snapshotEndpoint,
		MemberID: func() string {
			m.mu.Lock()
			defer m.mu.Unlock()
			e := m.proc.Server()
			if e == nil {
				return ""
			}
			return fmt.Sprintf("%x", uint64(e.Server.MemberID()))
		},
		Context: m.bgCtx,
	})
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
	m.bgCancel()
	m.mu.Unlock()
	m.backups.Stop()
}

// refusedObject is an object of the store the listing refused
// (backup.Refused): its metadata as listed (unauthenticated: nothing in
// it is vouched for) and why.
type refusedObject struct {
	meta snapshot.Meta
	why  error
}

// listSplit is the store's authenticated listing with the objects it
// refused (backup.ListSplit).
func (m *Member) listSplit(ctx context.Context) ([]snapshot.Meta, []refusedObject, error) {
	kept, refused, err := m.backups.ListSplit(ctx)
	var out []refusedObject
	for _, r := range refused {
		out = append(out, refusedObject{meta: r.Meta, why: r.Why})
	}
	return kept, out, err
}
