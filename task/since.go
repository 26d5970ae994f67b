package task

import "time"

// Clock tells the member the time. Production uses the system clock;
// tests may move a fake one.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// condition names something the member times: what holds, and for which
// member (0: this member, or the cluster).
type condition struct {
	what string
	id   uint64
}

// Timed conditions.
const (
	// condAbsent: a member of the list has no instance.
	condAbsent = "absent"
	// condUnhealthy: a member of the list does not answer.
	condUnhealthy = "unhealthy"
	// condQuorumLost: the confirmed cluster has no quorum.
	condQuorumLost = "quorum lost"
	// condSeederGone: the seeder of an unconfirmed record has no
	// instance.
	condSeederGone = "seeder gone"
	// condRecordMissing: the coordinator holds no record.
	condRecordMissing = "record missing"
)

// heldSince remembers from when each condition has held: the "since when"
// behind the planner's durations (AbsentFor, UnhealthyFor, QuorumLostFor,
// SeederGoneFor). Loop only.
type heldSince map[condition]time.Time

// hold records whether c holds at now and returns for how long it has
// held: 0 when it does not (it is then forgotten) or has just begun.
func (s heldSince) hold(c condition, holds bool, now time.Time) time.Duration {
	if !holds {
		delete(s, c)
		return 0
	}
	at, ok := s[c]
	if !ok {
		s[c] = now
		return 0
	}
	return now.Sub(at)
}

// keepOnly forgets the conditions named what of members not in ids.
func (s heldSince) keepOnly(what string, ids map[uint64]bool) {
	for c := range s {
		if c.what == what && !ids[c.id] {
			delete(s, c)
		}
	}
}
