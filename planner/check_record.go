package planner

import "fmt"

// The checks of a record write (RecordCluster): the record is derived
// truth, re-written from the members' data, and its epochs only grow.
// Check calls them by decision kind; each keeps one invariant of
// docs/design.md's table.

// checkRecordCluster checks a record write (invariants 9 and 5).
func checkRecordCluster(o Observation, d Decision) error {
	if d.Record == nil {
		return fmt.Errorf("record-cluster without a record")
	}
	if err := checkRecordedEpochGrows(o, d); err != nil {
		return err
	}
	if err := checkRecordedClusterID(o, d); err != nil {
		return err
	}
	return checkRerecord(o, d)
}

// checkRecordedEpochGrows keeps invariant 9, "epochs only grow and never
// repeat": the new record's epoch is not below the record's, and it
// names the highest epoch the record it replaces named (review rev13b
// D3).
func checkRecordedEpochGrows(o Observation, d Decision) error {
	if o.Record != nil && d.Record.Epoch < o.Record.Epoch {
		return fmt.Errorf("invariant 9: recording epoch %d over epoch %d", d.Record.Epoch, o.Record.Epoch)
	}
	if o.Record != nil && d.Record.top() < o.Record.top() {
		return fmt.Errorf("invariant 9: recording epoch %d (highest %d) over a record that named epoch %d", d.Record.Epoch, d.Record.HighestEpoch, o.Record.top())
	}
	return nil
}

// checkRecordedClusterID keeps invariant 5, "a member joins only a
// confirmed cluster": another cluster id for the recorded incarnation is
// recorded only by a member of the cluster that answers with a quorum
// here, running that cluster, every instance answering.
func checkRecordedClusterID(o Observation, d Decision) error {
	r := o.Record
	if r == nil || r.ClusterID == 0 || d.Record.Epoch != r.Epoch || d.Record.ClusterID == r.ClusterID {
		return nil
	}
	if !o.Running || !o.MembersKnown || o.MembersClusterID != d.Record.ClusterID || o.Local.ClusterID != d.Record.ClusterID || o.Unreachable > 0 {
		return fmt.Errorf("invariant 5: recording cluster %x over %x without that cluster answering with a quorum here (members known %v, cluster %x, %d silent)", d.Record.ClusterID, r.ClusterID, o.MembersKnown, o.MembersClusterID, o.Unreachable)
	}
	return nil
}

// checkRerecord keeps invariant 9, "an older record is re-written from
// the newer member (with its quorum, or every instance answering, and no
// newer peer) ... an epoch the data never ran is never re-recorded": a
// new epoch (or a first record) is written by a running member, with
// this incarnation's quorum or every instance answering, while no peer
// outside its cluster holds a newer epoch, and not while a voter of its
// own cluster runs that cluster as an older epoch (its metadata was
// rewritten for a recovery that never started: review rv14-data RV14-4).
func checkRerecord(o Observation, d Decision) error {
	if o.Record != nil && d.Record.Epoch <= o.Record.Epoch {
		return nil
	}
	if !o.Running || !o.MembersKnown && o.Unreachable > 0 {
		return fmt.Errorf("invariant 9: re-recording epoch %d without this incarnation's quorum while %d instance(s) do not answer", d.Record.Epoch, o.Unreachable)
	}
	if top := max(d.Record.Epoch, d.Record.top()); o.Local.ClusterID != 0 && d.Record.ClusterID == o.Local.ClusterID && o.LineEpoch > top {
		// Review rev18f F5: a newer epoch of this line ran after it.
		return fmt.Errorf("invariant 9: re-recording epoch %d (cluster id %x) while the store holds a snapshot of its cluster id at epoch %d", d.Record.Epoch, d.Record.ClusterID, o.LineEpoch)
	}
	if o.MembersKnown && o.Local.ClusterID != 0 && o.MembersClusterID == o.Local.ClusterID && findID(o.Members, o.SelfID) < 0 {
		return fmt.Errorf("invariant 9: re-recording epoch %d from member %x, which the member list of its cluster %x that answers no longer names", d.Record.Epoch, o.SelfID, o.Local.ClusterID)
	}
	for _, p := range o.Peers {
		// A voter of this member's own cluster runs its incarnation,
		// whatever epoch its metadata names.
		if p.Token != "" && p.Epoch > d.Record.Epoch && !fellowVoter(o, p) {
			return fmt.Errorf("invariant 9: re-recording epoch %d while peer %s holds epoch %d", d.Record.Epoch, p.Name, p.Epoch)
		}
		if fellowVoter(o, p) && p.Epoch < d.Record.Epoch && d.Record.Token == o.Local.Token {
			return fmt.Errorf("invariant 9: re-recording epoch %d while voter %s of this member's cluster %x runs it as epoch %d", d.Record.Epoch, p.Name, o.Local.ClusterID, p.Epoch)
		}
	}
	return nil
}
