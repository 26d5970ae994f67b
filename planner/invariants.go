package planner

import (
	"fmt"
	"slices"
	"strings"
)

// refuse returns d, or a Wait naming the broken rule when d fails Check:
// a planner bug Check sees costs progress (the member waits and says
// why, in its log and status), never safety.
func refuse(o Observation, d Decision) Decision {
	if err := Check(o, d); err != nil {
		return Decision{Kind: Wait, Name: d.Name, Reason: fmt.Sprintf("refused to %s (a planner bug: %v): %s", d.Kind, err, d.Reason)}
	}
	return d
}

// Check returns an error when d, decided for o, breaks a safety rule that
// one decision can break: the invariants 1 to 10 of docs/design.md's table
// "Safety invariants and where they are tested" (one seed
// per epoch, quorum kept by removals and replacements, one membership
// change in flight, recovery only after the grace and from the best
// source, no foreign or stale data started, the persisted identity,
// nothing set aside that is needed, the record as derived truth, epochs
// only grow, no recovery while a quorum may answer), and beside them: a
// decision that acts under the lock (seed, membership change, record
// write, maintenance) holds it; an operator's pause holds back every
// action but a wait, a rejoin and the operator's own recovery; an
// instance is replaced only when unhealthy long enough and with a quorum
// left, one at a time; a peer URL is updated only by the running member
// for itself. Invariants 11 and 12 and the whole-system properties (one
// cluster id, no acknowledged write lost) are checked over time by sim/.
//
// It is a naive reference written apart from Plan, so that a planner bug
// is not mirrored here, and pure and cheap: Plan runs it on every
// decision and refuses one that fails it (refuse).
//
// Check is a dispatcher: the rules every decision keeps (everyDecision),
// in order, then the checks of d's kind (check_*.go, one function per
// invariant, each named for the rule it keeps). The first broken rule is
// the error.
func Check(o Observation, d Decision) error {
	for _, check := range everyDecision {
		if err := check(o, d); err != nil {
			return err
		}
	}
	switch d.Kind {
	case DisarmCorrupt:
		return checkDisarmCorrupt(o, d)
	case Seed:
		return checkSeed(o, d)
	case Rejoin:
		return checkRejoin(o, d)
	case JoinAsLearner, ResumeJoin:
		return checkJoin(o, d)
	case RecordCluster:
		return checkRecordCluster(o, d)
	case UpdatePeerURL:
		return checkUpdatePeerURL(o, d)
	case Promote:
		return checkPromote(o, d)
	case RemoveMember:
		return checkRemoveMember(o, d)
	case ReplaceInstance:
		return checkReplaceInstance(o, d)
	case RecoverQuorum:
		return checkRecovery(o, d)
	case SetAside:
		return checkSetAside(o, d)
	}
	return nil
}

// everyDecision are the checks that apply whatever the decision's kind,
// in the order Check runs them.
var everyDecision = []func(Observation, Decision) error{
	checkRecordedIncarnationRuns,
	checkPause,
	checkPersistedName,
	checkLockHeld,
	checkOperatorAccepted,
	checkRefused,
	checkListing,
	checkAboveSnapshots,
}

// checkedName is this member's name: the one persisted in its data dir,
// else the configured one (invariant 6).
func checkedName(o Observation) string {
	if o.Local.Name != "" {
		return o.Local.Name
	}
	return o.Self.Name
}

// checkRecordedIncarnationRuns keeps invariant 5 for a running member,
// "data of another cluster/epoch is never started": an incarnation the
// record no longer names is never kept running by a membership decision.
// Setting the data aside, waiting and recovering are the ways out (taking
// over a recovery restarts it as the next epoch: invariant 4 checks
// that), and so is re-recording a record older than the running epoch
// (invariant 9, checkRecordCluster).
func checkRecordedIncarnationRuns(o Observation, d Decision) error {
	if o.Running && o.Record != nil && o.Local.Token != "" && (o.Record.Token != o.Local.Token || o.Record.Epoch != o.Local.Epoch) && d.Kind != SetAside && d.Kind != Wait && d.Kind != RecoverQuorum && !(d.Kind == RecordCluster && o.Record.Epoch < o.Local.Epoch) {
		return fmt.Errorf("invariant 5: %s while running epoch %d against record epoch %d", d.Kind, o.Local.Epoch, o.Record.Epoch)
	}
	return nil
}

// checkPause keeps an operator's pause (`etcd-nomad pause`): nothing but
// waiting, starting this member's own data (a rejoin), and the operator's
// own recovery by its source.
func checkPause(o Observation, d Decision) error {
	if o.Paused == "" || d.Kind == Wait && !d.NeedsLock || d.Kind == Rejoin {
		return nil
	}
	r := o.Record
	own := r != nil && r.Operator && r.ClusterID == 0 && r.Seeder == d.Name && (d.Kind == RecoverQuorum || d.Kind == RecordCluster || d.Kind == Wait)
	if !own {
		return fmt.Errorf("pause: %s while paused", d.Kind)
	}
	return nil
}

// checkPersistedName keeps invariant 6, "identity is the name persisted in
// the data dir": a decision that starts etcd (seed, rejoin, join, resumed
// join) runs under that name.
func checkPersistedName(o Observation, d Decision) error {
	starts := d.Kind == Seed || d.Kind == Rejoin || d.Kind == JoinAsLearner || d.Kind == ResumeJoin
	if starts && o.Local.Name != "" && d.Name != o.Local.Name {
		return fmt.Errorf("invariant 6: runs as %q but the data dir says %q", d.Name, o.Local.Name)
	}
	return nil
}

// checkLockHeld: every decision that acts under the coordinator's lock
// (a seed, a membership change, a record write, ReclaimSpace) holds it;
// "decisions one member must take alone are taken while holding the
// coordinator's lock" (docs/design.md, Architecture), which invariants 1
// to 4 rest on.
func checkLockHeld(o Observation, d Decision) error {
	if (d.Kind == Seed || d.ChangesMembership() || d.Kind == RecordCluster || d.Kind == ReclaimSpace) && !o.HoldsLock {
		return fmt.Errorf("%s without holding the lock", d.Kind)
	}
	return nil
}

// checkCorruptSetAside: data of the incarnation the record names, of a
// member still in the membership, readable and of this cluster, is set
// aside only while a quorum of the voters, healthy, besides this member
// and named by no CORRUPT alarm, holds good copies (invariant 2: the
// quorum stays; invariant 7: never the last good copy).
func checkCorruptSetAside(o Observation) error {
	l, r := o.Local, o.Record
	if l.Empty || l.Unreadable != "" || l.Token == "" || l.Cluster != o.ClusterName || r == nil || r.Token != l.Token || r.Epoch != l.Epoch || !o.MembersKnown {
		return nil
	}
	id := l.MemberID
	if o.Running {
		id = o.SelfID
	}
	if id == 0 || findID(o.Members, id) < 0 {
		return nil // removed: nothing of the quorum to keep
	}
	good, v := 0, 0
	for _, m := range o.Members {
		if m.Learner {
			continue
		}
		v++
		accused := false
		for _, a := range o.CorruptAlarms {
			accused = accused || a == m.ID
		}
		if m.Healthy && m.ID != id && !accused {
			good++
		}
	}
	if good < v/2+1 {
		return fmt.Errorf("invariant 7: set aside the current incarnation's data while %d good healthy voter(s) besides this member are below the quorum of %d voters", good, v)
	}
	return nil
}

// checkRefused: an object of the store members refuse (unauthenticated or
// forged, Observation.RefusedSnapshot) is data that exists and may not be
// taken: no seed beside it (invariant 8), and no new recovery or restore
// from a source older than it (invariant 4). A resumed recovery was
// decided before; an operator's record restores what the operator chose.
func checkRefused(o Observation, d Decision) error {
	rs := o.RefusedSnapshot
	if rs == nil || d.Record == nil {
		return nil
	}
	switch d.Kind {
	case Seed:
		return fmt.Errorf("invariant 8: seeded epoch %d empty while the store holds %s (revision %d), which members refuse (%s)", d.Record.Epoch, rs.Name, rs.Revision, rs.Why)
	case RecoverQuorum:
		if d.Record.Operator || o.Record != nil && d.Record.Token == o.Record.Token {
			return nil
		}
		src := o.Local.Revision
		if d.From == FromSnapshot {
			if o.LatestSnapshot == nil || d.Snapshot != o.LatestSnapshot.Name {
				return nil // not the newest: the rules below refuse it
			}
			src = o.LatestSnapshot.Revision
		}
		if src < rs.Revision {
			return fmt.Errorf("invariant 4: recovery (%s) from revision %d while the store holds %s at revision %d, which members refuse (%s)", d.From, src, rs.Name, rs.Revision, rs.Why)
		}
	}
	return nil
}

// checkListing: while the snapshot store's listing does not answer
// (Observation.ListingUnanswered) what it holds is unknown: no seed
// (invariant 8: the store may hold the cluster's snapshots), and no new
// recovery or restore (invariant 4: it may hold a newer chain, or an
// object members refuse, than the source). A resumed recovery from data
// was decided before, on data that is here; a resumed restore, an
// operator's too, is not: the store may hold a snapshot of an incarnation
// that ran after the record was written (review rev13-data 1).
func checkListing(o Observation, d Decision) error {
	if o.ListingUnanswered == "" || d.Record == nil {
		return nil
	}
	switch d.Kind {
	case Seed:
		return fmt.Errorf("invariant 8: seeded epoch %d while the snapshot store's listing does not answer (%s)", d.Record.Epoch, o.ListingUnanswered)
	case RecoverQuorum:
		if o.Record != nil && d.Record.Token == o.Record.Token {
			if d.From == FromSnapshot {
				return fmt.Errorf("invariant 4: resumed the restore of %s as epoch %d while the snapshot store's listing does not answer (%s)", d.Snapshot, d.Record.Epoch, o.ListingUnanswered)
			}
			return nil
		}
		return fmt.Errorf("invariant 4: recovery (%s) as epoch %d while the snapshot store's listing does not answer (%s)", d.From, d.Record.Epoch, o.ListingUnanswered)
	}
	return nil
}

// checkAboveSnapshots: a new recovery, restore or seed over a record
// records an epoch above every snapshot of the store that authenticates,
// of the record's lineage or not (invariant 9, epochs only grow):
// snapshots are ordered by epoch first, and one the lineage calls
// foreign, of an incarnation that ran after a record Consul restored,
// would share the new epoch (review rev13-data 3). A resumed record was
// decided before.
func checkAboveSnapshots(o Observation, d Decision) error {
	if d.Record == nil || o.SnapshotEpoch == 0 || d.Kind != RecoverQuorum && d.Kind != Seed {
		return nil
	}
	if o.Record != nil && d.Record.Token == o.Record.Token {
		return nil
	}
	if d.Record.Epoch <= o.SnapshotEpoch {
		return fmt.Errorf("invariant 9: %s recorded epoch %d while the store holds a snapshot of epoch %d that authenticates", d.Kind, d.Record.Epoch, o.SnapshotEpoch)
	}
	return nil
}

// checkOperatorAccepted: an operator's restore never sets aside, nor
// restores over, data of a line beyond what its command accepted of that
// line (Record.Accepted; lines' revisions never compared): writes
// acknowledged after the record are not the operator's to lose (invariant
// 4: from the highest revision known).
func checkOperatorAccepted(o Observation, d Decision) error {
	r := o.Record
	if r == nil || !r.Operator || r.ClusterID != 0 {
		return nil
	}
	if _, bounded := r.acceptedUpTo("", 0, rules{}); !bounded {
		return nil
	}
	l := o.Local
	if d.Kind == SetAside && d.Aside == AsideForeign && r.Seeder == d.Name && !l.Empty && l.Token != "" && l.Token != r.Token && l.Cluster == o.ClusterName {
		if up, _ := r.acceptedUpTo(l.Token, l.Epoch, rules{}); l.Revision > up {
			return fmt.Errorf("invariant 4: set aside its data of token %s at revision %d for the operator's restore, which accepted that line up to %d", l.Token, l.Revision, up)
		}
	}
	if d.Kind == RecoverQuorum && d.From == FromSnapshot && d.Record != nil && d.Record.Token == r.Token {
		for _, p := range o.Peers {
			if p.Token == "" || p.Token == r.Token {
				continue
			}
			if up, _ := r.acceptedUpTo(p.Token, p.Epoch, rules{}); p.Revision > up {
				return fmt.Errorf("invariant 4: restored the operator's snapshot over peer %s's data of token %s at revision %d, beyond the %d it accepted of that line", p.Name, p.Token, p.Revision, up)
			}
		}
	}
	return nil
}

// checkPendingForceNew checks a start of this member's own recovery from
// data whose ForceNewCluster start is pending (the start honours the flag
// while the record names that recovery), or of its own installed restore
// (review rv14-data RV14-1): such a start beside a quorum of another line
// makes a second live cluster, and its record's confirmation sets that
// line's later writes aside (invariant 10, review rev13b); nor while an
// instance is silent, or a peer holds the source line at a higher
// revision (invariant 4; a restore's revisions are bumped), as for a
// resumed one.
func checkPendingForceNew(o Observation, name string) error {
	what := "the pending ForceNewCluster recovery"
	switch {
	case ownPendingForceNew(o, name):
	case ownInstalledRestore(o, name):
		what = "the installed restore"
	default:
		return nil
	}
	rec := o.Record
	if o.MembersKnown {
		return fmt.Errorf("invariant 10: started %s of epoch %d while cluster %x answers with a quorum", what, rec.Epoch, o.MembersClusterID)
	}
	for _, p := range o.Peers {
		if p.Healthy {
			return fmt.Errorf("invariant 10: started %s of epoch %d while peer %s is a healthy voter", what, rec.Epoch, p.Name)
		}
	}
	if o.Unreachable > 0 {
		return fmt.Errorf("invariant 10: started %s of epoch %d while %d instance(s) do not answer", what, rec.Epoch, o.Unreachable)
	}
	if len(o.KnownHealthy)+len(o.UnlistedVoters) > 0 {
		return fmt.Errorf("invariant 10: started %s of epoch %d while %s of the last known membership answer as voters", what, rec.Epoch, strings.Join(slices.Concat(o.KnownHealthy, o.UnlistedVoters), ", "))
	}
	if rec.Source != FromData {
		if o.SnapshotEpoch >= rec.Epoch {
			return fmt.Errorf("invariant 4: started %s of epoch %d while the store holds a snapshot of epoch %d, taken after the record", what, rec.Epoch, o.SnapshotEpoch)
		}
		return nil
	}
	for _, p := range o.Peers {
		if sourceLine(rec, p.Token, p.Epoch) && p.Revision > o.Local.Revision {
			return fmt.Errorf("invariant 4: started %s of epoch %d from revision %d while peer %s holds its source at revision %d", what, rec.Epoch, o.Local.Revision, p.Name, p.Revision)
		}
	}
	return nil
}
