// planRunning and the rules for a member whose etcd runs: re-recording,
// replacement, stale members and their removal.

package planner

import (
	"fmt"
	"sort"
)

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
	if o.MembersKnown && o.Local.ClusterID != 0 && o.MembersClusterID == o.Local.ClusterID && findID(o.Members, o.SelfID) < 0 && r.dataGuard(notRerecordRemoved) {
		// The member list of this data's cluster id that answers has no
		// place for this member: a recovery from another member's data
		// (ForceNewCluster keeps the id and drops every other member)
		// or a removal ran without it, and that cluster, not this
		// data, is the one to record (review rev18f F5, sim seed 1531:
		// an epoch-1 learner the epoch-2 recovery dropped re-recorded
		// epoch 1 after Consul lost its state, beside epoch 2's quorum;
		// the store held no snapshot of epoch 2 in a real cluster yet).
		// Its members re-record it; then this member sets its data
		// aside.
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s, but the member list of this member's cluster %x that answers no longer names member %x (a recovery from another member's data, or a removal, ran without it): not re-recording from this data; a member of that cluster re-records it", why, o.Local.ClusterID, o.SelfID)}
	}
	if d, ok := r.rerecordSuperseded(o, name, why); ok {
		return d
	}
	if !o.HoldsLock {
		return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: why + ": taking the lock to re-record it"}
	}
	return Decision{Kind: RecordCluster, Name: name, Record: &Record{ClusterID: o.Local.ClusterID, Token: o.Local.Token, Epoch: o.Local.Epoch, Seeder: name, HighestEpoch: o.Record.carried(o.Local.Epoch)},
		Reason: why + ": re-recording it from this member's data"}
}

// rerecordSuperseded holds back the re-record of a running member's epoch
// once the store holds an authentic snapshot under its cluster id at a
// newer epoch than its own and any the record names (LineEpoch): a
// recovery from this line ran after this incarnation, and its record was
// lost (Consul lost its state) or rolled back (Consul restored an older
// one). Re-recorded, the superseded incarnation becomes the one every
// member follows, and the newer line's writes, which may be in the store
// only, are abandoned without anyone choosing it (review rev18f F5: it
// takes two incarnations running, as a healed partition beside a
// recovery leaves them; the stopped members' rules, supersededLine and
// its kin, already refuse to start such data). The incarnation keeps
// serving, unrecorded: within the grace (no record) a member of the newer
// line may re-record it; then an operator chooses which line's writes to
// keep. With the listing down the member re-records as before: it runs
// with a quorum or every instance answering, and holding back the record
// of a serving cluster for as long as its store is down would stop its
// replacements from joining (task feeds a line epoch remembered from an
// earlier listing). ok is false when the rule does not apply.
func (r rules) rerecordSuperseded(o Observation, name, why string) (Decision, bool) {
	l, rec := o.Local, o.Record
	top := l.Epoch
	if rec != nil {
		top = max(top, rec.top())
	}
	if l.ClusterID == 0 || o.LineEpoch <= top || !r.dataGuard(notRerecordSupersededLine) {
		return Decision{}, false
	}
	why = fmt.Sprintf("%s, but the store holds a snapshot of epoch %d taken under this incarnation's cluster id %x, newer than its epoch %d and any the record names: a recovery from this line ran after it, and its record was lost or rolled back; not re-recording epoch %d, which would make the superseded incarnation the current one (it keeps serving, unrecorded)", why, o.LineEpoch, l.ClusterID, l.Epoch, l.Epoch)
	if rec == nil && o.RecoveryGrace > 0 && o.RecordMissingFor < o.RecoveryGrace {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s; waiting the recovery grace (%s) for a member of epoch %d to re-record the cluster", why, o.RecoveryGrace, o.LineEpoch)}, true
	}
	newer := "'etcd-nomad recover -from snapshot:NAME -accept-data-loss' once this incarnation is stopped"
	if rec == nil {
		// 'etcd-nomad recover' needs a record; 'snapshot restore' runs
		// on a stopped member's data dir (docs/operations.md).
		newer = "'etcd-nomad snapshot restore' on a stopped member's data dir, once this incarnation is stopped (docs/operations.md, CLI: snapshot restore)"
	}
	return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s; an operator must choose which line's writes to keep: this incarnation's, by deleting epoch %d's snapshots (and any newer of cluster id %x) from the store with the store's own tools ('etcd-nomad snapshot list' names them; etcd-nomad has no delete command), after which the members re-record it at the next listing; or epoch %d's, by restoring its newest snapshot with %s (this data is set aside)", why, o.LineEpoch, l.ClusterID, o.LineEpoch, newer)}, true
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
	return Decision{Kind: ReplaceInstance, Name: name, Instance: target.Name, MemberID: target.ID, Reason: why + ": asking the provider to replace its instance"}, true
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
