// Package nomad is the provider for members that run as the allocations of
// a Nomad job's task group. It watches the job's allocations with blocking
// queries (one long-poll at a time, not tight polling), serves the latest
// list from memory. What is Nomad's own (port labels, member names, the
// NOMAD_* identity, ACL refusals) is in the top-level package nomad.
package nomad

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/provider"
)

// waitTime bounds one blocking query; an idle member asks Nomad about
// once per waitTime.
const waitTime = 5 * time.Minute

// Options configure a Provider.
type Options struct {
	Client    *api.Client
	Namespace string
	Job       string
	Group     string
	// SelfAlloc is this member's allocation id (NOMAD_ALLOC_ID), optional.
	SelfAlloc string
	Logger    hclog.Logger
}

// Provider lists a task group's allocations that are not proven stopped.
type Provider struct {
	o Options

	mu        sync.Mutex
	ready     chan struct{}
	readyOnce sync.Once
	// allocsSeen and jobSeen: each watch applied its first update.
	allocsSeen, jobSeen bool
	// denied is closed when Nomad's ACLs refused the watch: waiters
	// return that error instead of waiting for their deadline.
	denied     chan struct{}
	deniedOnce sync.Once
	insts      []provider.Instance
	allocs     map[string]*api.AllocationListStub
	size       int
	lastErr    error
}

var _ provider.Provider = (*Provider)(nil)

// New returns a provider; call Watch to keep it current.
func New(o Options) *Provider {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return &Provider{o: o, ready: make(chan struct{}), denied: make(chan struct{})}
}

// Watch follows the job's allocations and its group count until ctx ends,
// each with its own blocking query: an idle member asks Nomad nothing
// beyond them (bench h.idle-api; the job was read after every change of
// the allocation list before, which other jobs' allocations move too).
func (p *Provider) Watch(ctx context.Context) {
	go p.follow(ctx, "watch the job", p.pollJob, &p.jobSeen)
	p.follow(ctx, "watch allocations", p.poll, &p.allocsSeen)
}

// follow runs poll until ctx ends: each call waits for a change past the
// index of the last update applied and returns the new index. The index
// moves only once an update is in memory: a failed read must not advance
// it, or the next blocking query would wait (up to waitTime) for a change
// after the one that was never applied, and a stopped allocation would
// stay listed meanwhile. seen is set after the first update; the provider
// is ready once both watches have one.
func (p *Provider) follow(ctx context.Context, what string, poll func(context.Context, uint64) (uint64, error), seen *bool) {
	var index uint64
	for ctx.Err() == nil {
		next, err := poll(ctx, index)
		if err == nil {
			index = next
			p.mu.Lock()
			*seen = true
			if p.allocsSeen && p.jobSeen {
				p.readyOnce.Do(func() { close(p.ready) })
			}
			p.mu.Unlock()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.lastErr = err
		p.mu.Unlock()
		if errors.Is(err, nomadglue.ErrDenied) {
			p.deniedOnce.Do(func() { close(p.denied) })
		}
		p.o.Logger.Warn(what, "job", p.o.Job, "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// poll waits for the allocation list to move past index, applies it, and
// returns the list's new index. On error nothing is applied.
func (p *Provider) poll(ctx context.Context, index uint64) (uint64, error) {
	// The allocation list with resources (ports) for this job; the
	// job-allocations endpoint omits them.
	q := (&api.QueryOptions{
		Namespace: p.o.Namespace, WaitIndex: index, WaitTime: waitTime,
		Filter: fmt.Sprintf("JobID == %q", p.o.Job),
		Params: map[string]string{"resources": "true"},
	}).WithContext(ctx)
	allocs, meta, err := p.o.Client.Allocations().List(q)
	if err != nil {
		return 0, readErr(p.o.Client, "list the allocations of job "+p.o.Job, err)
	}
	p.update(allocs)
	return meta.LastIndex, nil
}

// pollJob waits for the job to move past index, applies its group count,
// and returns the job's new index.
func (p *Provider) pollJob(ctx context.Context, index uint64) (uint64, error) {
	jq := (&api.QueryOptions{Namespace: p.o.Namespace, WaitIndex: index, WaitTime: waitTime}).WithContext(ctx)
	job, meta, err := p.o.Client.Jobs().Info(p.o.Job, jq)
	if err != nil {
		return 0, readErr(p.o.Client, "read job "+p.o.Job, err)
	}
	p.setJob(job)
	return meta.LastIndex, nil
}

// setJob applies the job's count of this group.
func (p *Provider) setJob(job *api.Job) {
	size := 0
	for _, tg := range job.TaskGroups {
		if tg.Name != nil && *tg.Name == p.o.Group && tg.Count != nil {
			size = *tg.Count
		}
	}
	p.mu.Lock()
	p.size = size
	p.mu.Unlock()
}

// readErr names the read that failed: a refusal by Nomad's ACLs becomes a
// DeniedError (which names the operation itself), anything else is wrapped.
func readErr(cli *api.Client, op string, err error) error {
	if d := nomadglue.Denied(cli, op, nomadglue.NeedRead, err); errors.Is(d, nomadglue.ErrDenied) {
		return d
	}
	return fmt.Errorf("%s: %w", op, err)
}

func (p *Provider) update(allocs []*api.AllocationListStub) {
	var insts []provider.Instance
	byID := map[string]*api.AllocationListStub{}
	for _, a := range allocs {
		byID[a.ID] = a
		if a.TaskGroup != p.o.Group {
			continue
		}
		if in, ok := instance(p.o.Group, a); ok {
			insts = append(insts, in)
		}
	}
	p.mu.Lock()
	p.insts, p.allocs, p.lastErr = insts, byID, nil
	p.mu.Unlock()
}

// instance maps one allocation to a member slot; ok is false when the
// allocation is proven stopped.
//
// Only the client proves a task stopped: ClientStatus complete or failed
// is the client's own report that the task has exited (whatever the
// desired status), and an allocation garbage-collected by Nomad is no
// longer listed at all. Everything else that is not terminal is listed:
//
//   - pending or running with desired status run, with all three ports: a
//     slot (Unknown false);
//   - unknown: the client is disconnected; its task may be running behind
//     a partition, with data and possibly a quorum;
//   - lost: the server gave up on the client (lost_after passed, or the
//     node went down), not the client on its task. The allocation gets
//     desired status stop, but a partitioned client keeps its tasks running
//     (the job sets no stop_on_client_after: see invariant 10 in
//     docs/design.md, "Safety invariants and where they are tested"), so it
//     stays listed until the client reports it complete or failed, or
//     Nomad garbage-collects it;
//   - pending or running with desired status stop or evict: the client has
//     been told to stop it and has not reported it stopped; on a client
//     that is gone it may never report, and Nomad marks it neither lost nor
//     collects it while it is running;
//   - any client status this code does not know, and a slot without its
//     ports: present, but not a slot anyone can reach or join.
//
// All of these but the first are Unknown: present and possibly alive,
// never a proof of absence.
func instance(group string, a *api.AllocationListStub) (provider.Instance, bool) {
	switch a.ClientStatus {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed:
		return provider.Instance{}, false
	}
	in := provider.Instance{Name: nomadglue.MemberName(group, a.ID)}
	if a.AllocatedResources != nil {
		for _, pm := range a.AllocatedResources.Shared.Ports {
			if in.Address == "" {
				in.Address = pm.HostIP
			}
			switch pm.Label {
			case nomadglue.PortClient:
				in.ClientPort = pm.Value
			case nomadglue.PortPeer:
				in.PeerPort = pm.Value
			case nomadglue.PortStatus:
				in.StatusPort = pm.Value
			}
		}
	}
	live := a.ClientStatus == api.AllocClientStatusPending || a.ClientStatus == api.AllocClientStatusRunning
	ports := in.Address != "" && in.PeerPort != 0 && in.ClientPort != 0 && in.StatusPort != 0
	in.Unknown = !(live && a.DesiredStatus == api.AllocDesiredStatusRun && ports)
	return in, true
}

func (p *Provider) wait(ctx context.Context) error {
	select {
	case <-p.ready:
		return nil
	case <-p.denied:
		select {
		case <-p.ready:
			return nil
		default:
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return fmt.Errorf("no allocation list from Nomad: %w", p.lastErr)
	case <-ctx.Done():
		p.mu.Lock()
		defer p.mu.Unlock()
		return fmt.Errorf("no allocation list from Nomad yet: %w", errors.Join(ctx.Err(), p.lastErr))
	}
}

// Instances returns the group's allocations that are not proven stopped:
// pending and running ones, and, marked Unknown, those whose client is
// disconnected (unknown, lost) or has not yet reported them stopped.
func (p *Provider) Instances(ctx context.Context) ([]provider.Instance, error) {
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]provider.Instance(nil), p.insts...), nil
}

// DesiredSize is the task group's count.
func (p *Provider) DesiredSize(ctx context.Context) (int, error) {
	if err := p.wait(ctx); err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.size, nil
}

// NodeOf returns the node of the allocation behind member name.
func (p *Provider) NodeOf(name string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.allocs {
		if nomadglue.MemberName(p.o.Group, a.ID) == name {
			return a.NodeID, true
		}
	}
	return "", false
}

// SelfNode is the node of this member's allocation.
func (p *Provider) SelfNode() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.allocs[p.o.SelfAlloc]; ok {
		return a.NodeID, true
	}
	return "", false
}

// Leaving reports whether this member's own allocation is being stopped
// for good (scale-down, job stop, replacement): Nomad sets its desired
// status to stop before it signals the task. A task restart inside the same
// allocation keeps desired status run.
func (p *Provider) Leaving(ctx context.Context) (bool, error) {
	if p.o.SelfAlloc == "" {
		return false, nil
	}
	a, _, err := p.o.Client.Allocations().Info(p.o.SelfAlloc, (&api.QueryOptions{Namespace: p.o.Namespace}).WithContext(ctx))
	if err != nil {
		return false, fmt.Errorf("read own allocation %s: %w", p.o.SelfAlloc, nomadglue.Denied(p.o.Client, "read allocation "+p.o.SelfAlloc, nomadglue.NeedRead, err))
	}
	if a.DesiredStatus == api.AllocDesiredStatusRun {
		return false, nil
	}
	// The whole job stopping ('nomad job stop', with or without -purge)
	// stops the cluster; it does not shrink it. Every member keeps its
	// membership, as in a restart of every member, and the next 'nomad
	// job run' starts them from their data (a host volume keeps it): had
	// each left, the last voter would hold the cluster alone and the
	// others' data would be set aside.
	j, _, err := p.o.Client.Jobs().Info(a.JobID, (&api.QueryOptions{Namespace: p.o.Namespace}).WithContext(ctx))
	if err != nil {
		var ue api.UnexpectedResponseError
		if errors.As(err, &ue) && ue.StatusCode() == 404 {
			p.o.Logger.Info("the job is gone (purged): stopping this member without leaving the cluster", "job", a.JobID)
			return false, nil
		}
		return false, fmt.Errorf("read job %s: %w", a.JobID, nomadglue.Denied(p.o.Client, "read job "+a.JobID, nomadglue.NeedRead, err))
	}
	if j.Stop != nil && *j.Stop {
		p.o.Logger.Info("the job is stopped: stopping this member without leaving the cluster (the next run starts it from its data)", "job", a.JobID)
		return false, nil
	}
	return true, nil
}

// Inherited reports whether this member's allocation is being replaced by
// one that inherits its disk (sticky, migrating ephemeral disk: Nomad moves
// alloc/data into the replacement), so the replacement can run as this
// same member from its data instead of joining empty.
func (p *Provider) Inherited(ctx context.Context) (bool, error) {
	if p.o.SelfAlloc == "" {
		return false, nil
	}
	a, _, err := p.o.Client.Allocations().Info(p.o.SelfAlloc, (&api.QueryOptions{Namespace: p.o.Namespace}).WithContext(ctx))
	if err != nil {
		return false, fmt.Errorf("read own allocation %s: %w", p.o.SelfAlloc, nomadglue.Denied(p.o.Client, "read allocation "+p.o.SelfAlloc, nomadglue.NeedRead, err))
	}
	if a.NextAllocation == "" {
		return false, nil
	}
	next, _, err := p.o.Client.Allocations().Info(a.NextAllocation, (&api.QueryOptions{Namespace: p.o.Namespace}).WithContext(ctx))
	if err != nil {
		return false, nil // any doubt reads as no (inheritsData)
	}
	return inheritsData(a, next), nil
}

// inheritsData reports whether allocation next will receive allocation
// self's data: it names self as its previous allocation, its group asks
// for a migrating ephemeral disk, and it has not started before self
// stopped. Nomad moves the previous allocation's data before it starts
// the tasks, and waits for the previous allocation to stop first, unless
// that one is unknown (its client disconnected): a replacement placed
// then starts without the data (its client cannot reach the old one) or,
// at best, with a copy of a running member's files. So a replacement that
// runs while self has not stopped got no handover and never will: self,
// back from a disconnection to find its allocation lost, leaves for good,
// and the replacement joins at once instead of after stale_after (issue
// 27, h.isolate-long). Nor while self is lost or unknown to the servers
// (its client was cut off from them): Nomad then lets a replacement on
// another node copy self's files while self still runs, in name order,
// the data before the metadata that says it stopped, and that copy can
// look cleanly stopped (review rev18d F-A); self leaving the membership
// makes the replacement set such data aside instead of starting it as
// self. Any doubt reads as no: a member that leaves is always safe, one
// that stays is removed after stale_after.
func inheritsData(self, next *api.Allocation) bool {
	if next.PreviousAllocation != self.ID || next.Job == nil {
		return false
	}
	if self.ClientStatus == api.AllocClientStatusLost || self.ClientStatus == api.AllocClientStatusUnknown {
		return false
	}
	selfStopped := self.ClientStatus == api.AllocClientStatusComplete || self.ClientStatus == api.AllocClientStatusFailed
	if next.ClientStatus != api.AllocClientStatusPending && !selfStopped {
		return false
	}
	for _, tg := range next.Job.TaskGroups {
		if tg.Name != nil && *tg.Name == next.TaskGroup {
			return tg.EphemeralDisk != nil && tg.EphemeralDisk.Migrate != nil && *tg.EphemeralDisk.Migrate
		}
	}
	return false
}
