package task

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/provider"
)

// leaveState is the loop's memory of leaving (loop only).
type leaveState struct {
	departed bool
	// err is the provider's last error telling whether this
	// instance is being taken away, said once.
	err  string
	left bool // this member removed itself (leave)
}

// leave removes this member from the membership before it stops, when its
// slot is gone and the removal is safe (planner.PlanLeave). It reports
// whether the member is out of the cluster (removed now or before).
//
// Invariant 12: a graceful departure never costs quorum. etcd refuses a
// removal until the remaining voters have been connected for 5 s (strict
// reconfiguration), and two members stopped together must leave one after
// the other: so the member keeps retrying under the lock, re-observing each
// time, until LeaveTimeout, and hands leadership away before removing
// itself. A member that gave up after one refusal left the survivor alone
// with a stale majority for recovery_grace.
func (m *Member) leave() bool {
	lv, ok := m.opts.Provider.(provider.Leaver)
	if !ok {
		return false
	}
	if m.leaving.left {
		return true // removed already (an earlier leave, e.g. an ASG lifecycle hook)
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.LeaveTimeout)
	defer cancel()
	leaving, err := lv.Leaving(ctx)
	if err != nil {
		m.log.Warn("cannot tell whether this member is leaving; keeping it", "error", err)
		return false
	}
	if !leaving {
		return false
	}
	// Whether the replacement inherits this member's data is asked again
	// before every attempt while the answer is no: a read that failed or
	// came before Nomad named the replacement (e2e TestScaleWithNomadJobRun:
	// a replacement that took the data over found its member removed, and
	// the membership fell to 2 voters) must not decide the whole leave.
	ih, _ := m.opts.Provider.(provider.Inheritor)
	inh := inheritance{ask: ih, log: m.log}
	for attempt := 1; ; attempt++ {
		inherited := inh.now(ctx, attempt)
		out, again := m.leaveOnce(ctx, attempt, inherited)
		if out {
			m.leaving.left = true
		}
		if out || !again {
			return out
		}
		select {
		case <-ctx.Done():
			m.log.Warn("leaving: stop deadline reached before this member could be removed; stopping as a member", "attempts", attempt, "timeout", m.opts.LeaveTimeout)
			return false
		case <-time.After(leaveRetryEvery):
		}
	}
}

// LeaveBudget is the LeaveTimeout that fits a Nomad kill_timeout: what is
// left after leaveStopMargin for etcd's own stop (usually well under a
// second; DefaultStopTimeout bounds the worst case, and a kill in it loses
// nothing: etcd's data is durable); at least 5 s, and the default when
// kill_timeout is unset.
func LeaveBudget(killTimeout time.Duration) time.Duration {
	if killTimeout <= 0 {
		return DefaultLeaveTimeout
	}
	return max(5*time.Second, killTimeout-leaveStopMargin)
}

// leaveStopMargin is kept of kill_timeout for stopping etcd after a leave.
const leaveStopMargin = 8 * time.Second

// leaveRetryEvery paces leave's attempts.
const leaveRetryEvery = 500 * time.Millisecond

// leaveOnce makes one attempt under the lock: out reports the member is out
// of the membership, again that another attempt may succeed.
func (m *Member) leaveOnce(ctx context.Context, attempt int, inherited bool) (out, again bool) {
	lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
	l, err := m.opts.Coordinator.Lock(lctx, m.opts.Name)
	lcancel()
	if err != nil {
		m.log.Debug("leaving: lock not taken yet", "attempt", attempt, "error", err)
		return m.leaveUnlocked(ctx, attempt, inherited)
	}
	m.mu.Lock()
	m.lock = l
	m.mu.Unlock()
	keepLock := false
	defer func() {
		if !keepLock {
			m.releaseLock(ctx)
		}
	}()
	o, err := m.observe(ctx)
	o.DataInherited = inherited
	if err != nil {
		m.log.Warn("leaving: observation failed", "attempt", attempt, "error", err)
		return false, true
	}
	if !o.Running {
		return false, false
	}
	if o.MembersKnown && findMember(o.Members, o.SelfID) < 0 {
		return true, false
	}
	d := planner.PlanLeave(o)
	if attempt == 1 || d.Kind != planner.Wait {
		m.log.Info("leaving", "kind", d.Kind, "reason", d.Reason, "attempt", attempt)
	}
	if d.Kind == planner.LeaveSuperseded {
		return false, false
	}
	if d.Kind == planner.KeepMembership {
		// Hold the lock until etcd has stopped (shutdown releases it):
		// a member leaving at the same time must see this one gone.
		keepLock = true
		return false, false
	}
	if d.Kind != planner.RemoveMember {
		// No quorum, or removing this member now would leave too few
		// healthy voters (another member is leaving or restarting):
		// try again while the deadline allows. The last voter stays.
		last := o.MembersKnown && voterCount(o.Members) <= 1
		return false, !last
	}
	if d.MemberID != o.SelfID {
		// A voter gone for good stands between this member and its
		// handover (planner: staleVoter): remove it, then decide again.
		if err := m.removeMember(ctx, o, d); err != nil {
			m.log.Info("leaving: removing the stale voter was refused, retrying", "attempt", attempt, "error", err)
		}
		return false, true
	}
	if o.LeaderID == o.SelfID {
		m.handOffLeadership(ctx, o)
	}
	if err := m.removeMember(ctx, o, d); err != nil {
		m.log.Info("leaving: removal refused, retrying (etcd refuses membership changes until the remaining voters have been connected for 5s)", "attempt", attempt, "error", err)
		return false, true
	}
	return true, false
}

// leaveUnlocked observes without the lock when leaveOnce could not take
// it: the holder may be recovering the quorum this member waits for (or
// joining the epoch it recorded), and a member that looked only under the
// lock never saw the newer epoch. planner.LeaveSuperseded then stops it at
// once: a partition that heals would otherwise give its old incarnation
// its quorum back beside the new one (sim seed 1002359). Anything else
// waits for the lock: out and again as leaveOnce's.
func (m *Member) leaveUnlocked(ctx context.Context, attempt int, inherited bool) (out, again bool) {
	o, err := m.observe(ctx)
	if err != nil {
		return false, true
	}
	o.DataInherited = inherited
	if !o.Running {
		return false, false
	}
	if o.MembersKnown && findMember(o.Members, o.SelfID) < 0 {
		return true, false
	}
	if d := planner.PlanLeave(o); d.Kind == planner.LeaveSuperseded {
		m.log.Info("leaving", "kind", d.Kind, "reason", d.Reason, "attempt", attempt)
		return false, false
	}
	return false, true
}

// handOffLeadership moves leadership to a healthy voter before this
// member removes itself, so the cluster never waits for an election.
func (m *Member) handOffLeadership(ctx context.Context, o planner.Observation) {
	for _, mem := range o.Members {
		if mem.ID == o.SelfID || !mem.Healthy || mem.Learner {
			continue
		}
		cli, err := m.etcdClient([]string{m.clientURL(m.self)})
		if err != nil {
			return
		}
		mctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = cli.MoveLeader(mctx, mem.ID)
		cancel()
		if err != nil {
			m.log.Warn("leadership transfer before leaving failed", "to", mem.Name, "error", err)
		} else {
			m.log.Info("leadership handed over before leaving", "to", mem.Name)
		}
		return
	}
}

func voterCount(ms []planner.Member) int {
	n := 0
	for _, x := range ms {
		if !x.Learner {
			n++
		}
	}
	return n
}

// depart carries out SideJobs.Depart for provider.Departer providers: the member
// leaves the cluster, then tells the provider it may proceed.
func (m *Member) depart(ctx context.Context, o planner.Observation) {
	dp, ok := m.opts.Provider.(provider.Departer)
	if !ok {
		return
	}
	m.log.Info("this instance is being taken away: leaving the cluster")
	m.mu.Lock()
	running := m.proc.Server() != nil
	m.mu.Unlock()
	if running && !m.leave() {
		return // try again next loop; the lifecycle hook waits for us
	}
	if !running {
		// Stopped (removed, or crashed): go only once the member is out
		// of the membership; the leader removes an absent member.
		if !o.MembersKnown {
			return
		}
		if o.Local.MemberID != 0 && findMember(o.Members, o.Local.MemberID) >= 0 {
			m.log.Info("waiting for this member to be removed before completing the lifecycle action", "member_id", o.Local.MemberID)
			return
		}
	}
	if err := dp.Depart(ctx); err != nil {
		m.log.Warn("could not tell the provider this member has left", "error", err)
		return
	}
	m.leaving.departed = true
}

// inheritance answers, before each attempt of a leave, whether the
// replacement inherits this member's data, asking the provider again
// while the answer is no (a read that failed, or came before Nomad named
// the replacement, must not decide the whole leave: e2e
// TestScaleWithNomadJobRun, session 18: a replacement that took the data
// over found its member removed, and the membership fell to 2 voters). A
// yes stays yes.
type inheritance struct {
	ask  provider.Inheritor // nil: the provider never hands data over
	log  hclog.Logger
	said bool
}

func (h *inheritance) now(ctx context.Context, attempt int) bool {
	if h.ask == nil || h.said {
		return h.said
	}
	yes, err := h.ask.Inherited(ctx)
	switch {
	case err != nil:
		if attempt == 1 {
			h.log.Warn("cannot tell whether the replacement inherits this member's data; asking again before each attempt", "error", err)
		}
	case yes && attempt > 1:
		h.log.Info("leaving: the replacement inherits this member's data after all", "attempt", attempt)
	}
	h.said = err == nil && yes
	return h.said
}
