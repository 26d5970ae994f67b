package planner

import "fmt"

// The checks of setting this member's data aside (SetAside): data that
// cannot be recreated is renamed, never deleted, and only when it is not
// needed. Check calls them by decision kind; each keeps one invariant of
// docs/design.md's table.

// checkSetAside checks a set-aside (invariants 7, 2, 9 and 10).
func checkSetAside(o Observation, _ Decision) error {
	if err := checkSetAsideHoldsData(o); err != nil {
		return err
	}
	if err := checkCorruptSetAside(o); err != nil {
		return err
	}
	return checkSetAsideForRecord(o)
}

// checkSetAsideHoldsData keeps invariant 7, "nothing that cannot be
// recreated is deleted": a set-aside moves data (or a running member's),
// never an empty data dir.
func checkSetAsideHoldsData(o Observation) error {
	if o.Local.Empty && !o.Running {
		return fmt.Errorf("invariant 7: set aside an empty data dir")
	}
	return nil
}

// checkSetAsideForRecord keeps invariant 9, "nothing is set aside for a
// record that is older or unconfirmed, nor for this member's own
// unconfirmed record while a quorum answers": readable data of this
// cluster is set aside because of the record only when a confirmed newer
// epoch (or this member's own recovery) names another incarnation, or
// when its member was removed; never for an unconfirmed, same-epoch or
// older record, nor for a missing one.
func checkSetAsideForRecord(o Observation) error {
	l := o.Local
	if l.Token == "" || l.Cluster != o.ClusterName || l.Unreadable != "" {
		return nil
	}
	removed := o.MembersKnown && l.MemberID != 0 && findID(o.Members, l.MemberID) < 0 && (o.Record != nil || o.MembersClusterID == l.ClusterID && l.ClusterID != 0)
	if o.Running && o.MembersKnown && findID(o.Members, o.SelfID) < 0 {
		removed = true
	}
	r := o.Record
	switch {
	case r == nil && !removed:
		return fmt.Errorf("invariant 9: set aside data of epoch %d with no record", l.Epoch)
	case r != nil && (r.Token != l.Token || r.Epoch != l.Epoch):
		return checkSetAsideForAnotherIncarnation(o)
	case r != nil && !removed && o.Corrupt == "":
		// Data found corrupt is the one exception, under
		// checkCorruptSetAside's quorum rule.
		return fmt.Errorf("set aside data of the recorded incarnation that was not removed")
	}
	return nil
}

// checkSetAsideForAnotherIncarnation keeps invariant 9 when the record
// names another incarnation than this member's data: only a confirmed
// newer record, or this member's own recovery from a snapshot, sets it
// aside, unless the data is an orphan of the confirmed cluster or a
// prefix of it (a recovery or restore that never started); then the
// own-recovery and newer-runs rules below.
func checkSetAsideForAnotherIncarnation(o Observation) error {
	l, r, name := o.Local, o.Record, checkedName(o)
	orphan := !o.Running && r.ClusterID != 0 && r.Epoch == l.Epoch && o.MembersKnown && o.MembersClusterID == r.ClusterID && o.Unreachable == 0
	for _, p := range o.Peers {
		orphan = orphan && p.Token != l.Token
	}
	// Data of a recovery whose ForceNewCluster start never happened is a
	// prefix of the confirmed cluster that answers with a quorum, whether
	// it still lists its member (rev13b) or removed it (rv14-data RV14-2);
	// an installed restore that never started, a copy of what the store
	// keeps (rv14-data RV14-1).
	prefix := !o.Running && r.ClusterID != 0 && o.MembersKnown && o.MembersClusterID == r.ClusterID &&
		(l.ForceNewPending && l.MemberID != 0 && (l.Unstarted || r.top() >= l.Epoch) || l.Unstarted && !l.ForceNewPending && l.MemberID == 0 && r.Epoch < l.Epoch || startedRestore(r, l))
	if (r.Epoch <= l.Epoch || r.ClusterID == 0 && !(r.Seeder == name && r.Source != "")) && !orphan && !prefix {
		return fmt.Errorf("invariant 9: set aside data of token %s epoch %d for record token %s epoch %d (confirmed %v)", l.Token, l.Epoch, r.Token, r.Epoch, r.ClusterID != 0)
	}
	if r.ClusterID == 0 && r.Epoch > l.Epoch && r.Seeder == name && !orphan {
		if err := checkSetAsideForOwnRecovery(o); err != nil {
			return err
		}
	}
	return checkSetAsideAfterNewerRuns(o)
}

// checkSetAsideForOwnRecovery keeps invariants 7 and 10 for this member's
// own unconfirmed recovery: never one from data (it starts from this
// data: "nothing that cannot be recreated is deleted"), never while a
// quorum may answer ("no recovery or takeover while any instance might
// hold a quorum": Consul may have restored an old record).
func checkSetAsideForOwnRecovery(o Observation) error {
	l, r := o.Local, o.Record
	if r.Source == FromData {
		return fmt.Errorf("invariant 7: set aside data of epoch %d for this member's own recovery from data", l.Epoch)
	}
	if o.MembersKnown {
		return fmt.Errorf("invariant 10: set aside data of epoch %d for this member's own unconfirmed record while cluster %x answers with a quorum", l.Epoch, o.MembersClusterID)
	}
	if o.Unreachable > 0 {
		return fmt.Errorf("invariant 10: set aside data of epoch %d for this member's own unconfirmed record while %d instance(s) do not answer", l.Epoch, o.Unreachable)
	}
	for _, p := range o.Peers {
		if p.Healthy {
			return fmt.Errorf("invariant 10: set aside data of epoch %d for this member's own unconfirmed record while peer %s is a healthy voter", l.Epoch, p.Name)
		}
	}
	return nil
}

// checkSetAsideAfterNewerRuns keeps invariant 7, "nothing that cannot be
// recreated is deleted": a confirmed newer record sets data aside only
// once a peer shows its incarnation running with a quorum; the record
// alone does not prove a copy of it is left.
func checkSetAsideAfterNewerRuns(o Observation) error {
	l, r := o.Local, o.Record
	if r.ClusterID == 0 || r.Epoch <= l.Epoch {
		return nil
	}
	runs := false
	for _, p := range o.Peers {
		runs = runs || p.Token == r.Token && p.Epoch == r.Epoch && p.Running && p.Healthy
	}
	if !runs {
		return fmt.Errorf("invariant 7: set aside data of epoch %d for record epoch %d while no peer shows it running with a quorum", l.Epoch, r.Epoch)
	}
	return nil
}
