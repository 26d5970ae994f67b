package planner

import (
	"fmt"
	"slices"
	"strings"
)

// The checks of a quorum-loss recovery, a restore and their takeovers
// and resumptions (RecoverQuorum). Check calls checkRecovery, which picks
// the checks of the situation; each keeps one invariant of
// docs/design.md's table.

// checkRecovery checks a RecoverQuorum decision: never beside a known
// voter (invariant 10), then by situation: resuming this member's own
// recorded recovery, taking over a gone seeder's empty seed, abandoning
// this member's own seed or restore for the newest snapshot, restoring
// with no record, or a recovery (or takeover of one) from the best
// source (invariants 4, 1, 8 and 9).
func checkRecovery(o Observation, d Decision) error {
	if err := checkRecoveryBesideKnownVoters(o, d); err != nil {
		return err
	}
	name := checkedName(o)
	r := o.Record
	switch {
	case r != nil && d.Record != nil && d.Record.Token == r.Token && r.Seeder == name && r.ClusterID == 0:
		return checkResumedRecovery(o, d)
	case r != nil && r.ClusterID == 0 && r.Source == "" && r.Seeder != name && !anyDataHeld(o):
		return checkSeedTakeoverByRestore(o, d)
	case r != nil && r.ClusterID == 0 && r.Seeder == name && r.Source != FromData:
		return checkOwnRecordAbandoned(o, d)
	}
	if err := checkRecoveryEveryInstanceAnswers(o); err != nil {
		return err
	}
	if r == nil {
		return checkRestoreWithoutRecord(o, d)
	}
	if as, ok := supersededAboveRecordAs(o); ok {
		// Stopped data above an older record, superseded by a newer
		// epoch of its line: its recovery is judged under the record
		// its start would have written (review rev18c N1).
		o = as
	}
	if lineSuperseded(o) && (d.Record == nil || !d.Record.Operator) {
		return fmt.Errorf("invariants 4, 9: recovery (%s) beside a snapshot of epoch %d of this data's line, newer than the data's epoch %d and the record's: the lines' revisions do not compare", d.Reason, o.LineEpoch, o.Local.Epoch)
	}
	return checkRecoveryFromBest(o, d)
}

// checkRecoveryBesideKnownVoters keeps invariant 10, "no recovery or
// takeover while any instance might hold a quorum": not while a member
// of the last known membership answers as a voter, listed or not, unless
// an operator's record asks for it.
func checkRecoveryBesideKnownVoters(o Observation, d Decision) error {
	if len(o.KnownHealthy)+len(o.UnlistedVoters) > 0 && (d.Record == nil || !d.Record.Operator) {
		return fmt.Errorf("invariant 10: recovery (%s) while %s of the last known membership answer as voters", d.Reason, strings.Join(slices.Concat(o.KnownHealthy, o.UnlistedVoters), ", "))
	}
	return nil
}

// anyDataHeld reports whether this member or a peer holds verified data.
func anyDataHeld(o Observation) bool {
	held := !o.Local.Empty && o.Local.Token != ""
	for _, p := range o.Peers {
		held = held || p.Token != ""
	}
	return held
}

// checkResumedRecovery checks the resumption of the recovery this member
// recorded (the decision's record is the record): from its data
// (invariants 10 and 4) or from a snapshot (invariants 4 and 1).
func checkResumedRecovery(o Observation, d Decision) error {
	switch d.From {
	case FromData:
		return checkResumedRecoveryFromData(o)
	case FromSnapshot:
		return checkResumedRestore(o)
	}
	return nil
}

// checkResumedRecoveryFromData keeps invariants 10 and 4 for a resumed
// recovery from data: "a recorded recovery is not resumed beside a quorum
// that answers" (a ForceNewCluster start beside a quorum makes a second
// live cluster), and "a recorded recovery from data is resumed only from
// the data it was recorded from, with every instance answering and no
// peer holding that data newer".
func checkResumedRecoveryFromData(o Observation) error {
	if o.MembersKnown {
		return fmt.Errorf("invariant 10: resumed the recovery of epoch %d from data while cluster %x answers with a quorum", o.Record.Epoch, o.MembersClusterID)
	}
	for _, p := range o.Peers {
		if p.Healthy {
			return fmt.Errorf("invariant 10: resumed the recovery of epoch %d from data while peer %s is a healthy voter", o.Record.Epoch, p.Name)
		}
	}
	if o.Unreachable > 0 {
		return fmt.Errorf("invariant 10: resumed the recovery of epoch %d from data while %d instance(s) do not answer", o.Record.Epoch, o.Unreachable)
	}
	for _, p := range o.Peers {
		if p.Token == o.Local.Token && p.Epoch == o.Local.Epoch && p.Revision > o.Local.Revision {
			return fmt.Errorf("invariant 4: resumed the recovery of epoch %d from revision %d while peer %s holds revision %d", o.Record.Epoch, o.Local.Revision, p.Name, p.Revision)
		}
	}
	if r := o.Record; r.LastConfirmedEpoch != 0 && (o.Local.Token != r.LastConfirmedToken || o.Local.Epoch != r.LastConfirmedEpoch) {
		return fmt.Errorf("invariant 4: resumed the recovery of epoch %d from data of token %s epoch %d with data of token %s epoch %d", r.Epoch, r.LastConfirmedToken, r.LastConfirmedEpoch, o.Local.Token, o.Local.Epoch)
	}
	// A snapshot of the record's epoch or above, the lineage's or
	// another's (SnapshotEpoch), was taken after the record.
	if s := o.LatestSnapshot; s != nil && s.Epoch >= o.Record.Epoch {
		return fmt.Errorf("invariant 4: resumed the recovery of epoch %d from data of epoch %d while the store holds snapshot %s of epoch %d, taken after the record", o.Record.Epoch, o.Local.Epoch, s.Name, s.Epoch)
	}
	if o.SnapshotEpoch >= o.Record.Epoch {
		return fmt.Errorf("invariant 4: resumed the recovery of epoch %d from data of epoch %d while the store holds a snapshot of epoch %d, taken after the record", o.Record.Epoch, o.Local.Epoch, o.SnapshotEpoch)
	}
	return nil
}

// checkResumedRestore keeps invariants 4 and 1 for a resumed restore,
// which this member holds no data of: "from the highest revision known"
// (not while the store holds a newer snapshot, except the snapshot an
// operator chose: OperatorSnapshotRecovery refused it over newer data
// unless they accepted the loss) and "at most one seed per cluster
// epoch" (never while an instance is silent or a peer holds the
// incarnation, or another of its epoch).
func checkResumedRestore(o Observation) error {
	if s := o.LatestSnapshot; s != nil && o.Record.Source != SnapshotSource(s.Name) && (!o.Record.Operator || s.Epoch >= o.Record.Epoch) {
		return fmt.Errorf("invariant 4: resumed the restore of %s while the store holds a newer snapshot %s", o.Record.Source, s.Name)
	}
	// A snapshot of the record's epoch or above, the lineage's or
	// another's (SnapshotEpoch), was taken after the record: of the
	// recorded restore that ran, or of a later incarnation.
	if o.SnapshotEpoch >= o.Record.Epoch {
		return fmt.Errorf("invariant 4: resumed the restore of %s (epoch %d) while the store holds a snapshot of epoch %d, taken after the record", o.Record.Source, o.Record.Epoch, o.SnapshotEpoch)
	}
	if o.Unreachable > 0 {
		return fmt.Errorf("invariant 1: resumed the restore of epoch %d while %d instance(s) do not answer (they may run it)", o.Record.Epoch, o.Unreachable)
	}
	for _, p := range o.Peers {
		if p.Token == o.Record.Token {
			return fmt.Errorf("invariant 1: resumed the restore of epoch %d while peer %s holds it", o.Record.Epoch, p.Name)
		}
		if p.Token != "" && p.Epoch >= o.Record.Epoch {
			return fmt.Errorf("invariant 1: resumed the restore of epoch %d while peer %s holds another incarnation of epoch %d", o.Record.Epoch, p.Name, p.Epoch)
		}
	}
	return nil
}

// checkSeedTakeoverByRestore keeps invariant 4, "a takeover recovers from
// the last confirmed incarnation the record carries", for the empty seed
// of a gone seeder while no member holds data (with data it is taken
// over as a recovery, checkRecoveryFromBest): only a restore of the
// newest snapshot as a newer epoch, after the grace, with the seeder
// unlisted and every instance answering, nothing here or at any peer.
func checkSeedTakeoverByRestore(o Observation, d Decision) error {
	r, s := o.Record, o.LatestSnapshot
	if d.From != FromSnapshot || s == nil || d.Snapshot != s.Name || d.Record == nil || d.Record.Epoch <= max(r.Epoch, s.Epoch) ||
		o.MembersKnown || o.RecoveryGrace <= 0 || o.SeederGoneFor < o.RecoveryGrace || inInstances(o.Instances, r.Seeder) || o.Unreachable > 0 || !o.Local.Empty || o.Running {
		return fmt.Errorf("invariant 4: took over the seed of %s other than by a restore of the newest snapshot as a newer epoch, after grace, with every instance answering", r.Seeder)
	}
	for _, p := range o.Peers {
		if p.Token != "" {
			return fmt.Errorf("invariant 4: took over a seed while peer %s holds data", p.Name)
		}
	}
	return nil
}

// checkOwnRecordAbandoned keeps invariants 4 and 1 when this member
// abandons its own unconfirmed seed or restore for the newest snapshot
// (no copy of it anywhere): "from the highest revision known, next epoch
// recorded first" (only the newest snapshot, as an epoch newer than both)
// and "at most one seed per cluster epoch" (no data here or at any peer,
// every instance answering).
func checkOwnRecordAbandoned(o Observation, d Decision) error {
	r, s := o.Record, o.LatestSnapshot
	if d.From != FromSnapshot || s == nil || d.Snapshot != s.Name || r.Source == SnapshotSource(s.Name) || d.Record == nil || d.Record.Epoch <= max(r.Epoch, s.Epoch, o.SnapshotEpoch) {
		return fmt.Errorf("invariant 4: recovery over this member's own unconfirmed record %+v other than a restore of the newest snapshot as a newer epoch", *r)
	}
	if !o.Local.Empty || o.Running || o.Unreachable > 0 {
		return fmt.Errorf("invariant 1: restore over this member's own record with data here or %d instance(s) silent", o.Unreachable)
	}
	for _, p := range o.Peers {
		if p.Token != "" {
			return fmt.Errorf("invariant 1: restore over this member's own record while peer %s holds data", p.Name)
		}
	}
	return nil
}

// checkRecoveryEveryInstanceAnswers keeps invariant 4's "with every
// instance answering" (and invariant 10: a silent instance counts as
// possibly alive) for a new recovery, takeover or restore.
func checkRecoveryEveryInstanceAnswers(o Observation) error {
	if o.Unreachable > 0 {
		return fmt.Errorf("invariant 4: recovery while %d instances do not answer", o.Unreachable)
	}
	return nil
}

// checkRestoreWithoutRecord keeps invariants 8 and 10 with no record: "a
// lost record is re-written from the members' data ... with no data
// anywhere, the newest snapshot is restored" (only that, as a newer
// epoch, with no data here or at any peer) and "with no record, a
// restore of the newest snapshot waits the recovery grace" (a majority
// the provider no longer lists may still serve).
func checkRestoreWithoutRecord(o Observation, d Decision) error {
	if d.From != FromSnapshot || o.LatestSnapshot == nil || d.Snapshot != o.LatestSnapshot.Name || d.Record == nil || d.Record.Epoch <= o.LatestSnapshot.Epoch {
		return fmt.Errorf("invariant 8: recovery with no record other than a restore of the newest snapshot as a newer epoch")
	}
	if o.Local.Empty && (o.Local.Cluster == "" || o.Local.Cluster == o.ClusterName) && d.Record.Epoch <= o.Local.MetaEpoch {
		return fmt.Errorf("invariant 9: restore with no record as epoch %d, not above epoch %d this member's metadata names", d.Record.Epoch, o.Local.MetaEpoch)
	}
	if e := answeredMetaEpoch(o.Peers, knownEpoch(o)); d.Record.Epoch <= e {
		return fmt.Errorf("invariant 9: restore with no record as epoch %d, not above epoch %d a peer's metadata names (review rev18c N3)", d.Record.Epoch, e)
	}
	if o.RecoveryGrace <= 0 || o.RecordMissingFor < o.RecoveryGrace {
		return fmt.Errorf("invariant 10: restore with no record after %s without one (grace %s): a majority the provider no longer lists may still serve", o.RecordMissingFor, o.RecoveryGrace)
	}
	if !o.Local.Empty || o.Running {
		return fmt.Errorf("invariant 8: restore with no record while this member holds data")
	}
	for _, p := range o.Peers {
		if p.Token != "" {
			return fmt.Errorf("invariant 8: restore with no record while peer %s holds data", p.Name)
		}
	}
	return nil
}

// checkRecoveryFromBest checks a recovery (or a takeover of one) under a
// record (invariants 9 and 4): the next epoch recorded, after the grace,
// from the best source of the incarnation it recovers.
func checkRecoveryFromBest(o Observation, d Decision) error {
	if err := checkRecoveryEpoch(o, d); err != nil {
		return err
	}
	dataEpoch, dataToken, err := checkedRecoverySource(o)
	if err != nil {
		return err
	}
	if err := checkRecoveryBesideOtherIncarnation(o, dataEpoch, dataToken); err != nil {
		return err
	}
	src, err := checkRecoveryFromHighest(o, d, dataEpoch, dataToken)
	if err != nil {
		return err
	}
	return checkRecoveryAboveOlderEpochs(o, d, src, dataEpoch)
}

// checkRecoveryEpoch keeps invariants 9 and 4: "epochs only grow" (no
// recovery over a record older than a peer's epoch) and "next epoch
// recorded first" (the next epoch above the record's and the newest
// snapshot's).
func checkRecoveryEpoch(o Observation, d Decision) error {
	for _, p := range o.Peers {
		if p.Token != "" && p.Epoch > o.Record.Epoch {
			return fmt.Errorf("invariant 9: recovery over record epoch %d while peer %s holds epoch %d", o.Record.Epoch, p.Name, p.Epoch)
		}
	}
	if d.Record == nil || d.Record.Epoch != (rules{}).nextEpoch(o) {
		return fmt.Errorf("invariant 4: recovery without recording the next epoch (above the record's and the newest snapshot's)")
	}
	return nil
}

// checkedRecoverySource returns the incarnation a recovery may start
// from (its epoch, and its token or "" for any) and keeps invariant 4's
// "only after the grace period" and "a takeover recovers from the last
// confirmed incarnation the record carries": this incarnation's data
// after the quorum was lost for the grace; or, when taking over the
// unconfirmed recovery of a seeder gone for the grace (not this member's
// own), the incarnation before it, while no peer holds the recovery's
// data.
func checkedRecoverySource(o Observation) (uint64, string, error) {
	r := o.Record
	if r.ClusterID != 0 {
		if o.RecoveryGrace <= 0 || o.QuorumLostFor < o.RecoveryGrace || o.MembersKnown {
			return 0, "", fmt.Errorf("invariant 4: recovery after %s of quorum loss (grace %s, members known %v)", o.QuorumLostFor, o.RecoveryGrace, o.MembersKnown)
		}
		return r.Epoch, r.Token, nil
	}
	if r.Seeder == checkedName(o) {
		return 0, "", fmt.Errorf("invariant 4: recovery over an unconfirmed record %+v", *r)
	}
	if o.RecoveryGrace <= 0 || o.SeederGoneFor < o.RecoveryGrace || inInstances(o.Instances, r.Seeder) || o.MembersKnown {
		return 0, "", fmt.Errorf("invariant 4: took over the recovery of %s after it was gone for %s (grace %s, listed %v, members known %v)", r.Seeder, o.SeederGoneFor, o.RecoveryGrace, inInstances(o.Instances, r.Seeder), o.MembersKnown)
	}
	for _, p := range o.Peers {
		if p.Token == r.Token {
			return 0, "", fmt.Errorf("invariant 4: took over while peer %s holds data of epoch %d", p.Name, r.Epoch)
		}
	}
	if r.LastConfirmedEpoch != 0 {
		return r.LastConfirmedEpoch, r.LastConfirmedToken, nil
	}
	return r.Epoch - 1, "", nil
}

// checkRecoveryBesideOtherIncarnation keeps invariant 4's "from the
// highest revision known": two incarnations of one epoch (the record's
// or the source's) make no highest; recovering from either loses the
// other's writes, so an operator chooses.
func checkRecoveryBesideOtherIncarnation(o Observation, dataEpoch uint64, dataToken string) error {
	other := func(token string, epoch uint64) bool {
		return token != "" && (epoch == o.Record.Epoch && token != o.Record.Token || dataToken != "" && epoch == dataEpoch && token != dataToken)
	}
	if !o.Local.Empty && o.Local.Cluster == o.ClusterName && other(o.Local.Token, o.Local.Epoch) {
		return fmt.Errorf("invariant 4: recovery while this member holds another incarnation (token %s) of epoch %d", o.Local.Token, o.Local.Epoch)
	}
	for _, p := range o.Peers {
		if other(p.Token, p.Epoch) {
			return fmt.Errorf("invariant 4: recovery while peer %s holds another incarnation (token %s) of epoch %d", p.Name, p.Token, p.Epoch)
		}
	}
	return nil
}

// checkRecoveryFromHighest keeps invariant 4, "from the highest revision
// known, never from a learner": the source is this member's own
// (non-learner) data of the incarnation or the newest snapshot, at no
// lower revision than any voter's copy of the incarnation or a newer
// snapshot of it. It returns the source's revision.
func checkRecoveryFromHighest(o Observation, d Decision, dataEpoch uint64, dataToken string) (int64, error) {
	holds := func(token string, epoch uint64) bool {
		return token != "" && epoch == dataEpoch && (dataToken == "" || token == dataToken)
	}
	best := int64(-1)
	ownData := !o.Local.Empty && o.Local.Cluster == o.ClusterName && holds(o.Local.Token, o.Local.Epoch)
	if ownData && !o.Local.Learner {
		best = o.Local.Revision
	}
	for _, p := range o.Peers {
		if holds(p.Token, p.Epoch) && !p.Learner {
			best = max(best, p.Revision)
		}
	}
	var src int64
	switch d.From {
	case FromData:
		if !ownData {
			return 0, fmt.Errorf("invariant 4: recovery from data this member does not hold")
		}
		if o.Local.Learner {
			return 0, fmt.Errorf("invariant 4: recovery from a learner's data")
		}
		src = o.Local.Revision
	case FromSnapshot:
		if o.LatestSnapshot == nil || d.Snapshot != o.LatestSnapshot.Name {
			return 0, fmt.Errorf("invariant 4: recovery from a snapshot that is not the newest")
		}
		src = o.LatestSnapshot.Revision
	default:
		return 0, fmt.Errorf("invariant 4: recovery from %q", d.From)
	}
	if src < best || (o.LatestSnapshot != nil && o.LatestSnapshot.Epoch >= dataEpoch && src < o.LatestSnapshot.Revision) {
		return 0, fmt.Errorf("invariant 4: recovery from revision %d while %d is known (snapshot %v)", src, best, o.LatestSnapshot)
	}
	// Nor below a learner's data of the incarnation, nor beside it from
	// a snapshot of an older epoch (another line: revisions do not
	// compare; the learner may be its incarnation's only copy).
	learnerAhead := func(learner bool, token string, epoch uint64, rev int64) bool {
		return learner && holds(token, epoch) && (rev > src || d.From == FromSnapshot && o.LatestSnapshot.Epoch < dataEpoch)
	}
	if !o.Local.Empty && o.Local.Cluster == o.ClusterName && learnerAhead(o.Local.Learner, o.Local.Token, o.Local.Epoch, o.Local.Revision) {
		return 0, fmt.Errorf("invariant 4: recovery from revision %d while this member, a learner, holds epoch %d at revision %d", src, o.Local.Epoch, o.Local.Revision)
	}
	for _, p := range o.Peers {
		if learnerAhead(p.Learner, p.Token, p.Epoch, p.Revision) {
			return 0, fmt.Errorf("invariant 4: recovery from revision %d while learner %s holds epoch %d at revision %d", src, p.Name, p.Epoch, p.Revision)
		}
	}
	return src, nil
}

// checkRecoveryAboveOlderEpochs keeps invariant 4, "never below data of
// an epoch the record skipped": no recovery from a revision below data
// of another epoch older than the record's (older than the source's: its
// later incarnations lost every copy but an older snapshot; newer: an
// incarnation the restored record does not know of), here or at a peer.
//
// Data of an epoch above a snapshot source's is another line: its
// revisions do not compare with the snapshot's.
func checkRecoveryAboveOlderEpochs(o Observation, d Decision, src int64, dataEpoch uint64) error {
	srcEpoch := dataEpoch
	if d.From == FromSnapshot {
		srcEpoch = o.LatestSnapshot.Epoch
	}
	skipped := func(token string, epoch uint64, rev int64) bool {
		return token != "" && epoch < o.Record.Epoch && epoch != dataEpoch && (rev > src || epoch > srcEpoch)
	}
	if !o.Local.Empty && o.Local.Cluster == o.ClusterName && skipped(o.Local.Token, o.Local.Epoch, o.Local.Revision) {
		return fmt.Errorf("invariant 4: recovery from revision %d (epoch %d) while this member holds epoch %d at revision %d", src, srcEpoch, o.Local.Epoch, o.Local.Revision)
	}
	for _, p := range o.Peers {
		if skipped(p.Token, p.Epoch, p.Revision) {
			return fmt.Errorf("invariant 4: recovery from revision %d (epoch %d) while peer %s holds epoch %d at revision %d", src, srcEpoch, p.Name, p.Epoch, p.Revision)
		}
	}
	return nil
}
