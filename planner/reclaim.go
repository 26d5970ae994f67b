package planner

import (
	"fmt"
	"strings"
)

// DisarmShare is the share of the quota every member's database must be
// below before NOSPACE is disarmed: disarmed just under the quota, the
// next writes would raise it again at once.
const DisarmShare = 0.9

// reclaimSpace decides the leader's maintenance of the database (reclaiming
// its space: compaction, defragmentation, the NOSPACE alarm), taken
// only on a healthy, complete cluster (every voter healthy, the desired
// size, no learner): a member defragmenting stops serving while it runs,
// so with one already down a defragmentation would cost the quorum.
// NOSPACE (etcd refuses writes) comes first: compact to the current
// revision, defragment every member, disarm the alarm once each is below
// DisarmShare of the quota. Otherwise the members whose database is
// fragmented beyond DefragRatio are defragmented. Followers go first and
// the leader last; the action hands leadership away before it. ok is false
// when there is nothing to reclaim.
func (r rules) reclaimSpace(o Observation, name string) (Decision, bool) {
	if o.LeaderID != o.SelfID || (!o.NoSpace && o.DefragRatio <= 0) {
		return Decision{}, false
	}
	var order []uint64
	var frag []string
	allBelow := o.Quota > 0
	for _, m := range o.Members {
		allBelow = allBelow && m.DBSize > 0 && float64(m.DBSize) < DisarmShare*float64(o.Quota)
		if m.ID == o.SelfID {
			continue
		}
		if o.NoSpace || fragmented(o, m) {
			order = append(order, m.ID)
			if !o.NoSpace {
				frag = append(frag, fmt.Sprintf("%s (%d of %d bytes free)", displayName(m), m.DBSize-m.DBSizeInUse, m.DBSize))
			}
		}
	}
	if i := findID(o.Members, o.SelfID); i >= 0 && (o.NoSpace || fragmented(o, o.Members[i])) {
		m := o.Members[i]
		order = append(order, m.ID) // the leader last
		if !o.NoSpace {
			frag = append(frag, fmt.Sprintf("%s (%d of %d bytes free)", displayName(m), m.DBSize-m.DBSizeInUse, m.DBSize))
		}
	}
	if len(order) == 0 {
		return Decision{}, false
	}
	what := "NOSPACE alarm raised (etcd refuses writes)"
	if !o.NoSpace {
		what = "fragmented: " + strings.Join(frag, ", ")
	}
	if o.ReclaimFailed != "" {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s, but this member's last maintenance failed (%s): not again yet", what, o.ReclaimFailed)}, true
	}
	if why := degraded(o); why != "" {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s, but %s: not defragmenting (a member stops serving while it defragments)", what, why)}, true
	}
	if !o.HoldsLock {
		return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: what + ": taking the lock to maintain the database"}, true
	}
	d := Decision{Kind: ReclaimSpace, Name: name, Defrag: order}
	if o.NoSpace {
		d.Compact, d.Disarm, d.DisarmBelow = true, true, int64(DisarmShare*float64(o.Quota))
		if allBelow {
			// Every member is already below the mark (defragmented
			// before a crash, say): disarm alone.
			d.Compact, d.Defrag = false, nil
			d.Reason = fmt.Sprintf("%s, but every member is below %.0f%% of the quota: disarming it", what, DisarmShare*100)
			return d, true
		}
		d.Reason = fmt.Sprintf("%s: compacting to the current revision, defragmenting %d member(s) one at a time (the leader last), then disarming it once every member is below %.0f%% of the quota", what, len(order), DisarmShare*100)
		return d, true
	}
	d.Reason = fmt.Sprintf("%s: defragmenting %d member(s) one at a time (the leader last)", what, len(order))
	return d, true
}

// fragmented reports whether m's database is at least DefragMinSize and
// has at least DefragRatio of it free.
func fragmented(o Observation, m Member) bool {
	if o.DefragRatio <= 0 || m.DBSize <= 0 || m.DBSize < o.DefragMinSize {
		return false
	}
	return float64(m.DBSize-m.DBSizeInUse) >= o.DefragRatio*float64(m.DBSize)
}

// degraded says why the cluster is not complete and healthy, "" when it is.
func degraded(o Observation) string {
	for _, m := range o.Members {
		switch {
		case m.Learner:
			return fmt.Sprintf("member %s is a learner", displayName(m))
		case !m.Healthy:
			return fmt.Sprintf("member %s is unhealthy", displayName(m))
		}
	}
	if v := voters(o.Members); v < o.DesiredSize {
		return fmt.Sprintf("%d of %d voters", v, o.DesiredSize)
	}
	return ""
}
