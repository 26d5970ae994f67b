package planner

import "fmt"

// The checks of the decisions that change or touch the etcd membership:
// a promotion, a removal, an instance's replacement, a peer URL update,
// and disarming a CORRUPT alarm. Check calls them by decision kind; each
// keeps one invariant of docs/design.md's table.

// checkDisarmCorrupt keeps invariant 7, "a member's CORRUPT alarm is
// disarmed only once it left the membership": its corrupt data never
// serves unnoticed.
func checkDisarmCorrupt(o Observation, d Decision) error {
	for _, id := range d.Alarms {
		if !o.MembersKnown || id == 0 || findID(o.Members, id) >= 0 {
			return fmt.Errorf("invariant 7: disarmed the CORRUPT alarm of member %x, still in the membership", id)
		}
	}
	return nil
}

// checkUpdatePeerURL: a peer URL is updated only by the running member,
// for itself, with the member list known.
func checkUpdatePeerURL(o Observation, d Decision) error {
	if !o.Running || !o.MembersKnown || d.MemberID != o.SelfID {
		return fmt.Errorf("peer URL update of %x by %x (running %v, members known %v)", d.MemberID, o.SelfID, o.Running, o.MembersKnown)
	}
	return nil
}

// checkPromote keeps invariant 3, "one membership change at a time": a
// learner is promoted by itself, running (etcd says when it is in sync).
func checkPromote(o Observation, d Decision) error {
	if !o.Running || d.MemberID != o.SelfID {
		return fmt.Errorf("invariant 3: promote of %x by %x", d.MemberID, o.SelfID)
	}
	return nil
}

// checkRemoveMember checks a removal (invariants 2 and 3): of a member
// of a known list; a voter only with the new quorum healthy and nothing
// in flight; the leader only when no other choice exists.
func checkRemoveMember(o Observation, d Decision) error {
	if !o.MembersKnown {
		return fmt.Errorf("invariant 2: remove without a known member list")
	}
	i := findID(o.Members, d.MemberID)
	if i < 0 {
		return fmt.Errorf("remove of unknown member %x", d.MemberID)
	}
	m := o.Members[i]
	if !m.Learner {
		if err := checkRemovalKeepsQuorum(o, m); err != nil {
			return err
		}
		if err := checkRemovalOneChange(o); err != nil {
			return err
		}
	}
	return checkLeaderRemovedLast(o, m)
}

// checkRemovalKeepsQuorum keeps invariant 2, "never remove a voter if
// healthy voters would fall below the new quorum".
func checkRemovalKeepsQuorum(o Observation, m Member) error {
	after, healthy := 0, 0
	for _, x := range o.Members {
		if x.Learner || x.ID == m.ID {
			continue
		}
		after++
		if x.Healthy {
			healthy++
		}
	}
	if after == 0 || healthy < after/2+1 {
		return fmt.Errorf("invariant 2: removing %x leaves %d healthy of %d voters", m.ID, healthy, after)
	}
	return nil
}

// checkRemovalOneChange keeps invariant 3, "one membership change at a
// time": no voter is removed while a learner (or an added member not
// started yet) is in flight.
func checkRemovalOneChange(o Observation) error {
	for _, x := range o.Members {
		if x.Learner || x.Name == "" {
			return fmt.Errorf("invariant 3: voter removal while %x is in flight", x.ID)
		}
	}
	return nil
}

// checkLeaderRemovedLast keeps invariant 3, "leader never removed while
// another choice exists": not while another member (not this one) is
// stale too.
func checkLeaderRemovedLast(o Observation, m Member) error {
	if m.ID != o.LeaderID {
		return nil
	}
	for _, x := range o.Members {
		if x.ID != m.ID && x.ID != o.SelfID && o.StaleAfter > 0 && x.AbsentFor >= o.StaleAfter {
			return fmt.Errorf("invariant 3: removing leader %x while %x is also stale", m.ID, x.ID)
		}
	}
	return nil
}

// checkReplaceInstance keeps the table's rule "at most one instance
// replacement in flight; only a long-unhealthy voter, only with quorum"
// (the quorum part is invariant 2): nothing else in flight, the target
// a listed voter unhealthy for longer than ReplaceAfter, and a healthy
// quorum of the voters.
func checkReplaceInstance(o Observation, d Decision) error {
	if o.ReplacementInFlight {
		return fmt.Errorf("replacement of %s while another replacement is in flight", d.Instance)
	}
	for _, x := range o.Members {
		if x.Learner || x.Name == "" {
			return fmt.Errorf("replacement of %s while member %x is in flight", d.Instance, x.ID)
		}
	}
	found := false
	healthy, all := 0, 0
	for _, x := range o.Members {
		if !x.Learner {
			all++
			if x.Healthy {
				healthy++
			}
		}
		if x.ID == d.MemberID {
			found = true
			if x.Healthy || o.ReplaceAfter <= 0 || x.UnhealthyFor < o.ReplaceAfter {
				return fmt.Errorf("replacement of %s, which is healthy or not unhealthy long enough", d.Instance)
			}
		}
	}
	if !found || !inInstances(o.Instances, d.Instance) || healthy < all/2+1 {
		return fmt.Errorf("invariant 2: replacement of %s with %d healthy of %d voters", d.Instance, healthy, all)
	}
	return nil
}
