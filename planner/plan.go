package planner

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// MaxStartFailures is how many failed starts of an added-but-unstarted
// learner make it be removed and the join start over.
const MaxStartFailures = 5

// Plan decides what this member does next. It is pure: the same
// Observation always gives the same Decision. A decision that fails Check
// is refused: Plan returns a Wait that names the broken rule instead.
func Plan(o Observation) Decision { return refuse(o, rules{}.Plan(o)) }

// Plan decides like the package's Plan with the rules f switches off.
func (f Faults) Plan(o Observation) Decision {
	return operatorHint(o, f.paused(o, epochRoom(o, f.plan(o))))
}

// epochRoom holds back a decision that records another incarnation while
// the record leaves no plausible room for a new epoch (implausibleTop: a
// planted highest_epoch of 2^64-1 made the next epoch 0, review rev14b
// D3): epochs never wrap, and only an operator ends the wait ('recover
// -from' records above what it sees, not above a planted field).
func epochRoom(o Observation, d Decision) Decision {
	if d.Record == nil || o.Record == nil || d.Record.Token == o.Record.Token && d.Record.Epoch == o.Record.Epoch {
		return d
	}
	why := o.Record.implausibleTop()
	if why == "" {
		return d
	}
	return Decision{Kind: Wait, Name: d.Name, AwaitsOperator: true, Reason: fmt.Sprintf("%s: holding back %s (%s)", why, d.Kind, d.Reason)}
}

// operatorHint names the command that ends a wait only an operator ends,
// when its reason names none: while a quorum answers, 'recover
// -keep-running' (the record then names something else that never ran:
// OperatorKeepRunning; 'recover' refuses beside a quorum), else 'recover
// -from' (OperatorRecovery, OperatorSnapshotRecovery) with what 'status'
// shows (review of the operator model, session 13, F4 and F5).
func operatorHint(o Observation, d Decision) Decision {
	if !d.AwaitsOperator || strings.Contains(d.Reason, "etcd-nomad ") {
		return d
	}
	if q, live := quorumAnswers(o); live && o.Record != nil && o.Record.ClusterID == 0 {
		d.Reason += fmt.Sprintf(" ('etcd-nomad recover -keep-running' records the cluster that answers in place of the record, while %s)", q)
		return d
	}
	d.Reason += " ('etcd-nomad status' shows every member's data; 'etcd-nomad recover -from MEMBER' or '-from snapshot:NAME' chooses the source)"
	return d
}

// PlanLeave decides like the package's PlanLeave with the rules f switches
// off.
func (f Faults) PlanLeave(o Observation) Decision { return f.paused(o, f.planLeave(o)) }

// paused holds d back while an operator paused the cluster: only a
// Wait, starting this member's own data (Rejoin: no membership change,
// and a paused cluster must still come back after a restart), and the
// recovery an operator recorded (Record.Operator: its source starts it and
// confirms it) proceed. The held decision is named in the
// reason, so status shows what resume would do.
func (r rules) paused(o Observation, d Decision) Decision {
	if o.Paused == "" || !r.holdGuard(holdWhilePaused) {
		return d
	}
	switch {
	case d.Kind == Wait && !d.NeedsLock, d.Kind == Rejoin:
		return d
	case (d.Kind == RecoverQuorum || d.Kind == RecordCluster || d.NeedsLock) && o.Record != nil && o.Record.Operator && o.Record.ClusterID == 0 && o.Record.Seeder == d.Name:
		return d // the operator's own recovery, started and confirmed by its source
	}
	what := string(d.Kind)
	if d.NeedsLock {
		what = "take the lock"
	}
	return Decision{Kind: Wait, Name: d.Name, Reason: fmt.Sprintf("paused (%s): holding back %s: %s", o.Paused, what, d.Reason)}
}

func (r rules) plan(o Observation) Decision {
	name := o.Self.Name
	if o.Local.Name != "" && r.dataGuard(persistedName) {
		// Invariant 6: identity is the name persisted in the data dir.
		name = o.Local.Name
	}
	if o.Running {
		return r.planRunning(o, name)
	}
	if !inInstances(o.Instances, o.Self.Name) {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%q is not among the provider's instances: not starting", o.Self.Name)}
	}
	if o.Local.NewerEtcd != "" {
		return Decision{Kind: Wait, Name: name, Reason: o.Local.NewerEtcd}
	}
	if o.Local.Unreadable != "" {
		return Decision{Kind: SetAside, Name: name, Aside: AsideUnreadable, Reason: "data dir unusable: " + o.Local.Unreadable}
	}
	if d, ok := r.corrupt(o, name); ok {
		return d
	}
	if !o.Local.Empty {
		return r.planWithData(o, name)
	}
	return r.planEmpty(o, name)
}

// planWithData: etcd is stopped and the data dir holds data.
func (r rules) planWithData(o Observation, name string) Decision {
	l := o.Local
	if l.Token == "" {
		return Decision{Kind: SetAside, Name: name, Aside: AsideForeign, Reason: "data dir holds etcd data without etcd-nomad metadata; its cluster cannot be verified"}
	}
	if l.Cluster != o.ClusterName && r.dataGuard(ownIncarnationOnly) {
		return Decision{Kind: SetAside, Name: name, Aside: AsideForeign, Reason: fmt.Sprintf("data belongs to cluster %q, not %q", l.Cluster, o.ClusterName)}
	}
	if o.Record == nil {
		if l.ForceNewPending && !l.Unstarted && r.resumeGuard(pendingAsRecorded) {
			// Its ForceNewCluster start began and never completed, and
			// the record is lost: started without it, the data either
			// rejoins its source cluster under the recovery's epoch (a
			// clean failure left the WAL as it was), which it would then
			// re-record over that cluster's members, or runs as a second
			// cluster of the source's id (the removals committed). While
			// another incarnation runs, its members re-record it first
			// (review rev15b D1); then the older record's rule decides.
			for _, p := range o.Peers {
				if p.Running && p.Token != l.Token {
					return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("no cluster record, and this member's recovery of epoch %d from its data began and never completed, while peer %s runs another incarnation (token %s epoch %d): waiting for it to re-record the cluster", l.Epoch, p.Name, short(p.Token), p.Epoch)}
				}
			}
			if o.MembersKnown {
				return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("no cluster record, and this member's recovery of epoch %d from its data began and never completed, while cluster %x answers with a quorum: waiting for it to re-record the cluster", l.Epoch, o.MembersClusterID)}
			}
		}
		for _, p := range o.Peers {
			if p.Running && p.Token != l.Token && p.Epoch >= l.Epoch && r.dataGuard(ownIncarnationOnly) {
				if !r.dataGuard(asideForConfirmed) {
					return Decision{Kind: SetAside, Name: name, Aside: AsideForeign, Reason: fmt.Sprintf("no cluster record, and peer %s runs another incarnation (token %s epoch %d) than this data (token %s epoch %d)", p.Name, short(p.Token), p.Epoch, short(l.Token), l.Epoch)}
				}
				// Invariant 9: without a record nothing proves which
				// incarnation is current; the peer re-records its own,
				// and a confirmed newer record then decides.
				return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("no cluster record, and peer %s runs another incarnation (token %s epoch %d) than this data (token %s epoch %d): keeping this data until a confirmed record names the current incarnation", p.Name, short(p.Token), p.Epoch, short(l.Token), l.Epoch)}
			}
		}
		if o.MembersKnown && l.MemberID != 0 && findID(o.Members, l.MemberID) < 0 && (o.MembersClusterID == l.ClusterID && l.ClusterID != 0 || !r.dataGuard(asideForConfirmed)) {
			// The list is of this data's own cluster (checked by id: with
			// no record, any cluster that answers could have sent it).
			return Decision{Kind: SetAside, Name: name, Aside: AsideRemoved, Reason: fmt.Sprintf("member %x was removed from the cluster while this member was away", l.MemberID)}
		}
		for _, p := range o.Peers {
			if p.Token != "" && p.Epoch > l.Epoch {
				if !r.dataGuard(asideForConfirmed) {
					return Decision{Kind: SetAside, Name: name, Aside: AsideForeign, Reason: fmt.Sprintf("data is from epoch %d but peer %s runs epoch %d", l.Epoch, p.Name, p.Epoch)}
				}
				return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("no cluster record; peer %s holds epoch %d, newer than this data's epoch %d: waiting for it to re-record the cluster", p.Name, p.Epoch, l.Epoch)}
			}
		}
		// Invariant 8: a lost record is re-written from the data once the
		// member runs; data never means "seed".
		return Decision{Kind: Rejoin, Name: name, Reason: fmt.Sprintf("no cluster record; starting with local data of epoch %d (revision %d) to re-record the cluster", l.Epoch, l.Revision)}
	}
	rec := o.Record
	if d, ok := r.resumeRecovery(o, name); ok {
		// This member recorded a recovery from its data and stopped
		// before restarting: finish it.
		return d
	}
	if rec.ClusterID == 0 && rec.Epoch > l.Epoch && rec.Seeder != name && l.Token != rec.Token {
		if d, ok := r.takeover(o, name); ok {
			return d
		}
		// Keep this data until the new epoch runs: if its seeder never
		// comes back, this may be the best copy left.
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("epoch %d is being seeded by %s; keeping this member's epoch %d data until it runs", rec.Epoch, rec.Seeder, l.Epoch)}
	}
	if (l.ForceNewPending || l.Unstarted || startedRestore(rec, l)) && rec.Epoch < l.Epoch && r.resumeGuard(pendingAsRecorded) {
		// This member's recovery (from this data, or a restore it
		// installed) never started, and the record names an older epoch
		// since ('recover -keep-running' recorded the cluster that
		// answers in its place): the data is not of the epoch its
		// metadata names, and re-recording that epoch would go back to a
		// recovery that never ran.
		what := fmt.Sprintf("this member's recovery of epoch %d from its data never started", l.Epoch)
		switch {
		case l.ForceNewPending && !l.Unstarted:
			what = fmt.Sprintf("this member's recovery of epoch %d from its data began and never completed (it may hold writes acknowledged while it ran)", l.Epoch)
		case !l.ForceNewPending && !l.Unstarted:
			what = fmt.Sprintf("this member's restore of epoch %d began and never completed (the operator accepted losing what it may hold)", l.Epoch)
		case !l.ForceNewPending:
			what = fmt.Sprintf("this member's restore of epoch %d was installed and never started", l.Epoch)
		}
		recorded := rec.ClusterID != 0 && o.MembersKnown && o.MembersClusterID == rec.ClusterID
		prefix, snapCopy := "is a prefix of it", "is the snapshot's, which the store keeps"
		if !l.Unstarted {
			prefix = "goes aside with what it may hold"
			snapCopy = prefix
		}
		switch q, live := quorumAnswers(o); {
		case l.ForceNewPending && !l.Unstarted && rec.top() < l.Epoch:
			// Its start began: it may hold writes acknowledged while it
			// ran. Only an operator's -accept-data-loss, which carries
			// its epoch as HighestEpoch, sets it aside; an older record
			// without it is one Consul restored from a backup (review
			// rev15-data F1).
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s, and the record names the older epoch %d (token %s), which no operator recorded over it: not setting this data (revision %d) aside; %s", what, rec.Epoch, short(rec.Token), l.Revision, startedOlderRecordHint(name))}
		case recorded && l.MemberID != 0 && findID(o.Members, l.MemberID) >= 0:
			return Decision{Kind: SetAside, Name: name, Aside: AsideForeign, Reason: fmt.Sprintf("%s, and the record names cluster %x (epoch %d), which answers with a quorum and lists member %x: this data (revision %d) %s; setting it aside to join it", what, rec.ClusterID, rec.Epoch, l.MemberID, l.Revision, prefix)}
		case recorded && l.MemberID != 0 && l.ForceNewPending:
			// Its member was removed meanwhile (stale while everything
			// waited): no list ever names it again (review rv14-data
			// RV14-2); the same data without the flag is set aside too.
			return Decision{Kind: SetAside, Name: name, Aside: AsideRemoved, Reason: fmt.Sprintf("%s, and the record names cluster %x (epoch %d), which answers with a quorum and no longer lists member %x, removed meanwhile: this data (revision %d) %s; setting it aside to join it", what, rec.ClusterID, rec.Epoch, l.MemberID, l.Revision, prefix)}
		case recorded && l.MemberID == 0:
			return Decision{Kind: SetAside, Name: name, Aside: AsideForeign, Reason: fmt.Sprintf("%s, and the record names cluster %x (epoch %d), which answers with a quorum: this restored copy (revision %d) %s; setting it aside to join it", what, rec.ClusterID, rec.Epoch, l.Revision, snapCopy)}
		case l.ForceNewPending:
			return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s, and the record names epoch %d (token %s): keeping this data (revision %d) until that cluster answers with a quorum", what, rec.Epoch, short(rec.Token), l.Revision)}
		case live:
			return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s, and the record names epoch %d (token %s), but %s: not starting it as a new cluster beside it; keeping it until the record's cluster answers with that quorum", what, rec.Epoch, short(rec.Token), q)}
		}
		// An installed restore under an older record no quorum answers
		// for (Consul restored an old record): epochs only grow, below.
	}
	if rec.Epoch < l.Epoch && r.dataGuard(epochsOnlyGrow) && r.dataGuard(ownIncarnationOnly) {
		// Invariant 9: epochs only grow. The record is older than this
		// data (Consul restored from an old snapshot, or re-recorded by a
		// member that missed a recovery): start the data, and re-record
		// it once it runs with a quorum.
		if d, ok := newerPeer(o, name, l.Epoch); ok {
			return d
		}
		if o.MembersKnown && l.MemberID != 0 && findID(o.Members, l.MemberID) < 0 {
			return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("the record names epoch %d, older than this data's epoch %d, and the member list that answered does not name member %x: waiting for a current record", rec.Epoch, l.Epoch, l.MemberID)}
		}
		return Decision{Kind: Rejoin, Name: name, Reason: fmt.Sprintf("the record names epoch %d, older than this data's epoch %d (epochs only grow): starting it to re-record the cluster", rec.Epoch, l.Epoch)}
	}
	if (l.Token != rec.Token || l.Epoch != rec.Epoch) && r.dataGuard(ownIncarnationOnly) {
		if d, ok := r.ownRestoreWhileSilent(o, name); ok {
			return d
		}
		if why, ok := r.settles(o, name); !ok && !orphaned(o) {
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: why}
		}
		if d, ok := r.keepUntilNewerRuns(o, name); ok {
			return d
		}
		return Decision{Kind: SetAside, Name: name, Aside: AsideForeign, Reason: fmt.Sprintf("data belongs to cluster token %s epoch %d, but the record names token %s epoch %d", short(l.Token), l.Epoch, short(rec.Token), rec.Epoch)}
	}
	if d, ok := r.pendingForceNew(o, name); ok {
		return d
	}
	if d, ok := r.installedRestore(o, name); ok {
		return d
	}
	if o.MembersKnown && l.MemberID != 0 && findID(o.Members, l.MemberID) < 0 {
		return Decision{Kind: SetAside, Name: name, Aside: AsideRemoved, Reason: fmt.Sprintf("member %x was removed from the cluster while this member was away", l.MemberID)}
	}
	if d, ok := peerNewerThanRecord(o, name); ok {
		return d
	}
	return Decision{Kind: Rejoin, Name: name, Reason: fmt.Sprintf("starting with local data (member %x, revision %d)", l.MemberID, l.Revision)}
}

// peerNewerThanRecord holds back the start of data of the record's epoch while
// a peer holds data of a newer epoch than any the record names, which ran
// or began to run (a start of a recovery that never completed counts: it
// may have acknowledged writes): the record is an older one Consul
// restored from a backup, and starting its cluster again would take
// writes the newer data's members set aside once they re-record their
// epoch, or make them set theirs aside (review rev15-data F1). Data that
// never started (Unstarted) is a prefix and holds nothing back. ok is
// false when no such peer answers.
func peerNewerThanRecord(o Observation, name string) (Decision, bool) {
	rec := o.Record
	if rec.ClusterID != 0 && o.MembersKnown && o.MembersClusterID == rec.ClusterID {
		return Decision{}, false // the record's cluster answers: rejoin it (review rev15b A1)
	}
	// Not while one of its members merely runs: a member cut off through
	// the newer data's recovery may run the record's cluster alone, below
	// writes the newer data acknowledged, and this member's start would
	// give it its quorum back (review rev15c C1). A restarted voter of a
	// cluster that ran on beside the newer data without this member waits
	// with it: 'recover -from' the newer data with -accept-data-loss frees
	// both (rev15b A1, the price of C1).
	for _, p := range o.Peers {
		if p.Token != "" && p.Epoch > rec.top() && !p.Unstarted {
			return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("peer %s holds data of epoch %d (token %s), newer than any the record (epoch %d) names, which ran or began to run: the record may be an older one Consul restored; not starting epoch %d beside it until that data's epoch is recorded again or an operator chooses", p.Name, p.Epoch, short(p.Token), rec.Epoch, o.Local.Epoch)}, true
		}
	}
	return Decision{}, false
}

// startedOlderRecordHint is the way out for data whose ForceNewCluster
// start began and never completed under an older record that no operator
// wrote over it: either this data (the newest epoch) seeds the cluster
// again, or the operator keeps the record's cluster and accepts losing
// what the data may hold.
func startedOlderRecordHint(name string) string {
	return fmt.Sprintf("an operator must choose: 'etcd-nomad recover -from %s' recovers from this data (with -accept-data-loss when the record's cluster ran since: its later writes are set aside), or, while the record's cluster runs with a quorum, 'etcd-nomad recover -keep-running -accept-data-loss' keeps it and sets %s's data aside", name, name)
}

// ownPendingForceNew reports whether this member's data is that of its own
// unconfirmed recovery from data whose ForceNewCluster start is pending:
// the metadata already names the recorded epoch, and the start (which
// honours the flag while the record names this recovery) never happened.
func ownPendingForceNew(o Observation, name string) bool {
	rec, l := o.Record, o.Local
	return rec != nil && l.ForceNewPending && rec.ClusterID == 0 && rec.Source == FromData && rec.Seeder == name && l.Token == rec.Token && l.Epoch == rec.Epoch
}

// pendingForceNew holds back the start of this member's own recovery from
// data when the member recorded it, rewrote its metadata, and stopped
// before its ForceNewCluster start (a crash, or starts that keep
// failing): resumeRecovery never sees it (the data already carries the
// record's token), yet the start makes the recorded epoch a one-member
// cluster from this data. What the recovery checked when it was recorded
// must still hold, as when it is resumed: no quorum answers, every
// instance answers, no member of the last known membership answers, and
// no peer holds the source incarnation at a higher revision (review
// rev13b: the old cluster got its quorum back and acknowledged writes
// 501..600; the ForceNewCluster start at 500 confirmed epoch 3 and the
// old members set their data aside). ok is false when the data is not
// such a pending start, or it may go ahead.
func (r rules) pendingForceNew(o Observation, name string) (Decision, bool) {
	if !ownPendingForceNew(o, name) || !r.resumeGuard(pendingAsRecorded) {
		return Decision{}, false
	}
	rec := o.Record
	why := fmt.Sprintf("this member recorded epoch %d as a recovery from its data and never started it", rec.Epoch)
	hint := "'etcd-nomad recover -keep-running' records the cluster that answers (this data, a prefix of its source, is then set aside)"
	if !o.Local.Unstarted {
		why = fmt.Sprintf("this member recorded epoch %d as a recovery from its data, and no start of it completed", rec.Epoch)
		hint = startedHint(name)
	}
	return r.fenceForceNew(o, name, why, hint, func(p PeerStatus) bool { return sourceLine(rec, p.Token, p.Epoch) })
}

// ownInstalledRestore reports whether this member's data is the restore
// it recorded (unconfirmed, from a snapshot) and installed, and no ready
// server ever completed its metadata (no member id): its start makes the
// recorded epoch a new one-member cluster. A restore written by hand
// ('snapshot restore', Record.ByHand) replaces the cluster on purpose and
// is not such a start.
func ownInstalledRestore(o Observation, name string) bool {
	rec, l := o.Record, o.Local
	return rec != nil && rec.ClusterID == 0 && !rec.ByHand && rec.Seeder == name && rec.Source != "" && rec.Source != FromData &&
		l.Token == rec.Token && l.Epoch == rec.Epoch && l.MemberID == 0 && l.ClusterID == 0
}

// installedRestore holds back the start of this member's own installed
// restore as pendingForceNew does a recovery from data's: the snapshot
// is fetched and verified before anything is recorded, and the start
// comes at the next loop, or after a crash at any later time, so the
// quorum check the recovery made may be minutes or hours old. Once the
// data carries the record's token, resumeRecovery, laterWrites and
// pendingForceNew do not see it (review rv14-data RV14-1: the old cluster
// got its quorum back and acknowledged writes up to 600; the restore
// started as a one-member epoch 3 beside it, and once it confirmed, the
// old members set their data aside). ok is false when the data is not
// such a restore, or it may start.
func (r rules) installedRestore(o Observation, name string) (Decision, bool) {
	if !ownInstalledRestore(o, name) || !r.resumeGuard(restoreAsRecorded) {
		return Decision{}, false
	}
	rec := o.Record
	why := fmt.Sprintf("this member recorded epoch %d (%s) and installed it, and no start of it completed", rec.Epoch, sourceName(rec.Source))
	hint := "'etcd-nomad recover -keep-running' records the cluster that answers (this restored copy, which never started, is then set aside; the snapshot stays in the store)"
	if !o.Local.Unstarted {
		hint = startedHint(name)
	}
	return r.fenceForceNew(o, name, why, hint, func(PeerStatus) bool { return false })
}

// startedHint is the way out of the fence of a start that began and never
// completed (MarkStarted ran, the cluster id was never written) beside a
// quorum: the data may hold writes acknowledged while it ran, and only an
// operator who accepts losing them sets it aside (review rev14c-data R1).
func startedHint(name string) string {
	return fmt.Sprintf("its start began and never completed, so this data may hold writes acknowledged while it ran: 'etcd-nomad recover -keep-running -accept-data-loss' records the cluster that answers and sets %s's data aside", name)
}

// startedRestore reports whether l is an installed restore whose start
// began and never completed (no member id, no cluster id, not Unstarted)
// of an epoch rec replaced: an operator's 'recover -keep-running
// -accept-data-loss' recorded the running cluster in its place (rec
// carries its epoch as HighestEpoch), accepting to lose what it may hold
// (review rev14c-data R1).
func startedRestore(rec *Record, l Local) bool {
	return !l.Unstarted && !l.ForceNewPending && !l.Empty && l.Token != "" && l.MemberID == 0 && l.ClusterID == 0 &&
		rec.Epoch < l.Epoch && rec.top() >= l.Epoch
}

// fenceForceNew holds back a start of this member's data as a new
// one-member cluster (ForceNewCluster, or an installed restore) for the
// recovery why names, resumed or pending, unless what the
// recovery checked when it was recorded still holds: no quorum answers
// (else it waits for the operator: quorumHint says how), every instance
// answers, no member of the last known membership answers, and no peer of
// the source line (source) holds a higher revision. ok is false when the
// start may go ahead.
func (r rules) fenceForceNew(o Observation, name, why, quorumHint string, source func(PeerStatus) bool) (Decision, bool) {
	l := o.Local
	if q, live := quorumAnswers(o); live {
		return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s, but %s: not restarting as a new cluster beside it; %s", why, q, quorumHint)}, true
	}
	if o.Unreachable > 0 {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s, but %d instance(s) do not answer: they may hold newer data or a working quorum; not resuming it", why, o.Unreachable)}, true
	}
	if d, ok := r.knownHealthy(o, name); ok {
		return d, true
	}
	for _, p := range o.Peers {
		if source(p) && p.Revision > l.Revision {
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s (revision %d), but peer %s holds that incarnation at revision %d: not resuming it from older data; an operator must choose", why, l.Revision, p.Name, p.Revision)}, true
		}
	}
	return Decision{}, false
}

// sourceLine reports whether token and epoch name the incarnation a
// recovery from data recorded as rec starts from (recoverySource).
func sourceLine(rec *Record, token string, epoch uint64) bool {
	if rec.LastConfirmedEpoch == 0 {
		return token != "" && epoch+1 == rec.Epoch
	}
	return token == rec.LastConfirmedToken && epoch == rec.LastConfirmedEpoch
}

// settles reports whether the record may set aside this member's data (of
// another incarnation): only a record of a newer epoch that is confirmed
// running, or a restore this member itself recorded and is about to carry
// out (invariant 9). An unconfirmed record, or one of the same epoch with
// another token (two seeds of one epoch: Consul lost its state and someone
// seeded while this data's members did not answer), never does. Nor does
// this member's own record while a quorum answers (Consul restored an old
// record of a restore this member took before the incarnation that runs
// now: sim seed 39512), or its own recovery from data (which starts from
// this data, never sets it aside). When it does not, why says so.
func (r rules) settles(o Observation, name string) (why string, ok bool) {
	rec, l := o.Record, o.Local
	if !r.dataGuard(asideForConfirmed) || !r.dataGuard(epochsOnlyGrow) && rec.Epoch < l.Epoch {
		return "", true
	}
	if rec.Epoch <= l.Epoch || rec.ClusterID == 0 && (rec.Seeder != name || rec.Source == "") {
		return conflict(rec, l), false
	}
	if rec.ClusterID != 0 {
		return "", true
	}
	if rec.Source == FromData && r.dataGuard(asideNotForOwn) {
		return fmt.Sprintf("this member recorded epoch %d as a recovery from data of token %s epoch %d, but holds token %s epoch %d: not setting it aside for a recovery it cannot carry out; an operator must choose", rec.Epoch, short(rec.LastConfirmedToken), rec.LastConfirmedEpoch, short(l.Token), l.Epoch), false
	}
	if q, live := quorumAnswers(o); live && r.dataGuard(asideNotForOwn) {
		return fmt.Sprintf("this member recorded epoch %d (%s, not confirmed), but %s: not setting its epoch %d data aside for it (Consul may have restored an old record); an operator must choose", rec.Epoch, sourceName(rec.Source), q, l.Epoch), false
	}
	if known := slices.Concat(o.KnownHealthy, o.UnlistedVoters); len(known) > 0 && r.dataGuard(asideNotForOwn) {
		// A quorum the provider no longer lists (Nomad collected its
		// allocations while they run) that the command recording this
		// restore could not see (review rev15-sim R2, sim seed 17915).
		return fmt.Sprintf("this member recorded epoch %d (%s, not confirmed), but %s of its last known membership answer as voters: their cluster may still serve writes; not setting its epoch %d data aside for it; an operator must choose", rec.Epoch, sourceName(rec.Source), strings.Join(known, ", "), l.Epoch), false
	}
	return "", true
}

// ownRestoreWhileSilent keeps this member's data while its own unconfirmed
// restore record would set it aside but some instances do not answer:
// they may hold a quorum of this data's cluster, which a partition hides
// (sim seed 2768 with the operator: an operator recorded m0's restore
// while no quorum answered, the cluster got its quorum back, then a
// partition left m0 alone, and m0 set aside its data of the live
// cluster). ok is false when the record is not such a restore or every
// instance answers (settles decides).
func (r rules) ownRestoreWhileSilent(o Observation, name string) (Decision, bool) {
	rec, l := o.Record, o.Local
	if rec.ClusterID != 0 || rec.Seeder != name || rec.Source == "" || rec.Source == FromData || rec.Epoch <= l.Epoch {
		return Decision{}, false
	}
	if o.Unreachable > 0 && r.dataGuard(asideOwnWhenAllAnswer) {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("this member recorded epoch %d (%s, not confirmed), but %d instance(s) do not answer: they may hold a quorum of this data's cluster (epoch %d); not setting it aside until every instance answers", rec.Epoch, sourceName(rec.Source), o.Unreachable, l.Epoch)}, true
	}
	if d, ok := r.laterWrites(o, name); ok {
		return d, true
	}
	return Decision{}, false
}

// laterWrites waits for an operator while this member or a peer holds
// data beyond what the operator's restore record accepted to set aside
// (Record.AcceptedRevision), or the store a snapshot of an older epoch
// beyond it: the old cluster got its quorum back after
// the record was written and acknowledged writes the restore would lose
// (sim seed 2133 with the operator: the restorer set aside its own data
// at revision 304, the operator had accepted up to 288).
func (r rules) laterWrites(o Observation, name string) (Decision, bool) {
	rec := o.Record
	if _, bounded := rec.acceptedUpTo("", 0, r); !bounded || !r.resumeGuard(resumeNotOverLaterWrites) {
		return Decision{}, false
	}
	why := fmt.Sprintf("the operator's recovery of epoch %d (%s)", rec.Epoch, sourceName(rec.Source))
	if l := o.Local; !l.Empty && l.Token != "" && l.Token != rec.Token {
		if up, _ := rec.acceptedUpTo(l.Token, l.Epoch, r); l.Revision > up {
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s accepted data of this member's line (token %s epoch %d) up to revision %d, but this member holds revision %d: writes acknowledged after the recovery was recorded; not setting them aside: %s", why, short(l.Token), l.Epoch, up, l.Revision, adoptHint)}, true
		}
	}
	for _, p := range o.Peers {
		if p.Token == "" || p.Token == rec.Token {
			continue
		}
		if up, _ := rec.acceptedUpTo(p.Token, p.Epoch, r); p.Revision > up {
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s accepted data of peer %s's line (token %s epoch %d) up to revision %d, but it holds revision %d: writes acknowledged after the recovery was recorded; not restoring over them: %s", why, p.Name, short(p.Token), p.Epoch, up, p.Revision, adoptHint)}, true
		}
	}
	// The same writes with no member left holding them: a cluster the
	// command did not see (Nomad had collected its allocations while they
	// served) went on after the record and was snapshotted; its hosts'
	// disks went with their allocations (sim seeds 417, 722, 940 with the
	// operator and collectRunning: the restore of the older snapshot lost
	// them). A snapshot carries no token: it is compared with what the
	// command accepted of its epoch.
	if s := o.LatestSnapshot; s != nil && s.Epoch < rec.Epoch && SnapshotSource(s.Name) != rec.Source && r.resumeGuard(resumeNotOverLaterSnapshot) {
		if up, _ := rec.acceptedUpTo("", s.Epoch, r); s.Revision > up {
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s accepted data of epoch %d up to revision %d, but the store holds snapshot %s (epoch %d, revision %d with its deltas): writes acknowledged after the recovery was recorded, by a cluster the command did not see; not restoring over them: %s", why, s.Epoch, up, s.Name, s.Epoch, s.Revision, adoptHint)}, true
		}
	}
	return Decision{}, false
}

// adoptHint is what an operator does when a recovery record waits beside
// data it never accepted.
const adoptHint = "an operator must choose"

// seederServesAnother reports whether the seeder of the unconfirmed
// record rec reports itself a healthy voter of another incarnation.
func seederServesAnother(o Observation, rec *Record, name string) bool {
	for _, p := range o.Peers {
		if p.Name == rec.Seeder && p.Name != name && p.Healthy && p.Token != "" && p.Token != rec.Token {
			return true
		}
	}
	return false
}

// quorumAnswers reports whether a quorum is seen alive: the member list
// answered (a linearizable read), or a peer reports itself healthy (a
// voter of a cluster with a quorum). Nothing may then start a new
// incarnation beside it or set its data aside for one (invariant 10).
func quorumAnswers(o Observation) (string, bool) {
	if o.MembersKnown {
		return fmt.Sprintf("cluster %x answers with a quorum", o.MembersClusterID), true
	}
	for _, p := range o.Peers {
		if p.Healthy {
			return fmt.Sprintf("peer %s reports itself a healthy voter (token %s epoch %d)", p.Name, short(p.Token), p.Epoch), true
		}
	}
	return "", false
}

// resumeRecovery finishes a recovery from data this member recorded and has
// not started yet (the record names it, unconfirmed, with an epoch newer
// than its data): only from data of the incarnation the recovery was
// recorded from, only while no quorum answers and every instance does, and
// only while no peer holds that incarnation at a higher revision: what the
// recovery checked when it was recorded must still hold. Consul may have
// restored the record long after: this member may hold another
// incarnation since, or its old one may have a quorum again and have
// moved on; a ForceNewCluster start then makes a second live cluster, or
// drops writes (sim seeds 40941, 48966). ok is false when the record is not
// such a recovery.
func (r rules) resumeRecovery(o Observation, name string) (Decision, bool) {
	rec, l := o.Record, o.Local
	if rec.ClusterID != 0 || rec.Seeder != name || rec.Source != FromData || l.Token == rec.Token || rec.Epoch <= l.Epoch {
		return Decision{}, false
	}
	why := fmt.Sprintf("this member recorded epoch %d as a recovery from its data", rec.Epoch)
	if !r.resumeGuard(resumeAsRecorded) {
		if rec.Epoch != l.Epoch+1 {
			return Decision{}, false
		}
	} else {
		if !recoverySource(rec, l) {
			return Decision{}, false // settles says why it waits
		}
		if d, ok := r.fenceForceNew(o, name, why, "an operator must choose", func(p PeerStatus) bool { return p.Token == l.Token && p.Epoch == l.Epoch }); ok {
			return d, true
		}
		if d, ok := listingUnanswered(o, name, why); ok {
			return d, true // the store may hold a newer snapshot (review rev15b R1c)
		}
		if d, ok := r.laterWrites(o, name); ok {
			return d, true
		}
		// A member's own recovery chose this data over the store's
		// newest snapshot when it recorded (an operator's names what its
		// command saw: laterWrites): a newer one now was taken of a
		// cluster that went on after the record (review rev15-sim R1).
		_, bounded := rec.acceptedUpTo("", 0, r)
		// A snapshot of the record's epoch or above is later than the
		// record, whoever wrote it: a recovery's epoch is above every
		// snapshot its command or its member saw (review rev15c C4, and
		// rev15d F1 for an operator's), and this data never ran as the
		// record's epoch (its token is not the record's), so a snapshot
		// of that epoch is another line's, taken after Consul lost the
		// record and a second recovery chose the same epoch number
		// (rev15d F2): revisions of two lines do not compare. Below the
		// record's epoch, a member's own recovery compares by revision
		// from this data's epoch (rev15b R1b); an operator's compares
		// with what its command accepted (laterWrites).
		if s := o.LatestSnapshot; s != nil && (s.Epoch >= rec.Epoch || !bounded && s.Epoch >= l.Epoch && s.Revision > l.Revision) && r.resumeGuard(resumeNotOverLaterSnapshot) {
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s at revision %d, but the store holds snapshot %s (epoch %d, revision %d with its deltas), newer: writes acknowledged after the recovery was recorded; not resuming from older data: %s", why, l.Revision, s.Name, s.Epoch, s.Revision, adoptHint)}, true
		}
		// The member lists a snapshot of an epoch above an unconfirmed
		// record's outside its lineage (snapshot.Lineage), so such a
		// snapshot is never LatestSnapshot: SnapshotEpoch, the highest
		// epoch of any snapshot that authenticates, names it (review
		// rev16a A1: the resume went ahead below epoch 3's snapshot).
		if o.SnapshotEpoch >= rec.Epoch && r.resumeGuard(resumeNotOverLaterSnapshot) {
			which := fmt.Sprintf("a snapshot of epoch %d", o.SnapshotEpoch)
			if rs := o.RefusedSnapshot; rs != nil && rs.Epoch == o.SnapshotEpoch {
				which = fmt.Sprintf("snapshot %s of epoch %d", rs.Name, rs.Epoch)
			}
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s at revision %d, but the store holds %s, taken after the recovery was recorded (of another incarnation: it may hold writes acknowledged since); not resuming from older data: %s", why, l.Revision, which, adoptHint)}, true
		}
	}
	if !o.HoldsLock {
		return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: why + ": taking the lock to resume it"}, true
	}
	rc := *rec
	return Decision{Kind: RecoverQuorum, Name: name, From: FromData, Record: &rc, Reason: fmt.Sprintf("resuming the recovery of epoch %d from this member's data", rec.Epoch)}, true
}

// recoverySource reports whether l is the incarnation a recovery from data
// recorded as rec starts from: the last confirmed one it carries (records
// written before it was carried: the epoch before).
func recoverySource(rec *Record, l Local) bool {
	if rec.LastConfirmedEpoch == 0 {
		return l.Epoch+1 == rec.Epoch
	}
	return l.Token == rec.LastConfirmedToken && l.Epoch == rec.LastConfirmedEpoch
}

// keepUntilNewerRuns keeps data of an older epoch than a confirmed record
// until a peer shows the recorded incarnation running with a quorum. The
// record proves that incarnation ran, not that it still has a copy: its
// seeder may have been its only member and left with its disk (sim seeds
// 1643, 1906, 1955, 2199: a ForceNewCluster recovery confirmed, then the
// seeder's allocation stopped for good). Set aside, this data (possibly
// newer than any snapshot) no longer counts for the next recovery, which
// restores an older snapshot instead. Kept, pickRecovery sees it. ok is
// false when the data may be set aside (or this is the member's own
// recovery, which sets it aside itself).
func (r rules) keepUntilNewerRuns(o Observation, name string) (Decision, bool) {
	rec, l := o.Record, o.Local
	if !r.dataGuard(asideOnceNewerRuns) || rec.ClusterID == 0 || rec.Epoch <= l.Epoch {
		return Decision{}, false
	}
	held := false
	for _, p := range o.Peers {
		if p.Token == rec.Token && p.Epoch == rec.Epoch {
			if p.Running && p.Healthy {
				return Decision{}, false
			}
			held = true
		}
	}
	if d, ok := r.recovery(o, name); ok && (d.Kind != Wait || d.NeedsLock) {
		// The recorded incarnation lost its quorum, and this member is
		// the one to recover it (the others' pickRecovery sees this data
		// and names it: sim seeds 41358, 43370, where every other member
		// waited for it while it kept its data).
		return d, true
	}
	why := fmt.Sprintf("the record names epoch %d (token %s), newer than this data's epoch %d (token %s, revision %d), but no peer shows it running with a quorum", rec.Epoch, short(rec.Token), l.Epoch, short(l.Token), l.Revision)
	if !held && o.Unreachable == 0 && (o.LatestSnapshot == nil || o.LatestSnapshot.Revision < l.Revision) {
		snap := "there is no snapshot"
		if s := o.LatestSnapshot; s != nil {
			snap = fmt.Sprintf("the newest snapshot %s is older (revision %d)", s.Name, s.Revision)
		}
		return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s, no member holds it and %s: this data may hold writes no other copy has; keeping it: an operator must choose what to restore", why, snap)}, true
	}
	return Decision{Kind: Wait, Name: name, Reason: why + ": keeping this data until it does (it may be the best copy left)"}, true
}

// orphaned reports whether stopped data of the same epoch as a confirmed
// record, but another token, belongs to no live incarnation: the recorded
// cluster answers with a quorum (checked by its cluster id) and no peer
// holds the data's token. Such data came from elsewhere (a reused volume,
// another deployment of the same name): setting it aside cannot cost the
// recorded cluster anything. While a peer still holds the token, the two
// incarnations are a conflict for an operator (a second seed).
func orphaned(o Observation) bool {
	rec, l := o.Record, o.Local
	if rec == nil || rec.ClusterID == 0 || rec.Epoch != l.Epoch || l.Token == rec.Token || !o.MembersKnown || o.MembersClusterID != rec.ClusterID {
		return false
	}
	for _, p := range o.Peers {
		if p.Token == l.Token {
			return false
		}
	}
	return o.Unreachable == 0
}

func conflict(rec *Record, l Local) string {
	state := "confirmed"
	if rec.ClusterID == 0 {
		state = "not confirmed"
	}
	return fmt.Sprintf("the record names token %s epoch %d (%s, seeded by %s), but this data is token %s epoch %d: only a confirmed newer epoch sets data aside; keeping it (two incarnations: an operator must choose)", short(rec.Token), rec.Epoch, state, rec.Seeder, short(l.Token), l.Epoch)
}

// newerPeer returns a Wait when a peer reports data of an epoch newer than
// epoch: this member's data is not the newest, so it must not re-record.
func newerPeer(o Observation, name string, epoch uint64) (Decision, bool) {
	for _, p := range o.Peers {
		if p.Token != "" && p.Epoch > epoch {
			return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("peer %s holds epoch %d, newer than this member's epoch %d: not re-recording the cluster from older data", p.Name, p.Epoch, epoch)}, true
		}
	}
	return Decision{}, false
}

// planEmpty: etcd is stopped and the data dir is empty.
func (r rules) planEmpty(o Observation, name string) Decision {
	rec := o.Record
	if rec == nil || !r.seedGuard(noSeedOverRecord) && !o.MembersKnown {
		for _, p := range o.Peers {
			if p.Token != "" && r.seedGuard(noSeedBesidePeerData) {
				return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("no cluster record, but peer %s holds data of epoch %d: waiting for it to re-record the cluster", p.Name, p.Epoch)}
			}
		}
		if o.Unreachable > 0 && r.seedGuard(noSeedWhileSilent) {
			// Invariant 8: a silent instance may hold the cluster's data
			// (Consul lost its state while a peer restarts): seeding now
			// would start a second cluster whose record sets it aside.
			return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("no cluster record, but %d instance(s) do not answer: they may hold the cluster's data; not seeding until every instance answers", o.Unreachable)}
		}
		if d, ok := r.knownHealthy(o, name); ok {
			// Consul lost its state (the record with it) while a
			// majority the provider no longer lists still serves: a
			// seed or a restore here would start a second cluster.
			return d
		}
		if r.seedGuard(noSeedWithoutListing) {
			// Nor on a store whose listing did not answer: it may hold
			// the cluster's snapshots (LatestSnapshot nil is unknown).
			if d, ok := listingUnanswered(o, name, "no cluster record and no member holds data"); ok {
				return d
			}
		}
		if r.seedGuard(noSeedBesideRefused) {
			// Nor beside an object of the store members refuse (no MAC,
			// or the previous KEK's): the cluster's data may live only
			// there; seeding empty, or restoring an older snapshot, would
			// abandon it.
			s := o.LatestSnapshot
			if d, ok := refusedAhead(o, name, s != nil && r.seedGuard(restoreBeforeSeed), snapshotRevision(s), "no cluster record and no member holds data"); ok {
				return d
			}
		}
		if s := o.LatestSnapshot; s != nil && r.seedGuard(restoreBeforeSeed) {
			// Consul lost its state and every member its data, but the
			// store holds the cluster's snapshots: seeding empty would
			// abandon them. Restore the newest as the next epoch.
			return r.seedFromSnapshot(o, name)
		}
		if !o.HoldsLock {
			return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: "no cluster record: taking the lock to seed"}
		}
		return Decision{Kind: Seed, Name: name, Record: &Record{Token: o.NewToken, Epoch: 1, Seeder: name},
			Reason: "no cluster record and no data anywhere: seeding a new one-member cluster"}
	}
	if rec.ClusterID == 0 && !o.MembersKnown {
		if rec.Seeder == name && o.Unreachable > 0 && r.resumeGuard(resumeWhenAllAnswer) {
			// This member recorded the seed (or restore) and has lost its
			// disk since, or never started it: but it may have started it,
			// and others joined, before the disk was lost (Consul then
			// restored the unconfirmed record). A silent instance may hold
			// that incarnation: starting it again would make a second
			// cluster of the same token and epoch.
			return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("this member recorded epoch %d but holds no data of it, and %d instance(s) do not answer: they may run it; not starting it again until every instance answers", rec.Epoch, o.Unreachable)}
		}
		if rec.Seeder == name {
			if d, ok := r.knownHealthy(o, name); ok {
				// Consul restored this member's old record while a
				// cluster the provider no longer lists still serves. Or
				// an operator recorded this restore while one serves
				// (the command checks only what the provider lists):
				// it is theirs to stop those members or take the
				// record back, and the wait says so.
				if rec.Operator {
					d.AwaitsOperator = true
					d.Reason += "; the operator's recorded restore waits: stop those members (they are a live cluster) or record another recovery"
				}
				return d
			}
		}
		if rec.Seeder == name && rec.Source != FromData && r.resumeGuard(resumeNotOverNewerSnapshot) {
			if d, ok := r.restoreOverOwnRecord(o, name); ok {
				return d
			}
		}
		if snap, ok := rec.Source.Snapshot(); rec.Seeder == name && ok {
			for _, p := range o.Peers {
				if p.Token == rec.Token {
					// The recovery ran on a disk this member has lost
					// since (its record came back with a Consul restore):
					// the incarnation lives at the peer; join it.
					return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("peer %s holds data of the epoch %d this member recorded; waiting to join it instead of restoring again", p.Name, rec.Epoch)}
				}
			}
			for _, p := range o.Peers {
				if p.Token != "" && p.Epoch >= rec.Epoch && r.resumeGuard(resumeNotBesideNewer) {
					// No incarnation of an epoch as new as the record's
					// existed when it was written (a restore records the
					// epoch after every one it saw): one ran since, and
					// Consul brought this record back (sim seed 243 with
					// the operator: an operator's restore record came back
					// beside a confirmed recovery of its epoch).
					return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("this member recorded epoch %d as a restore of snapshot %s, but peer %s holds another incarnation of epoch %d (token %s, revision %d), which ran after the record was written: not restoring beside it; an operator must choose", rec.Epoch, snap, p.Name, p.Epoch, short(p.Token), p.Revision)}
				}
			}
			if d, ok := r.laterWrites(o, name); ok {
				return d
			}
			if s := o.LatestSnapshot; rec.Operator && s != nil && s.Name != snap && s.Epoch >= rec.Epoch && r.resumeGuard(resumeNotBesideNewer) {
				// The same with no copy left but the store's: the newest
				// snapshot was taken of an incarnation that ran after
				// the operator's record (an automatic restore record
				// gives way to it, restoreOverOwnRecord; the operator's
				// chose its snapshot, then: sim seed 243 with RotateCA).
				return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("this member recorded epoch %d as an operator's restore of snapshot %s, but the store holds snapshot %s of epoch %d (revision %d), taken of an incarnation that ran after the record was written: not restoring the older one; an operator must choose", rec.Epoch, snap, s.Name, s.Epoch, s.Revision)}
			}
			if s := o.LatestSnapshot; rec.Operator && s != nil && s.Name == snap && rec.SourceRevision > 0 && s.Revision < rec.SourceRevision && r.resumeGuard(resumeWhenChainReaches) {
				// A segment of the chain the command verified was found
				// damaged since (by this member's install or a peer's):
				// the install refuses below SourceRevision every time, so
				// the restore can never finish as recorded. Said, not
				// retried for good (sim seed 121 with the operator and
				// collectRunning: a silent wedge).
				return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("this member recorded epoch %d as an operator's restore of snapshot %s verified to revision %d, but its delta chain now verifies only to revision %d (a segment damaged since): the restore cannot finish as recorded; an operator must choose (recover -from snapshot:%s -accept-data-loss restores up to revision %d)", rec.Epoch, snap, rec.SourceRevision, s.Revision, snap, s.Revision)}
			}
			if !o.HoldsLock {
				return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: "resuming the recovery this member recorded: taking the lock"}
			}
			rc := *rec
			return Decision{Kind: RecoverQuorum, Name: name, From: FromSnapshot, Target: snap, Record: &rc,
				Reason: fmt.Sprintf("resuming the recovery of epoch %d from snapshot %s", rec.Epoch, snap)}
		}
		if rec.Seeder == name && rec.Source == FromData {
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: "this member recorded a recovery from data it no longer holds: an operator must restore a snapshot"}
		}
		if rec.Seeder == name {
			for _, p := range o.Peers {
				if p.Token == rec.Token {
					return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("peer %s holds data of this cluster; waiting to join it", p.Name)}
				}
			}
			for _, p := range o.Peers {
				if p.Token != "" && p.Epoch >= rec.Epoch {
					// Consul restored this member's old seed record while
					// another incarnation runs: resuming would make two.
					return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("this member recorded a seed of epoch %d, but peer %s holds another incarnation (token %s epoch %d): not resuming it; an operator must choose", rec.Epoch, p.Name, short(p.Token), p.Epoch)}
				}
			}
			if !o.HoldsLock {
				return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: "seed recorded but not started: taking the lock to resume it"}
			}
			rc := *rec
			return Decision{Kind: Seed, Name: name, Record: &rc, Reason: "resuming the seed this member recorded before it stopped"}
		}
		if d, ok := r.takeover(o, name); ok {
			return d
		}
		if d, ok := r.takeoverSeed(o, name); ok {
			return d
		}
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("waiting for seeder %s to start the cluster", rec.Seeder)}
	}
	if !o.MembersKnown {
		if d, ok := r.recovery(o, name); ok {
			return d
		}
		return Decision{Kind: Wait, Name: name, Reason: "cluster member list unreachable (no quorum or no running member): cannot join yet"}
	}
	if rec.ClusterID == 0 && r.changeGuard(joinOnlyConfirmed) {
		// The member list may come from any cluster that answers: only a
		// confirmed cluster id lets it be checked.
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("the record of epoch %d is not confirmed yet (seeder %s): not joining until it names its cluster id", rec.Epoch, rec.Seeder)}
	}
	if r.changeGuard(joinNotUnderNewer) {
		// Consul restored an older record of the same cluster id (a
		// ForceNewCluster recovery keeps it), so the member list checks
		// out, but a peer runs a newer epoch: joining now would label
		// this member's data with the old incarnation. The peer
		// re-records first (invariant 9).
		if d, ok := newerThanRecord(o, name); ok {
			d.Reason += "; not joining until then"
			return d
		}
	}
	for _, m := range o.Members {
		if m.Name == name {
			if m.Healthy || m.ID == o.LeaderID {
				return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("member %x runs under this member's name %q and looks alive: waiting for it to fail before replacing it", m.ID, name)}
			}
			// Our old identity: its data is gone, so it can never come back.
			d := r.removal(o, m, fmt.Sprintf("this member's data dir is empty, so its old identity %x is stale", m.ID))
			d.Name = name
			return d
		}
	}
	for _, m := range o.Members {
		if m.Name == "" && contains(m.PeerURLs, o.Self.PeerURL) {
			if o.StartFailures >= MaxStartFailures && m.Learner && m.ID != o.LeaderID {
				// The learner slot is poisoned (the cluster it was added
				// to cannot be reached as recorded): free it, join anew.
				d := r.removal(o, m, fmt.Sprintf("starting as learner %x failed %d times", m.ID, o.StartFailures))
				d.Name = name
				return d
			}
			return Decision{Kind: ResumeJoin, Name: name, MemberID: m.ID, Reason: fmt.Sprintf("already added as member %x; starting it", m.ID)}
		}
	}
	if inFlight := changeInFlight(o.Members); inFlight != "" && r.changeGuard(oneChangeAtATime) {
		return Decision{Kind: Wait, Name: name, Reason: inFlight + ": one membership change at a time"}
	}
	if v := slotVoters(o); v >= o.DesiredSize && r.changeGuard(joinBelowSize) {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("cluster has %d of %d voters: waiting for a stale member to be removed", v, o.DesiredSize)}
	}
	if !o.HoldsLock {
		return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: "taking the lock to join as a learner"}
	}
	return Decision{Kind: JoinAsLearner, Name: name, Reason: fmt.Sprintf("joining cluster %x as a learner", rec.ClusterID)}
}

// planRunning: this member's etcd runs.
func (r rules) planRunning(o Observation, name string) Decision {
	rec := o.Record
	if rec == nil || rec.Epoch < o.Local.Epoch && r.dataGuard(epochsOnlyGrow) {
		return r.rerecord(o, name)
	}
	if o.Local.Token != "" && (rec.Token != o.Local.Token || rec.Epoch != o.Local.Epoch) {
		if rec.ClusterID == 0 && rec.Seeder != name && rec.Epoch > o.Local.Epoch {
			if d, ok := r.takeover(o, name); ok {
				return d
			}
			if o.MembersKnown && o.RecoveryGrace > 0 && o.SeederGoneFor >= o.RecoveryGrace {
				// Consul restored an old record whose seeder is gone for
				// good, while this incarnation runs with a quorum: a
				// takeover would start a second cluster beside it
				// (invariant 10), and re-recording this older epoch would
				// make the record's epoch go back (invariant 9).
				return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("epoch %d was recorded by %s, gone for %s, and never confirmed, while this member's epoch %d runs with a quorum: no takeover beside a live cluster and no older epoch recorded over a newer one; an operator must choose", rec.Epoch, rec.Seeder, o.SeederGoneFor, o.Local.Epoch)}
			}
			if o.MembersKnown && seederServesAnother(o, rec, name) {
				// The seeder serves this cluster (or another) with a
				// quorum beside its own record: it never starts the
				// recorded epoch beside a quorum (settles), and nothing
				// else ends the wait.
				return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("epoch %d was recorded by %s, never confirmed, and %s serves another incarnation with a quorum: it never starts the recorded epoch beside a quorum; keeping this member's epoch %d running", rec.Epoch, rec.Seeder, rec.Seeder, o.Local.Epoch)}
			}
			return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("epoch %d is being seeded by %s; keeping this member's epoch %d running until it runs", rec.Epoch, rec.Seeder, o.Local.Epoch)}
		}
		if d, ok := r.resumeRecovery(o, name); ok {
			// This member recorded a recovery from its data but its
			// old incarnation still runs: restart it as the new one.
			return d
		}
		if d, ok := r.ownRestoreWhileSilent(o, name); ok {
			return d
		}
		if why, ok := r.settles(o, name); !ok {
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: why}
		}
		if d, ok := r.keepUntilNewerRuns(o, name); ok {
			return d
		}
		// The cluster was re-seeded (restore, recovery): this incarnation
		// is over. Invariant 5: stop, set the data aside, join the new one.
		return Decision{Kind: SetAside, Name: name, Aside: AsideForeign, Reason: fmt.Sprintf("the record names epoch %d (token %s); this member runs epoch %d (token %s): stopping and setting its data aside", rec.Epoch, short(rec.Token), o.Local.Epoch, short(o.Local.Token))}
	}
	if !o.MembersKnown {
		if rec.ClusterID == 0 && rec.Token == o.Local.Token && o.Local.ClusterID != 0 && o.Unreachable == 0 {
			// The recorded seed ran (this member's data names its
			// cluster id) but the record is unconfirmed: Consul restored
			// it, or the seeder was lost before confirming, and the
			// quorum is lost. Unconfirmed, it is never recovered; its
			// seeder may be gone for good. Every instance answers and
			// none holds a newer epoch: confirm it from this data, so
			// that the quorum loss can be recovered.
			if d, ok := newerPeer(o, name, o.Local.Epoch); ok {
				return d
			}
			if !o.HoldsLock {
				return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: "running the recorded incarnation, unconfirmed, without quorum: taking the lock to confirm it"}
			}
			rc := *rec
			rc.ClusterID = o.Local.ClusterID
			return Decision{Kind: RecordCluster, Name: name, Record: &rc, Reason: fmt.Sprintf("running the recorded incarnation (cluster %x) without quorum and every instance answers: confirming it in the record so that its quorum loss can be recovered", rc.ClusterID)}
		}
		if d, ok := r.recovery(o, name); ok {
			return d
		}
		return Decision{Kind: Wait, Name: name, Reason: "running; member list unreachable (no quorum yet)"}
	}
	i := findID(o.Members, o.SelfID)
	if i < 0 {
		return Decision{Kind: SetAside, Name: name, Aside: AsideRemoved, Reason: fmt.Sprintf("member %x is no longer in the cluster: stopping and setting its data aside", o.SelfID)}
	}
	self := o.Members[i]
	if d, ok := r.corrupt(o, name); ok {
		return d
	}
	if o.Self.PeerURL != "" && !contains(self.PeerURLs, o.Self.PeerURL) {
		// Data adopted from a previous allocation (Nomad moved its disk):
		// the member runs at a new address; peers must learn it.
		if !o.HoldsLock {
			return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: "this member's peer URL changed: taking the lock to update it"}
		}
		return Decision{Kind: UpdatePeerURL, Name: name, MemberID: self.ID, Reason: fmt.Sprintf("the membership names peer URLs %v for this member, which now listens on %s: updating them", self.PeerURLs, o.Self.PeerURL)}
	}
	if o.Record.ClusterID == 0 && o.Record.Token == o.Local.Token && o.Local.ClusterID != 0 {
		if !o.HoldsLock {
			return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: "cluster started but not confirmed in the record: taking the lock"}
		}
		rc := *o.Record
		rc.ClusterID = o.Local.ClusterID
		return Decision{Kind: RecordCluster, Name: name, Record: &rc, Reason: fmt.Sprintf("confirming cluster %x in the record", rc.ClusterID)}
	}
	if rc := o.Record; rc.ClusterID != 0 && o.Local.ClusterID != 0 && rc.ClusterID != o.Local.ClusterID && rc.Token == o.Local.Token &&
		o.MembersClusterID == o.Local.ClusterID && o.Unreachable == 0 {
		// The record names this incarnation's token and epoch but another
		// cluster id: an earlier start of the same seed, all of whose
		// copies were lost before Consul restored its unconfirmed record
		// and this member's seed resumed; then Consul restored the old
		// confirmed record too. No member could ever join (the member
		// list never checks out): record the cluster that answers with
		// a quorum (sim seeds 23155, 43442).
		if !o.HoldsLock {
			return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: fmt.Sprintf("the record names cluster %x for this incarnation, which runs as cluster %x: taking the lock to correct it", rc.ClusterID, o.Local.ClusterID)}
		}
		nr := *rc
		nr.ClusterID = o.Local.ClusterID
		return Decision{Kind: RecordCluster, Name: name, Record: &nr, Reason: fmt.Sprintf("the record names cluster %x for this incarnation, which runs as cluster %x with a quorum and every instance answering: recording cluster %x", rc.ClusterID, o.Local.ClusterID, o.Local.ClusterID)}
	}
	if self.Learner {
		if !o.HoldsLock {
			return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: "learner: taking the lock to promote"}
		}
		return Decision{Kind: Promote, Name: name, MemberID: self.ID, Reason: "learner: promoting once caught up with the leader"}
	}
	if d, ok := r.disarmCorrupt(o, name); ok {
		return d
	}
	// Housekeeping is done by one voter: the leader, or the lowest-id
	// healthy voter when the leader is itself stale.
	cands := r.staleMembers(o)
	if len(cands) == 0 {
		if d, ok := r.replacement(o, name); ok {
			return d
		}
		if d, ok := r.reclaimSpace(o, name); ok {
			return d
		}
		return Decision{Kind: Wait, Name: name, Reason: "healthy; nothing to do"}
	}
	if !actsForCluster(o, cands) {
		return Decision{Kind: Wait, Name: name, Reason: "another voter handles stale members"}
	}
	d := r.removal(o, cands[0], fmt.Sprintf("member %s (%x) has been absent from the provider for %s", displayName(cands[0]), cands[0].ID, cands[0].AbsentFor))
	d.Name = name
	return d
}

// rerecord writes the record from this running member's data when it is
// missing (invariant 8) or older than the data (invariant 9: epochs only
// grow): only with the membership known (a quorum of this incarnation
// answers) or every instance answering, and no peer at a newer epoch.
func (r rules) rerecord(o Observation, name string) Decision {
	why := "cluster record missing"
	if o.Record != nil {
		why = fmt.Sprintf("the record names epoch %d, older than this member's epoch %d (epochs only grow)", o.Record.Epoch, o.Local.Epoch)
	}
	if o.Local.Token == "" {
		return Decision{Kind: Wait, Name: name, Reason: why + ", and this member's metadata names no incarnation: not re-recording"}
	}
	if p, ok := fellowVoterOlder(o); ok && r.dataGuard(onlyEpochsThatRan) {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s, but member %s of this member's own cluster %x runs it as token %s epoch %d: this member's metadata (token %s epoch %d) names an epoch its data never ran (a recovery whose ForceNewCluster start never happened); not re-recording it, %s re-records the cluster", why, p.Name, o.Local.ClusterID, short(p.Token), p.Epoch, short(o.Local.Token), o.Local.Epoch, p.Name)}
	}
	if d, ok := newerPeer(fellowsAside(o), name, o.Local.Epoch); ok && r.dataGuard(epochsOnlyGrow) {
		return d
	}
	if !o.MembersKnown && o.Unreachable > 0 && r.dataGuard(epochsOnlyGrow) {
		// Without a quorum the membership is unknown: only when every
		// instance answers (none at a newer epoch, checked above) is this
		// data known to be the newest there is. Then re-record, so that
		// a lost quorum can still be recovered.
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s: %d instance(s) do not answer and this incarnation has no quorum: not re-recording", why, o.Unreachable)}
	}
	if !o.HoldsLock {
		return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: why + ": taking the lock to re-record it"}
	}
	return Decision{Kind: RecordCluster, Name: name, Record: &Record{ClusterID: o.Local.ClusterID, Token: o.Local.Token, Epoch: o.Local.Epoch, Seeder: name, HighestEpoch: o.Record.carried(o.Local.Epoch)},
		Reason: why + ": re-recording it from this member's data"}
}

// fellowVoter reports whether p runs as a healthy voter of this running
// member's own cluster: the member list this member's etcd answers with
// names p's member id, and p reports the same cluster id. All members of
// one cluster hold the same incarnation: they joined it, or seeded it.
func fellowVoter(o Observation, p PeerStatus) bool {
	return o.Running && o.MembersKnown && o.Local.ClusterID != 0 && o.MembersClusterID == o.Local.ClusterID &&
		p.Running && p.Healthy && p.Token != "" && p.ClusterID == o.Local.ClusterID && p.MemberID != 0 && findID(o.Members, p.MemberID) >= 0
}

// fellowVoterOlder returns a fellow voter (fellowVoter) that runs this
// member's cluster as an older epoch than this member's metadata names:
// the metadata was rewritten for a recovery from this data whose
// ForceNewCluster start never happened, and the start that did happen
// rejoined the old cluster (review rv14-data RV14-4: re-recording the
// unstarted epoch made the cluster's other members set their running
// data aside for it).
func fellowVoterOlder(o Observation) (PeerStatus, bool) {
	for _, p := range o.Peers {
		if fellowVoter(o, p) && p.Epoch < o.Local.Epoch {
			return p, true
		}
	}
	return PeerStatus{}, false
}

// fellowsAside is o without the fellow voters (fellowVoter) whose
// metadata names a newer epoch than this member's: one cluster runs one
// incarnation, and theirs is one they never ran (fellowVoterOlder, seen
// from them).
func fellowsAside(o Observation) Observation {
	var peers []PeerStatus
	for _, p := range o.Peers {
		if !fellowVoter(o, p) || p.Epoch <= o.Local.Epoch {
			peers = append(peers, p)
		}
	}
	o.Peers = peers
	return o
}

// replacement hands the instance of a voter that has stayed unhealthy past
// ReplaceAfter back to the provider: only by the leader, one at a time,
// never while a replacement or a membership change is in flight, and only
// while the healthy voters keep quorum without it.
func (r rules) replacement(o Observation, name string) (Decision, bool) {
	if o.ReplaceAfter <= 0 || o.LeaderID != o.SelfID {
		return Decision{}, false
	}
	var target *Member
	for i, m := range o.Members {
		if m.Learner || m.Name == "" || m.Healthy || m.UnhealthyFor < o.ReplaceAfter || !inInstances(o.Instances, m.Name) {
			continue
		}
		if target == nil || m.UnhealthyFor > target.UnhealthyFor {
			target = &o.Members[i]
		}
	}
	if target == nil {
		return Decision{}, false
	}
	why := fmt.Sprintf("member %s has been unhealthy for %s", target.Name, target.UnhealthyFor)
	if o.ReplacementInFlight && r.changeGuard(oneReplaceAtATime) {
		return Decision{Kind: Wait, Name: name, Reason: why + "; but a replacement is already in flight"}, true
	}
	if inFlight := changeInFlight(o.Members); inFlight != "" && r.changeGuard(oneReplaceAtATime) {
		return Decision{Kind: Wait, Name: name, Reason: why + "; but " + inFlight}, true
	}
	if hv, v := healthyVoters(o.Members), voters(o.Members); hv < Quorum(v) && r.changeGuard(keepQuorum) {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s; but only %d of %d voters are healthy", why, hv, v)}, true
	}
	if !o.HoldsLock {
		return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: why + ": taking the lock to replace its instance"}, true
	}
	return Decision{Kind: ReplaceInstance, Name: name, Target: target.Name, MemberID: target.ID, Reason: why + ": asking the provider to replace its instance"}, true
}

// staleMembers lists the members that may be removed, best choice first:
// learners and unstarted members, then unhealthy, then healthy voters; the
// leader last (invariant 3).
func (r rules) staleMembers(o Observation) []Member {
	var out []Member
	for _, m := range o.Members {
		if m.ID == o.SelfID || m.AbsentFor < o.StaleAfter || o.StaleAfter <= 0 {
			continue
		}
		out = append(out, m)
	}
	rank := func(m Member) int {
		switch {
		case m.ID == o.LeaderID:
			if !r.changeGuard(leaderRemovedLast) {
				return -1
			}
			return 3
		case m.Learner || m.Name == "":
			return 0
		case !m.Healthy:
			return 1
		}
		return 2
	}
	sort.SliceStable(out, func(i, j int) bool {
		if rank(out[i]) != rank(out[j]) {
			return rank(out[i]) < rank(out[j])
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// actsForCluster reports whether this member is the one voter that does
// housekeeping: the leader, unless it is a candidate for removal.
func actsForCluster(o Observation, cands []Member) bool {
	leaderStale := false
	for _, c := range cands {
		if c.ID == o.LeaderID {
			leaderStale = true
		}
	}
	if o.LeaderID != 0 && !leaderStale {
		return o.SelfID == o.LeaderID
	}
	stale := map[uint64]bool{}
	for _, c := range cands {
		stale[c.ID] = true
	}
	var lowest uint64
	for _, m := range o.Members {
		if !m.Learner && m.Healthy && m.Name != "" && !stale[m.ID] && (lowest == 0 || m.ID < lowest) {
			lowest = m.ID
		}
	}
	return lowest == o.SelfID
}

// removal returns RemoveMember for m if it is safe (invariants 2 and 3),
// otherwise Wait.
func (r rules) removal(o Observation, m Member, why string) Decision {
	isVoter := !m.Learner
	if isVoter {
		if inFlight := changeInFlight(o.Members); inFlight != "" && r.changeGuard(oneChangeAtATime) {
			return Decision{Kind: Wait, Reason: why + "; but " + inFlight + ": one membership change at a time"}
		}
		after := voters(o.Members) - 1
		healthyAfter := healthyVoters(o.Members)
		if m.Healthy {
			healthyAfter--
		}
		if after < 1 || healthyAfter < Quorum(after) && r.changeGuard(keepQuorum) {
			return Decision{Kind: Wait, Reason: fmt.Sprintf("%s; but removing it would leave %d healthy of %d voters, below quorum %d", why, healthyAfter, after, Quorum(after))}
		}
	}
	if !o.HoldsLock {
		return Decision{Kind: Wait, NeedsLock: true, Reason: why + ": taking the lock to remove it"}
	}
	return Decision{Kind: RemoveMember, MemberID: m.ID, Reason: why + ": removing it"}
}

func changeInFlight(ms []Member) string {
	for _, m := range ms {
		if m.Name == "" {
			return fmt.Sprintf("member %x was added but has not started", m.ID)
		}
		if m.Learner {
			return fmt.Sprintf("learner %s (%x) is catching up", m.Name, m.ID)
		}
	}
	return ""
}

func voters(ms []Member) int {
	n := 0
	for _, m := range ms {
		if !m.Learner {
			n++
		}
	}
	return n
}

func healthyVoters(ms []Member) int {
	n := 0
	for _, m := range ms {
		if !m.Learner && m.Healthy {
			n++
		}
	}
	return n
}

func findID(ms []Member, id uint64) int {
	for i, m := range ms {
		if m.ID == id {
			return i
		}
	}
	return -1
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

func displayName(m Member) string {
	if m.Name == "" {
		return "(unstarted)"
	}
	return m.Name
}

func short(tok string) string {
	if len(tok) > 8 {
		return tok[:8]
	}
	return tok
}

// slotVoters counts the voters that hold a slot of the desired size: all
// of them, except while an outside cluster is migrated in
// (Record.Migrating), when its healthy members, which no instance lists,
// hold none. An unhealthy unlisted voter still holds its slot: a member
// joining beside it would add a voter to a quorum it cannot help make.
func slotVoters(o Observation) int {
	n := 0
	for _, m := range o.Members {
		if m.Learner {
			continue
		}
		if o.Record != nil && o.Record.Migrating() && m.Healthy && !listed(o.Instances, m) {
			continue
		}
		n++
	}
	return n
}

// listed reports whether an instance matches member m, by name or by peer
// URL.
func listed(ins []Instance, m Member) bool {
	for _, in := range ins {
		if in.Name == m.Name || contains(m.PeerURLs, in.PeerURL) {
			return true
		}
	}
	return false
}

func inInstances(ins []Instance, name string) bool {
	for _, in := range ins {
		if in.Name == name {
			return true
		}
	}
	return false
}

// PlanLeave decides what a member that is leaving for good (its slot was
// removed: scale-down, replacement) does before it stops: remove itself
// from the membership when that is safe, so that its replacement can join
// at once and the cluster never counts a member that will not come back.
// Unlike Plan, it does not run Check: Check reads a leaving member's
// removal of itself while the record names another incarnation as keeping
// that incarnation running (invariant 5), which it is not (sim/ found
// it), and a refused departure would leave a voter that never returns.
func PlanLeave(o Observation) Decision { return rules{}.PlanLeave(o) }

func (r rules) planLeave(o Observation) Decision {
	name := o.Self.Name
	if o.Local.Name != "" {
		name = o.Local.Name
	}
	if !o.Running || !o.MembersKnown {
		return Decision{Kind: Wait, Name: name, Reason: "leaving, but not running or no quorum: stopping without removing this member"}
	}
	i := findID(o.Members, o.SelfID)
	if i < 0 {
		return Decision{Kind: Wait, Name: name, Reason: "leaving; already removed"}
	}
	if voters(o.Members) <= 1 && !o.Members[i].Learner {
		return Decision{Kind: Wait, Name: name, Reason: "leaving, but this is the last voter: keeping it (the cluster's data lives here)"}
	}
	if o.DataInherited && !o.Members[i].Learner {
		// The replacement runs as this member from its data: staying in
		// the membership saves a full resync, but only while the others
		// keep a quorum without it (another member may be leaving too:
		// the lock orders them, and the holder keeps it until its etcd
		// has stopped, so the next one sees it gone).
		others := healthyVoters(o.Members)
		if o.Members[i].Healthy {
			others--
		}
		if v := voters(o.Members); others >= Quorum(v) {
			return Decision{Kind: KeepMembership, Name: name, MemberID: o.SelfID, Reason: fmt.Sprintf("leaving; the replacement inherits this member's data and %d healthy of %d voters keep quorum meanwhile: stopping without removal", others, v)}
		}
	}
	d := r.removal(o, o.Members[i], fmt.Sprintf("this member's slot is gone (desired size %d)", o.DesiredSize))
	d.Name = name
	return d
}

// seedFromSnapshot restores the newest snapshot as a new epoch when there is
// no record and no member holds data (every instance answered): the lowest
// name among the live members does it, after RecoveryGrace-free checks of
// planEmpty. With automatic recovery off, an operator restores it.
func (r rules) seedFromSnapshot(o Observation, name string) Decision {
	s := o.LatestSnapshot
	if o.RecoveryGrace <= 0 {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("no cluster record and no member holds data, but the store holds snapshot %s (revision %d): automatic recovery is off; restore it with 'etcd-nomad snapshot restore'", s.Name, s.Revision)}
	}
	if o.RecordMissingFor < o.RecoveryGrace && r.seedGuard(restoreAfterGrace) {
		// Consul lost its state, the summary with it, while a majority
		// Nomad collected may still serve behind a partition: its
		// leader writes its summary again within the grace (and its
		// members may answer again), as a quorum loss waits its grace
		// before a recovery (sim seed 897 with CollectRunning).
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("no cluster record for %s and no member holds data; the store holds snapshot %s (revision %d): waiting the recovery grace (%s) before restoring it, for a leader the provider no longer lists to write its summary again", o.RecordMissingFor, s.Name, s.Revision, o.RecoveryGrace)}
	}
	for _, p := range o.Peers {
		if p.Name < name {
			return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("no cluster record and no member holds data: member %s restores snapshot %s (revision %d)", p.Name, s.Name, s.Revision)}
		}
	}
	if !o.HoldsLock {
		return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: fmt.Sprintf("no cluster record and no member holds data: taking the lock to restore snapshot %s", s.Name)}
	}
	return Decision{Kind: RecoverQuorum, Name: name, From: FromSnapshot, Target: s.Name,
		Record: &Record{Token: o.NewToken, Epoch: s.Epoch + 1, Seeder: name, Source: SnapshotSource(s.Name)},
		Reason: fmt.Sprintf("no cluster record and no member holds data, but the store holds snapshot %s (revision %d): restoring it as epoch %d instead of seeding an empty cluster", s.Name, s.Revision, s.Epoch+1)}
}

// restoreOverOwnRecord: this member recorded a seed or a restore, holds no
// data of it, and every instance answers, none with its incarnation. If the
// store holds a snapshot newer than what the record starts from (any
// snapshot, for an empty seed; another than the recorded one, for a
// restore), the incarnation ran and was snapshotted before every copy was
// lost and Consul restored the unconfirmed record: starting it again as
// recorded would abandon the writes the newest snapshot holds. The newest
// is restored as the next epoch instead, as seedFromSnapshot does with no
// record. ok is false when the recorded start stands.
func (r rules) restoreOverOwnRecord(o Observation, name string) (Decision, bool) {
	rec, s := o.Record, o.LatestSnapshot
	for _, p := range o.Peers {
		if p.Token == rec.Token {
			return Decision{}, false // it runs there: join it
		}
	}
	why := fmt.Sprintf("this member recorded epoch %d (%s) but holds no data of it", rec.Epoch, sourceName(rec.Source))
	if rec.Operator {
		// An operator's recovery restores what the operator chose, but
		// only once the store answers: the checks after this one (a
		// snapshot of an incarnation that ran after the record, a chain
		// that verifies below what the command verified) read its
		// listing, and with none they would pass (review rev13-data 1:
		// one failed listing resumed an older restore beside a newer
		// snapshot).
		if r.resumeGuard(resumeOperatorAfterListing) {
			if d, ok := listingUnanswered(o, name, why); ok {
				return d, true
			}
		}
		return Decision{}, false
	}
	// An object members refuse, newer than anything authentic: the
	// incarnation may have run and written it (a member without the
	// key), or the previous KEK's snapshots hold the data: neither the
	// recorded start nor an older snapshot is taken beside it.
	if r.seedGuard(noSeedWithoutListing) {
		if d, ok := listingUnanswered(o, name, why); ok {
			return d, true
		}
	}
	if d, ok := refusedAhead(o, name, s != nil, snapshotRevision(s), why); ok {
		return d, true
	}
	if s == nil || rec.Source == SnapshotSource(s.Name) {
		return Decision{}, false
	}
	why = fmt.Sprintf("this member recorded epoch %d (%s) but holds no data of it, and the store holds snapshot %s (revision %d, epoch %d), newer than what the record starts from", rec.Epoch, sourceName(rec.Source), s.Name, s.Revision, s.Epoch)
	for _, p := range o.Peers {
		if p.Token != "" {
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s; peer %s holds another incarnation (token %s epoch %d, revision %d): an operator must choose", why, p.Name, short(p.Token), p.Epoch, p.Revision)}, true
		}
	}
	if o.RecoveryGrace <= 0 {
		return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: why + ": automatic recovery is off; an operator must restore it with 'etcd-nomad snapshot restore'"}, true
	}
	if !o.HoldsLock {
		return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: why + ": taking the lock to restore it"}, true
	}
	next := r.aboveSnapshots(o, max(rec.top(), s.Epoch)+1)
	return Decision{Kind: RecoverQuorum, Name: name, From: FromSnapshot, Target: s.Name,
		Record: &Record{Token: o.NewToken, Epoch: next, Seeder: name, Source: SnapshotSource(s.Name)},
		Reason: fmt.Sprintf("%s: restoring it as epoch %d instead", why, next)}, true
}

func sourceName(src Source) string {
	if src == "" {
		return "an empty seed"
	}
	return "from " + string(src)
}

// takeoverSeed re-decides an unconfirmed empty seed whose seeder is gone
// for good: its allocation was replaced before it started the cluster (or
// Consul restored the record of a seed whose every copy is lost since).
// Nobody else resumes a seed, so without this the cluster waits forever.
// Only when the seeder has been missing from the provider's instances for
// RecoveryGrace (the provider lists every allocation that might still run),
// every instance answers, and no member holds data of any incarnation: then
// the newest snapshot is restored as the next epoch, or, with none, a new
// cluster is seeded as the next epoch (CAS over the record: a second
// taker fails there).
func (r rules) takeoverSeed(o Observation, name string) (Decision, bool) {
	rec := o.Record
	if !r.takeoverGuard(takeoverGoneSeed) || rec.ClusterID != 0 || rec.Source != "" || rec.Seeder == name || o.MembersKnown || o.RecoveryGrace <= 0 ||
		o.SeederGoneFor < o.RecoveryGrace || inInstances(o.Instances, rec.Seeder) || !o.Local.Empty || o.Running {
		return Decision{}, false
	}
	why := fmt.Sprintf("seeder %s of the unconfirmed epoch %d is gone for %s", rec.Seeder, rec.Epoch, o.SeederGoneFor)
	if o.Unreachable > 0 {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s, but %d instance(s) do not answer: not taking over", why, o.Unreachable)}, true
	}
	if d, ok := r.knownHealthy(o, name); ok {
		return d, true // Consul restored an old record while a cluster serves
	}
	for _, p := range o.Peers {
		if p.Token != "" {
			return Decision{}, false // a member with data decides (rejoin, re-record, or an operator)
		}
	}
	if r.seedGuard(noSeedWithoutListing) {
		if d, ok := listingUnanswered(o, name, why+" and no member holds data"); ok {
			return d, true
		}
	}
	if r.seedGuard(noSeedBesideRefused) {
		s := o.LatestSnapshot
		if d, ok := refusedAhead(o, name, s != nil, snapshotRevision(s), why+" and no member holds data"); ok {
			return d, true
		}
	}
	for _, p := range o.Peers {
		if p.Name < name {
			return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s and no member holds data: member %s takes over", why, p.Name)}, true
		}
	}
	if !o.HoldsLock {
		return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: why + " and no member holds data: taking the lock to take over"}, true
	}
	if s := o.LatestSnapshot; s != nil {
		return Decision{Kind: RecoverQuorum, Name: name, From: FromSnapshot, Target: s.Name,
			Record: &Record{Token: o.NewToken, Epoch: max(rec.top(), s.Epoch) + 1, Seeder: name, Source: SnapshotSource(s.Name)},
			Reason: fmt.Sprintf("%s and no member holds data: restoring snapshot %s (revision %d) as epoch %d", why, s.Name, s.Revision, max(rec.top(), s.Epoch)+1)}, true
	}
	return Decision{Kind: Seed, Name: name, Record: &Record{Token: o.NewToken, Epoch: rec.top() + 1, Seeder: name},
		Reason: fmt.Sprintf("%s, no member holds data and there is no snapshot: seeding epoch %d in its place", why, rec.top()+1)}, true
}
