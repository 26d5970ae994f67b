// planWithData and the rules for a member whose etcd is stopped and whose
// data dir holds data: resume a recovery, a pending ForceNew, an installed
// restore, the fences and later writes, keeping data until a newer epoch runs.

package planner

import (
	"fmt"
	"slices"
	"strings"
)

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
		if d, ok := r.supersededWithoutRecord(o, name); ok {
			return d
		}
		if d, ok := r.lineUnknown(o, name); ok {
			return d
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
		case l.ForceNewPending && !live && o.Unreachable == 0 && len(o.KnownHealthy)+len(o.UnlistedVoters) == 0 && o.RecoveryGrace > 0 && (o.QuorumLostFor >= o.RecoveryGrace || rec.ClusterID == 0 && o.SeederGoneFor >= o.RecoveryGrace) && r.resumeGuard(pendingAwaitsOperator):
			// No quorum answers anywhere and every instance does: the
			// record's cluster may never answer again (Consul restored
			// a record whose members are gone), and the peers wait for
			// this member, the newer epoch, to re-record (newerThanRecord)
			// while it never does (sim seed 7867). Not re-recording the
			// epoch it never ran (checkRerecord), not recovering beside
			// an older record on its own (newerThanRecord): an operator
			// chooses. It still sets the data aside, below, if the
			// record's cluster answers again. Only once the quorum has
			// been lost for the recovery grace: a member of that cluster
			// restarting is no reason to page anyone (review rev18b F2:
			// the command, run in that moment, recorded a new epoch
			// while the restarted member rejoined the record's one).
			// Under an unconfirmed record no quorum is counted as lost
			// (task sets QuorumLostFor under a confirmed one): there its
			// seeder gone for the grace counts (review rev18d F-B: the
			// member waited without paging anyone).
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s, and the record names epoch %d (token %s), whose cluster does not answer with a quorum while every instance answers: keeping this data (revision %d); the peers wait for this newer epoch to be recorded again, so an operator must choose: 'etcd-nomad recover -from %s' recovers a new epoch from this data, or 'etcd-nomad recover -from snapshot:NAME' restores a snapshot", what, rec.Epoch, short(rec.Token), l.Revision, name)}
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
		if d, ok := r.supersededAboveRecord(o, name); ok {
			return d
		}
		if d, ok := r.lineUnknown(o, name); ok {
			return d
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
	if d, ok := r.supersededLine(o, name); ok {
		return d
	}
	return Decision{Kind: Rejoin, Name: name, Reason: fmt.Sprintf("starting with local data (member %x, revision %d)", l.MemberID, l.Revision)}
}

// supersededLine holds back the start of data of the record's confirmed
// incarnation once a newer epoch of the data's own line ran: the store
// holds an authentic snapshot taken under the data's cluster id at an
// epoch above the data's and any the record names (LineEpoch). Only a
// recovery from this line's data (ForceNewCluster keeps the cluster id)
// makes one, after this incarnation; the record naming this incarnation
// is an older one Consul restored. Starting the data would give the
// superseded incarnation its quorum back beside the newer one, or below
// its writes once it stopped (sim seed 16514: epoch 2, recovered from
// m0-1's data, ran alone on m0-1, which Nomad had collected, and was
// snapshotted; Consul restored the record of epoch 1, and m1-1 and m2-0
// rejoined with epoch 1's data). Any other higher epoch in the store (a
// restore's: a new cluster id; a genuine snapshot of an earlier life of
// the job put back) says nothing of this data and holds nothing back.
// Instead the member takes part in the quorum-loss recovery like a
// running member of its incarnation: it waits while a member of the newer
// line answers (knownHealthy), and after the grace chooses between the
// data and the store (refusedAhead waits for an operator while the newer
// line's snapshot reaches further), recording an epoch above both. Not
// while this data's cluster answers with a member list: a quorum of it
// serves already (peerNewerThanRecord's rule).
func (r rules) supersededLine(o Observation, name string) (Decision, bool) {
	rec, l := o.Record, o.Local
	if rec.ClusterID == 0 || l.ClusterID == 0 || o.LineEpoch <= max(l.Epoch, rec.top()) || !r.dataGuard(notSupersededLine) {
		return Decision{}, false
	}
	if o.MembersKnown && (o.MembersClusterID == rec.ClusterID || o.MembersClusterID == l.ClusterID) {
		return Decision{}, false
	}
	if d, ok := r.recovery(o, name); ok {
		return d, true
	}
	why := fmt.Sprintf("the store holds a snapshot of epoch %d taken under this data's cluster id %x, newer than this data's epoch %d and any the record (epoch %d) names: a recovery from this data's line ran after it, and the record is an older one Consul restored; not starting this data beside or below it", o.LineEpoch, l.ClusterID, l.Epoch, rec.Epoch)
	if o.RecoveryGrace <= 0 {
		return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: why + fmt.Sprintf("; automatic recovery is off, so an operator must choose: restore the newest snapshot of epoch %d by its name ('etcd-nomad snapshot list' names it; 'etcd-nomad recover -from snapshot:NAME -accept-data-loss', which sets this data aside)", o.LineEpoch)}, true
	}
	return Decision{Kind: Wait, Name: name, Reason: why + fmt.Sprintf("; the quorum-loss recovery decides once the quorum has been lost for %s", o.RecoveryGrace)}, true
}

// supersededAboveRecord is supersededLine for data of an epoch above the
// record's, which "epochs only grow" would start to re-record: the store
// holds an authentic snapshot under the data's cluster id at an epoch
// above the data's and the record's top (LineEpoch), so a recovery from
// this data's line ran after this incarnation, and the record is an
// older one still (sim seed 16514 one epoch later, review rev18c N1:
// epoch 3, recovered from m0-1's epoch-2 data, ran on m0-1, which Nomad
// had collected; Consul restored the record of epoch 1, and m1-1 and
// m2-0 started their epoch-2 data, a quorum beside epoch 3). The member
// decides as it would under the record its start would have written
// (this data's incarnation, confirmed, carrying the record's top): it
// waits beside the newer line's answering member, and after the grace
// recovers from this line's data above both epochs, or waits for an
// operator while the newer line's snapshot reaches further. ok is false
// when the data is not so superseded.
func (r rules) supersededAboveRecord(o Observation, name string) (Decision, bool) {
	as, ok := supersededAboveRecordAs(o)
	if !ok || !r.dataGuard(notSupersededAboveRecord) {
		return Decision{}, false
	}
	d, ok := r.supersededLine(as, name)
	if ok && d.Kind == Wait {
		d.Reason = fmt.Sprintf("the record names epoch %d, older than this data's epoch %d, which this data would re-record; but %s", o.Record.Epoch, o.Local.Epoch, d.Reason)
	}
	return d, ok
}

// supersededAboveRecordAs is o with the record this member's stopped data
// would re-record in place of its older confirmed record (the data's
// incarnation, confirmed, carrying the record's top) when the store holds
// an authentic snapshot under the data's cluster id above both
// (LineEpoch): the data is superseded, and the member takes part in the
// recovery of its own incarnation (supersededAboveRecord; Check judges
// that recovery the same way). ok is false when the data is not so
// superseded.
func supersededAboveRecordAs(o Observation) (Observation, bool) {
	rec, l := o.Record, o.Local
	if rec == nil || o.Running || l.Empty || l.Token == "" || l.Cluster != o.ClusterName || rec.ClusterID == 0 || l.ClusterID == 0 || rec.Epoch >= l.Epoch || o.LineEpoch <= max(l.Epoch, rec.top()) {
		return o, false
	}
	as := o
	as.Record = &Record{ClusterID: l.ClusterID, Token: l.Token, Epoch: l.Epoch, Seeder: rec.Seeder, HighestEpoch: rec.carried(l.Epoch), Index: rec.Index}
	return as, true
}

// supersededWithoutRecord holds back the start of data without a record
// (Consul lost its state) once the store holds an authentic snapshot
// under the data's cluster id at an epoch above the data's (LineEpoch):
// a recovery from this data's line ran after this incarnation, and
// starting the data gives the superseded incarnation its quorum back
// beside the newer one, which may still serve on a member Nomad
// collected, and its re-record then names the superseded epoch (review
// rev18c N2: seed 16514 with Consul losing its state instead of
// restoring epoch 1's record). The newer line's members re-record it
// while they serve: the member waits while one answers (KnownHealthy,
// UnlistedVoters) and through the grace; then only an operator chooses
// between this data and the newer line's snapshots. Not while this
// data's cluster answers with a member list (a quorum of it serves, and
// the removal check above decides). ok is false when the data is not so
// superseded.
func (r rules) supersededWithoutRecord(o Observation, name string) (Decision, bool) {
	l := o.Local
	if o.Record != nil || l.ClusterID == 0 || o.LineEpoch <= l.Epoch || !r.dataGuard(notSupersededWithoutRecord) {
		return Decision{}, false
	}
	if o.MembersKnown && o.MembersClusterID == l.ClusterID {
		return Decision{}, false
	}
	why := fmt.Sprintf("no cluster record, and the store holds a snapshot of epoch %d taken under this data's cluster id %x, newer than this data's epoch %d: a recovery from this data's line ran after it; not starting this data beside or below it", o.LineEpoch, l.ClusterID, l.Epoch)
	if known := slices.Concat(o.KnownHealthy, o.UnlistedVoters); len(known) > 0 {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s; member(s) %s answer for it: waiting for them to re-record the cluster", why, strings.Join(known, ", "))}, true
	}
	if o.RecoveryGrace > 0 && o.RecordMissingFor < o.RecoveryGrace {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s; waiting the recovery grace (%s) for a member of the newer epoch to re-record the cluster", why, o.RecoveryGrace)}, true
	}
	// 'etcd-nomad recover' needs a record; 'snapshot restore' writes one.
	return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s, and no member of it answers: an operator must choose: 'etcd-nomad snapshot restore' restores the newest snapshot of epoch %d ('etcd-nomad snapshot list' names it) and records it, and this data is set aside once it runs; or, to start this data as it is and lose what the newer epoch wrote, delete that epoch's snapshots from the store", why, o.LineEpoch)}, true
}

// lineUnknown holds back the start of stopped data that would re-record
// its epoch (no record: Consul lost its state; or a confirmed record
// older than the data: Consul restored one) while the snapshot store's
// listing does not answer (ListingUnanswered): LineEpoch is unknown then,
// and a lost or rolled-back record is how a recovery of the data's line
// after this incarnation (sim seed 16514) gets forgotten, so the
// superseded-line rules above cannot tell (review rev18f F4: the data
// started to re-record its epoch beside or below the newer line). A line
// epoch remembered from the member's last listing (task keeps it) lets
// those rules decide instead; the store answering ends the wait. Not
// while the data's cluster answers with a member list (a quorum of it
// serves, and the member joins it). Not under the record that names the
// data's incarnation: nothing tells a record Consul rolled back from the
// current one there, and every full restart of a healthy cluster during
// a store outage would wait (TestAFullRestartUnderItsRecordStartsWhileTheStoreIsDown).
// It waits while a member of the data's membership answers (it
// re-records), and through the recovery grace since the record went
// missing (or the quorum was lost, under an older record); then, since
// nothing but the store can end it, an operator chooses. ok is false when
// the rule does not apply.
func (r rules) lineUnknown(o Observation, name string) (Decision, bool) {
	l, rec := o.Local, o.Record
	if o.ListingUnanswered == "" || l.ClusterID == 0 || !r.dataGuard(notBlindToLine) {
		return Decision{}, false
	}
	if rec != nil && (rec.ClusterID == 0 || rec.Epoch >= l.Epoch) {
		return Decision{}, false
	}
	if o.MembersKnown && o.MembersClusterID == l.ClusterID {
		return Decision{}, false
	}
	under, lost := "no cluster record", o.RecordMissingFor
	if rec != nil {
		under, lost = fmt.Sprintf("the record names epoch %d, older than this data's epoch %d", rec.Epoch, l.Epoch), o.QuorumLostFor
	}
	why := fmt.Sprintf("%s, and the snapshot store's listing does not answer (%s): whether a recovery of this data's line (cluster id %x) ran after its epoch %d is unknown; not starting this data to re-record its epoch until the store answers", under, o.ListingUnanswered, l.ClusterID, l.Epoch)
	if known := slices.Concat(o.KnownHealthy, o.UnlistedVoters); len(known) > 0 {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s; member(s) %s answer for a cluster: waiting for them to re-record it", why, strings.Join(known, ", "))}, true
	}
	if o.RecoveryGrace > 0 && lost < o.RecoveryGrace {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s (waiting the recovery grace, %s, before asking an operator)", why, o.RecoveryGrace)}, true
	}
	out := fmt.Sprintf("'etcd-nomad recover -from %s -accept-data-loss' recovers a new epoch from this data without comparing it with the store; with the store down its new epoch is not raised above the store's, so if a newer epoch of this line did run, the two lines' snapshots then rank wrongly: prefer bringing the store back", name)
	if rec == nil {
		// 'etcd-nomad recover' needs a record.
		out = "to start this data without the store, remove the snapshot block from the cluster definition and redeploy the job (the members re-record this epoch; put the block back once they run)"
	}
	return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s, and it has not answered for the grace: an operator must choose: bring the store back (the members decide as soon as its listing answers), or, knowing that no newer epoch of this line ran, %s", why, out)}, true
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
	if d, ok := r.fenceForceNew(o, name, why, hint, func(PeerStatus) bool { return false }); ok {
		return d, true
	}
	if o.SnapshotEpoch >= rec.Epoch && r.resumeGuard(resumeNotBelowLaterEpoch) {
		// As a resume that has not installed yet (planEmpty): a snapshot
		// of the record's epoch or a later one was taken after the
		// record, and this copy is below it (sim seed 28743).
		return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s, but the store holds a snapshot of epoch %d, taken after the record was written (the recorded restore ran, or a later incarnation did, and Consul brought the record back): not starting this copy below it; an operator must choose ('etcd-nomad snapshot list' names it; 'etcd-nomad recover -from snapshot:NAME' restores it)", why, o.SnapshotEpoch)}, true
	}
	return Decision{}, false
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
