package planner

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// RecoverFrom is where a RecoverQuorum decision recovers from: FromData
// or FromSnapshot.
type RecoverFrom string

// Recovery sources. They stay untyped constants: a record's Source uses
// them too (FromData, and FromSnapshot as SnapshotSource's prefix).
const (
	FromData     = "data"
	FromSnapshot = "snapshot"
)

// candidate is a member that could seed the next epoch.
type candidate struct {
	name     string
	revision int64
	data     bool
	self     bool
}

// recovery decides a quorum-loss recovery (invariant 4): only after the
// loss has lasted RecoveryGrace, only by the lock holder, and only from the
// highest revision known — a survivor's data (ForceNewCluster, no loss)
// beats an older snapshot. The next epoch is recorded before anyone starts.
// ok is false when no recovery applies.
func (r rules) recovery(o Observation, name string) (Decision, bool) {
	rec := o.Record
	if rec == nil || o.MembersKnown || o.RecoveryGrace <= 0 || (o.QuorumLostFor < o.RecoveryGrace && r.recoveryGuard(recoverAfterGrace)) {
		return Decision{}, false
	}
	if rec.ClusterID == 0 {
		return Decision{}, false // an unconfirmed seed is not a lost quorum
	}
	if o.Unreachable > 0 && r.recoveryGuard(recoverWhenAllAnswer) {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("quorum lost for %s, but %d instance(s) do not answer: they may hold newer data or a working quorum; not recovering", o.QuorumLostFor, o.Unreachable)}, true
	}
	for _, p := range o.Peers {
		if p.Healthy {
			return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("member %s reports itself healthy: quorum is not lost everywhere", p.Name)}, true
		}
	}
	if d, ok := r.knownHealthy(o, name); ok {
		return d, true
	}
	if d, ok := newerThanRecord(o, name); ok {
		return d, true
	}
	if d, ok := r.acrossLines(o, name); ok {
		return d, true
	}
	return r.pickRecovery(o, name, rec.Epoch, rec.Token, fmt.Sprintf("quorum lost for %s", o.QuorumLostFor))
}

// acrossLines waits for an operator when the store holds an authentic
// snapshot of a newer epoch of this data's line (LineEpoch: taken under
// the data's cluster id, above the data's epoch and any the record
// names): a recovery from this line's data ran after this incarnation,
// and the two lines forked. Their revisions count on from the fork, so
// the same revision holds different writes on each: no choice by
// revision keeps both lines' acknowledged writes (review rev18f F1: data
// at revision 177 of the old line beat the newer line's snapshot at 177,
// and the newer line's writes after the fork at 150 were lost). Only an
// operator knows which line's writes to keep: 'recover -from
// snapshot:NAME -accept-data-loss' (the newer line) or 'recover -from
// MEMBER -accept-data-loss' (this line).
func (r rules) acrossLines(o Observation, name string) (Decision, bool) {
	if !lineSuperseded(o) || !r.recoveryGuard(notAcrossLines) {
		return Decision{}, false
	}
	return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("quorum lost for %s, but the store holds a snapshot of epoch %d of this data's line (cluster id %x), newer than this data's epoch %d and any the record (epoch %d) names: the lines forked, and their revisions do not compare, so an operator must choose which line's writes to keep: 'etcd-nomad recover -from snapshot:NAME -accept-data-loss' restores the newer line's newest snapshot ('etcd-nomad snapshot list' names it; this data is set aside), or 'etcd-nomad recover -from %s -accept-data-loss' recovers from this line's data (the newer line's writes stay in the store only)", o.QuorumLostFor, o.LineEpoch, o.Local.ClusterID, o.Local.Epoch, o.Record.Epoch, name)}, true
}

// lineSuperseded reports whether the store holds an authentic snapshot of
// a newer epoch of this member's data's line than the data's and any the
// record names (LineEpoch).
func lineSuperseded(o Observation) bool {
	return !o.Local.Empty && o.Local.ClusterID != 0 && o.Record != nil && o.Record.ClusterID != 0 && o.LineEpoch > max(o.Local.Epoch, o.Record.top())
}

// knownHealthy waits while a member of this member's last known
// membership answers as a healthy voter, listed by the provider or not
// (Observation.KnownHealthy): a quorum serves writes there, and a
// recovery here would make a second cluster beside it.
func (r rules) knownHealthy(o Observation, name string) (Decision, bool) {
	if len(o.KnownHealthy) > 0 && r.recoveryGuard(notBesideKnownHealthy) {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("member(s) %s of the last known membership answer as healthy voters: a quorum serves writes there, whatever the provider lists; not recovering beside it", strings.Join(o.KnownHealthy, ", "))}, true
	}
	if len(o.UnlistedVoters) > 0 && r.recoveryGuard(notBesideUnlistedVoter) {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("member(s) %s of the last known membership answer as voters without a leader although the provider no longer lists them (Nomad collected their allocations while they run): their peers may be cut off by a partition and regain a quorum with them; not recovering beside them until they stop (their Nomad client stops them when it reconnects; else an operator stops them)", strings.Join(o.UnlistedVoters, ", "))}, true
	}
	return Decision{}, false
}

// newerThanRecord waits while this member or a peer holds data of an epoch
// newer than the record's (Consul restored an old record): that member
// re-records first (invariant 9), and a recovery decided against the old
// record would seed a second incarnation of the newer epoch, from older
// data.
func newerThanRecord(o Observation, name string) (Decision, bool) {
	if !o.Local.Empty && o.Local.Token != "" && o.Local.Cluster == o.ClusterName && o.Local.Epoch > o.Record.Epoch {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("this member holds epoch %d, newer than the record's %d: re-recording comes before any recovery", o.Local.Epoch, o.Record.Epoch)}, true
	}
	for _, p := range o.Peers {
		if p.Token != "" && p.Epoch > o.Record.Epoch {
			return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("peer %s holds epoch %d, newer than the record's %d: it re-records before any recovery", p.Name, p.Epoch, o.Record.Epoch)}, true
		}
	}
	return Decision{}, false
}

// learnerNewer waits when a learner holds data of the incarnation newer than
// the chosen source: a learner never seeds a recovery (ForceNewCluster on
// it leaves no voter), but recovering from older data would drop writes
// only it holds. An operator decides (snapshot its data, restore it).
//
// A snapshot of an epoch older than the learner's data is of the line
// the learner's incarnation forked from: revisions of the two lines do
// not compare, and the learner may be the only copy of its incarnation's
// writes (sim seed 1010563: epoch 4's voter was replaced, its learner
// held revision 2000465 of epoch 4, and an epoch 3 snapshot at 2000470
// was restored over it). srcEpoch is the source's epoch: the data's, or
// the snapshot's.
func (r rules) learnerNewer(o Observation, name string, dataEpoch uint64, dataToken string, src int64, srcEpoch uint64) (Decision, bool) {
	if !r.recoveryGuard(notBelowLearnerData) {
		return Decision{}, false
	}
	holds := func(token string, epoch uint64) bool {
		return token != "" && epoch == dataEpoch && (dataToken == "" || token == dataToken)
	}
	ahead := func(rev int64) string {
		if srcEpoch < dataEpoch {
			return fmt.Sprintf("of epoch %d, newer than the best recovery source (epoch %d, revision %d: another line, whose revisions do not compare)", dataEpoch, srcEpoch, src)
		}
		if rev > src {
			return fmt.Sprintf("newer than the best recovery source (%d)", src)
		}
		return ""
	}
	if o.Local.Learner && !o.Local.Empty && holds(o.Local.Token, o.Local.Epoch) {
		if why := ahead(o.Local.Revision); why != "" {
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("this member is a learner holding revision %d %s: not recovering from older data; an operator must decide", o.Local.Revision, why)}, true
		}
	}
	for _, p := range o.Peers {
		if !p.Learner || !holds(p.Token, p.Epoch) {
			continue
		}
		if why := ahead(p.Revision); why != "" {
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("learner %s holds revision %d %s: not recovering from older data; an operator must decide", p.Name, p.Revision, why)}, true
		}
	}
	return Decision{}, false
}

// takeover re-decides a recovery whose recorded seeder is gone for good:
// the record names epoch N (unconfirmed, a recovery) but its seeder has been
// missing from the provider's instances for RecoveryGrace, and its data
// went with it. The best copy left is data of epoch N-1 (or the newest
// snapshot); the lock holder records epoch N+1 from it. Never while the
// seeder is listed (it may be slow or cut off), while the old incarnation
// has a quorum again, while any instance does not
// answer, or while a peer holds data of epoch N (the seeder's own cluster
// ran somewhere: join it instead).
func (r rules) takeover(o Observation, name string) (Decision, bool) {
	rec := o.Record
	if rec == nil || rec.ClusterID != 0 || rec.Source == "" && !anyData(o) || rec.Seeder == name || rec.Epoch < 2 || o.MembersKnown ||
		o.RecoveryGrace <= 0 || (o.SeederGoneFor < o.RecoveryGrace && r.takeoverGuard(takeoverAfterGrace)) {
		return Decision{}, false
	}
	if r.takeoverGuard(takeoverSeederUnlisted) && inInstances(o.Instances, rec.Seeder) {
		return Decision{}, false
	}
	if o.Unreachable > 0 {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("seeder %s of epoch %d is gone, but %d instance(s) do not answer: not taking over", rec.Seeder, rec.Epoch, o.Unreachable)}, true
	}
	if d, ok := r.knownHealthy(o, name); ok {
		return d, true
	}
	for _, p := range o.Peers {
		if p.Token == rec.Token {
			return Decision{}, false
		}
	}
	if r.takeoverGuard(takeoverNotBesideNewer) {
		// Consul restored an older record whose seeder is gone, while
		// a member holds a newer epoch (sim seeds 4976, 5861, 6319):
		// taking over would record the newer epoch a second time. That
		// member re-records first (invariant 9).
		if d, ok := newerThanRecord(o, name); ok {
			return d, true
		}
	}
	// The data to take over from is the last confirmed incarnation's
	// (carried by the record), however many recoveries were recorded and
	// lost since; records written before it was carried fall back to the
	// epoch before.
	dataToken, dataEpoch := rec.LastConfirmedToken, rec.LastConfirmedEpoch
	if dataEpoch == 0 || !r.takeoverGuard(takeoverFromLastConfirmed) {
		dataToken, dataEpoch = "", rec.Epoch-1
	}
	return r.pickRecovery(o, name, dataEpoch, dataToken, fmt.Sprintf("seeder %s of epoch %d gone for %s", rec.Seeder, rec.Epoch, o.SeederGoneFor))
}

// anyData reports whether this member or a peer holds data of some
// incarnation. An empty seed whose seeder is gone is taken over as a new
// seed only when none does (takeoverSeed); otherwise as a recovery from the
// best data of the epoch before it (takeover: sim seed 21345, where the
// members holding epoch-1 data waited for a gone seeder of epoch 2 for
// good).
func anyData(o Observation) bool {
	if !o.Local.Empty && o.Local.Token != "" {
		return true
	}
	for _, p := range o.Peers {
		if p.Token != "" {
			return true
		}
	}
	return false
}

// pickRecovery chooses the source of the next epoch: the highest revision
// among members holding data of dataEpoch (of dataToken, if given), unless
// the newest snapshot is newer; then the chosen member, once it holds the
// lock, records the next epoch and recovers.
func (r rules) pickRecovery(o Observation, name string, dataEpoch uint64, dataToken string, why string) (Decision, bool) {
	rec := o.Record
	holds := func(token string, epoch uint64) bool {
		return token != "" && epoch == dataEpoch && (dataToken == "" || token == dataToken)
	}
	var cands []candidate
	// Invariant 4: a learner never seeds a recovery: it may lag, and
	// ForceNewCluster on a learner's data leaves no voter (etcd panics
	// "removed all voters" at every start).
	selfData := !o.Local.Empty && o.Local.Cluster == o.ClusterName && holds(o.Local.Token, o.Local.Epoch) && (!o.Local.Learner || !r.recoveryGuard(learnerNeverSource))
	cands = append(cands, candidate{name: name, revision: o.Local.Revision, data: selfData, self: true})
	for _, p := range o.Peers {
		cands = append(cands, candidate{name: p.Name, revision: p.Revision, data: holds(p.Token, p.Epoch) && (!p.Learner || !r.recoveryGuard(learnerNeverSource))})
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].data != cands[j].data {
			return cands[i].data
		}
		if cands[i].revision != cands[j].revision {
			return (cands[i].revision > cands[j].revision) == r.recoveryGuard(recoverFromHighest)
		}
		if cands[i].name != cands[j].name {
			return cands[i].name < cands[j].name
		}
		return cands[i].self
	})
	if d, ok := r.otherIncarnation(o, name, dataEpoch, dataToken, why); ok {
		return d, true
	}
	if r.recoveryGuard(notWithoutListing) {
		if d, ok := listingUnanswered(o, name, why); ok {
			return d, true
		}
	}
	best := cands[0]
	from, target := RecoverFrom(FromData), ""
	srcRev := best.revision
	if !best.data || (o.LatestSnapshot != nil && o.LatestSnapshot.Revision > best.revision && r.recoveryGuard(snapshotOnlyIfNewer) &&
		(o.LatestSnapshot.Epoch >= dataEpoch || !r.recoveryGuard(snapshotNotOfOlderEpoch))) {
		// A snapshot of an epoch older than the data's is of a line the
		// data's incarnation replaced: its revisions are not comparable
		// (an operator's restore of an older snapshot starts a line below
		// the one it replaced, whose snapshots stay in the store: sim
		// seed 845 with the operator).
		if o.LatestSnapshot == nil {
			if r.recoveryGuard(notBelowRefused) {
				if d, ok := refusedAhead(o, name, false, 0, why+": no member holds this incarnation's data and no snapshot authenticates"); ok {
					return d, true
				}
			}
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: why + ": no member holds this incarnation's data and there is no snapshot: nothing to recover from; an operator must decide (restore a snapshot kept elsewhere with 'etcd-nomad snapshot restore', or start over)"}, true
		}
		from, target, srcRev = FromSnapshot, o.LatestSnapshot.Name, o.LatestSnapshot.Revision
		// Any live member may seed from the snapshot: the lowest name.
		sort.SliceStable(cands, func(i, j int) bool {
			if cands[i].name != cands[j].name {
				return cands[i].name < cands[j].name
			}
			return cands[i].self
		})
		best = cands[0]
	}
	if r.recoveryGuard(notBelowRefused) {
		if d, ok := refusedAhead(o, name, true, srcRev, fmt.Sprintf("%s: the best source is %s at revision %d", why, from, srcRev)); ok {
			return d, true
		}
	}
	srcEpoch := dataEpoch
	if from == FromSnapshot {
		srcEpoch = o.LatestSnapshot.Epoch
	}
	if d, ok := r.learnerNewer(o, name, dataEpoch, dataToken, srcRev, srcEpoch); ok {
		return d, true
	}
	if d, ok := r.olderDataNewer(o, name, dataEpoch, srcRev, srcEpoch, why); ok {
		return d, true
	}
	if !best.self {
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s: member %s recovers (from %s, revision %d)", why, best.name, from, srcRev)}, true
	}
	if !o.HoldsLock {
		return Decision{Kind: Wait, Name: name, NeedsLock: true, Reason: why + ": taking the lock to recover"}, true
	}
	lastToken, lastEpoch := rec.lastConfirmed()
	next := r.nextEpoch(o)
	d := Decision{Kind: RecoverQuorum, Name: name, From: from, Snapshot: target,
		Record: &Record{Token: o.NewToken, Epoch: next, Seeder: name, Source: Source(from), LastConfirmedToken: lastToken, LastConfirmedEpoch: lastEpoch}}
	if from == FromSnapshot {
		d.Record.Source = SnapshotSource(target)
		d.Reason = fmt.Sprintf("%s: recovering epoch %d from snapshot %s (revision %d)", why, next, target, o.LatestSnapshot.Revision)
	} else {
		d.Reason = fmt.Sprintf("%s: recovering epoch %d from this member's data (revision %d)", why, next, best.revision)
	}
	d.Reason += r.metaIgnored(o)
	return d, true
}

// nextEpoch is the epoch a quorum-loss recovery records: the one after
// the record's, and after the newest snapshot's (invariant 9: epochs only
// grow). Consul may have restored a record older than an incarnation that
// ran and was snapshotted: recording the record's next epoch would label
// the new incarnation below that snapshot, and every later comparison by
// epoch (the planner's, an operator's fence) would take the snapshot for
// the newer copy (sim seed 2470 with the operator: epoch 2 restored from
// a snapshot of epoch 3; 'recover -from snapshot:latest' later found no
// member newer than that snapshot and set aside, unnamed, a learner's
// epoch-2 writes beyond it).
func (r rules) nextEpoch(o Observation) uint64 {
	return r.aboveSnapshots(o, o.Record.top()+1)
}

// aboveSnapshots is next, or the epoch after the store's snapshots' when
// one is at or above it: the lineage's newest (LatestSnapshot) and any
// other that authenticates (SnapshotEpoch: one of an incarnation the
// lineage calls foreign, which ran after a record Consul restored, would
// otherwise share the new epoch).
func (r rules) aboveSnapshots(o Observation, next uint64) uint64 {
	next = r.aboveOwnMeta(o, next)
	if !r.recoveryGuard(epochAboveSnapshots) {
		return next
	}
	if s := o.LatestSnapshot; s != nil && s.Epoch >= next {
		next = s.Epoch + 1
	}
	if o.SnapshotEpoch >= next && r.recoveryGuard(epochAboveEverySnapshot) {
		next = o.SnapshotEpoch + 1
	}
	return next
}

// aboveOwnMeta is next, or the epoch after the one this member's
// metadata names without data (Local.MetaEpoch) when that is at or above
// it: a record of that epoch existed (this member joined or started it)
// and Consul lost or rolled it back; its incarnation may still run on a
// member Nomad collected, and the same epoch again would make two
// incarnations of one epoch (invariant 9; sim seed 1009859).
func (r rules) aboveOwnMeta(o Observation, next uint64) uint64 {
	if e := r.ownMetaEpoch(o); e >= next && e < math.MaxUint64 && r.recoveryGuard(epochAboveOwnMeta) {
		next = e + 1
	}
	if e := r.peersMetaEpoch(o); e >= next && r.recoveryGuard(epochAbovePeersMeta) {
		next = e + 1
	}
	return next
}

// peersMetaEpoch is the highest epoch a peer's metadata names without
// data (PeerStatus.MetaEpoch): a record of it existed as surely as of
// this member's own, and its incarnation may run where Nomad collected
// it, whichever member chooses the next epoch (review rev18c N3: seed
// 1009859's shape with the metadata on a peer of the restorer). One too
// close to 2^64 for a next epoch counts for nothing (not written by
// etcd-nomad; this member's own such metadata asks an operator instead:
// metaLeavesNoRoom).
//
// A peer's counts only within maxEpochAhead of the highest epoch
// otherwise known (knownEpoch; review rev19d W1): one forged /status
// answer naming 2^64-2^20 would otherwise push the record to the top for
// good, and no command frees it. Ignoring it cannot wedge; the reasons
// say so (metaIgnored).
func (r rules) peersMetaEpoch(o Observation) uint64 {
	return answeredMetaEpoch(o.Peers, r.metaReach(knownEpoch(o)))
}

// metaIgnored is the note a reason carries when peersMetaEpoch leaves a
// peer's metadata out, "" when it leaves none out.
func (r rules) metaIgnored(o Observation) string {
	if !r.recoveryGuard(epochAbovePeersMeta) {
		return ""
	}
	return ignoredMetaEpochs(o.Peers, r.metaReach(knownEpoch(o)))
}

// knownEpoch is the highest epoch this member knows other than from a
// peer's metadata without data, at least 1: the record's plausible top,
// this member's data epoch or its own metadata's (of this cluster, with
// room above it), the store's snapshots', and the peers' data epochs
// within maxEpochAhead of those.
func knownEpoch(o Observation) uint64 {
	e := uint64(1)
	if o.Record != nil {
		e = max(e, o.Record.plausibleTop())
	}
	if l := o.Local; !l.Empty {
		e = max(e, l.Epoch)
	} else if (l.Cluster == "" || l.Cluster == o.ClusterName) && l.MetaEpoch <= math.MaxUint64-maxEpochAhead {
		e = max(e, l.MetaEpoch)
	}
	if s := o.LatestSnapshot; s != nil {
		e = max(e, s.Epoch)
	}
	e = max(e, o.SnapshotEpoch)
	// A peer's data epoch, as its metadata's, only within reach of what
	// this member knows itself: else one forged answer with data and one
	// without would walk the bound up.
	base := e
	for _, p := range o.Peers {
		if p.Token != "" && metaWithinReach(p.Epoch, base) {
			e = max(e, p.Epoch)
		}
	}
	return e
}

// ownMetaEpoch is the epoch this member's metadata names without data
// (Local.MetaEpoch) when that metadata is of this cluster (Local.Cluster:
// the name it carries, "" when not known): metadata of another cluster
// (a reused volume) names no record of this one (review rev18c N5).
func (r rules) ownMetaEpoch(o Observation) uint64 {
	l := o.Local
	if !l.Empty || l.Cluster != "" && l.Cluster != o.ClusterName && r.recoveryGuard(metaOfThisCluster) {
		return 0
	}
	return l.MetaEpoch
}

// metaLeavesNoRoom waits for an operator when this member's metadata
// without data names an epoch too close to 2^64 for a next one to be
// recorded above it (aboveOwnMeta never wraps, and Check refuses a
// restore without a record at or below it): nothing else ever changes
// that metadata, so a plain wait would last forever (review rev18c N5).
// ok is false when there is room.
func (r rules) metaLeavesNoRoom(o Observation, name, why string) (Decision, bool) {
	e := r.ownMetaEpoch(o)
	if e <= math.MaxUint64-maxEpochAhead || !r.recoveryGuard(metaOfThisCluster) {
		return Decision{}, false
	}
	return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s, but this member's metadata (without data) names epoch %d, which leaves no room for a next epoch below 2^64 (not written by etcd-nomad): an operator must choose: remove that metadata from the data dir, or restore by hand ('etcd-nomad snapshot restore')", why, e)}, true
}

// otherIncarnation waits when this member or a peer holds data of another
// incarnation of the record's epoch, or of the source's epoch when its
// token is known (two incarnations of one epoch: Consul lost its state and
// a new cluster was seeded, then an older record came back; or a second
// recovery of one epoch). Recovering from the source would leave that data
// out, and the new epoch would set it aside: its writes would be lost.
// Snapshots carry only an epoch, so they cannot tell the two apart either.
// An operator chooses.
func (r rules) otherIncarnation(o Observation, name string, dataEpoch uint64, dataToken, why string) (Decision, bool) {
	if !r.recoveryGuard(notBesideOtherIncarnation) {
		return Decision{}, false
	}
	rec := o.Record
	other := func(token string, epoch uint64) bool {
		return token != "" && (epoch == rec.Epoch && token != rec.Token || dataToken != "" && epoch == dataEpoch && token != dataToken)
	}
	if !o.Local.Empty && o.Local.Cluster == o.ClusterName && other(o.Local.Token, o.Local.Epoch) {
		return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s, but this member holds another incarnation of epoch %d (token %s, revision %d): two incarnations of one epoch; not recovering: an operator must choose", why, o.Local.Epoch, short(o.Local.Token), o.Local.Revision)}, true
	}
	for _, p := range o.Peers {
		if other(p.Token, p.Epoch) {
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s, but peer %s holds another incarnation of epoch %d (token %s, revision %d): two incarnations of one epoch; not recovering: an operator must choose", why, p.Name, p.Epoch, short(p.Token), p.Revision)}, true
		}
	}
	return Decision{}, false
}

// olderDataNewer waits when this member or a peer holds data of another
// epoch older than the record's whose revision is higher than the chosen
// source: older than the source's, the incarnations after it lost every
// copy but an older snapshot (sim seeds 1643, 1906, 1955, 2199: a confirmed
// ForceNewCluster recovery whose only member left with its disk); between
// the source's and the record's (a takeover recovers from the last
// confirmed incarnation the record carries), an incarnation ran that the
// record does not know of, because Consul restored an older record (sim
// seed 49383). Recovering from the source would drop the writes only this
// data holds. Revisions only grow along a cluster's line (ForceNewCluster
// keeps them, a restore bumps them), so a higher revision means writes the
// source lacks. Which copy is right is an operator's call.
//
// Data of an epoch above a snapshot source's is of a line that forked
// from the snapshot's (or a later one): its revisions do not compare with
// the snapshot's, whatever they are (review rev16b C: a learner's epoch 4
// data at revision 1000 beside an epoch 3 snapshot at 1500, epoch 5 lost;
// an operator's recovery of epoch 4 from data below that snapshot makes
// it). srcEpoch is the source's epoch: the data's, or the snapshot's.
func (r rules) olderDataNewer(o Observation, name string, dataEpoch uint64, src int64, srcEpoch uint64, why string) (Decision, bool) {
	if !r.recoveryGuard(notBelowOlderData) {
		return Decision{}, false
	}
	older := func(token string, epoch uint64, rev int64) string {
		if !r.recoveryGuard(notBelowSkippedEpoch) {
			if token != "" && epoch < dataEpoch && rev > src {
				return fmt.Sprintf("newer than the best recovery source (%d)", src)
			}
			return ""
		}
		switch {
		case token == "" || epoch >= o.Record.Epoch || epoch == dataEpoch:
			return ""
		case epoch > srcEpoch:
			return fmt.Sprintf("of a later epoch than the best recovery source (epoch %d, revision %d: another line, whose revisions do not compare)", srcEpoch, src)
		case rev > src:
			return fmt.Sprintf("newer than the best recovery source (%d)", src)
		}
		return ""
	}
	if !o.Local.Empty && o.Local.Cluster == o.ClusterName {
		if ahead := older(o.Local.Token, o.Local.Epoch, o.Local.Revision); ahead != "" {
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s, but this member holds epoch %d data at revision %d, %s: not recovering from older data; an operator must choose", why, o.Local.Epoch, o.Local.Revision, ahead)}, true
		}
	}
	for _, p := range o.Peers {
		if ahead := older(p.Token, p.Epoch, p.Revision); ahead != "" {
			return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s, but peer %s holds epoch %d data at revision %d, %s: not recovering from older data; an operator must choose", why, p.Name, p.Epoch, p.Revision, ahead)}, true
		}
	}
	return Decision{}, false
}

// InstallWant is the revision a recovery from a snapshot (d, From
// FromSnapshot) must reach with the snapshot's verified delta chain, cur
// being the record it read (nil if none): the install is refused below it
// before anything is recorded. A new recovery must reach the chain end
// the planner compared with every member's data; a recovery recorded
// already (the member crashed between the record and the install, or
// Consul brought the record back) only as far as it still beats every
// member's data it sets aside (the planner chose the snapshot because its
// chain end beat them); an operator's restore as far as its command
// verified the chain to reach (SourceRevision; 0 in records written
// before the bound existed: what verifies).
func InstallWant(o Observation, d Decision, cur *Record) int64 {
	if s := o.LatestSnapshot; s != nil && s.Name == d.Snapshot && (cur == nil || cur.Token != d.Record.Token) {
		return s.Revision
	}
	if cur != nil && !cur.Operator {
		return maxDataRevision(o)
	}
	if cur != nil && cur.Token == d.Record.Token {
		return cur.SourceRevision
	}
	return 0
}

// maxDataRevision is the highest revision of data this member or an
// answering peer holds (0 when none holds any).
func maxDataRevision(o Observation) int64 {
	var rev int64
	if !o.Local.Empty && o.Local.Token != "" {
		rev = o.Local.Revision
	}
	for _, p := range o.Peers {
		if p.Token != "" {
			rev = max(rev, p.Revision)
		}
	}
	return rev
}

// listingUnanswered waits while the snapshot store's listing does not
// answer (Observation.ListingUnanswered) before a seed, restore or
// recovery decided on what the store holds: with nothing known of it, an
// empty seed could abandon the cluster's snapshots (invariant 8), and a
// recovery from data or an older snapshot the newer chain or refused
// object the store may hold (invariant 4). The wait ends when the store
// answers; only a store that is configured and does not answer holds
// it, and only where the quorum is lost or no member holds data.
func listingUnanswered(o Observation, name, why string) (Decision, bool) {
	if o.ListingUnanswered == "" {
		return Decision{}, false
	}
	return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("%s, but the snapshot store's listing does not answer (%s): it may hold the cluster's snapshots, or an object members refuse, newer than anything here; "+
		"not seeding, restoring or recovering until it answers (an operator who knows what it holds may choose: 'etcd-nomad recover -from MEMBER', or -from snapshot:NAME)", why, o.ListingUnanswered)}, true
}

// refusedAhead waits for an operator when the store holds an object
// members refuse (Observation.RefusedSnapshot) newer than what a seed or
// recovery would start from: revision rev, or nothing (have false: an
// empty seed, or no source at all). It is data that exists but may not be
// taken: starting from anything older abandons its writes, and only an
// operator may vouch for it. A store writer can plant one: that costs a
// wait, never a restore of it.
func refusedAhead(o Observation, name string, have bool, rev int64, why string) (Decision, bool) {
	rs := o.RefusedSnapshot
	if rs == nil || have && rs.Revision <= rev {
		return Decision{}, false
	}
	start := "nothing (an empty cluster)"
	if have {
		start = fmt.Sprintf("revision %d", rev)
	}
	take := fmt.Sprintf("'etcd-nomad recover -from snapshot:%s -accept-unauthenticated' (it lists the deltas without a MAC to name with -accept-unauthenticated-deltas)", rs.Name)
	if rs.Base != "" {
		take = fmt.Sprintf("'etcd-nomad recover -from snapshot:%s -accept-unauthenticated-deltas' naming the deltas without a MAC up to %s (the command lists them; add -accept-unauthenticated if %s has no MAC either)", rs.Base, rs.Name, rs.Base)
	}
	drop := "if not, delete it from the store"
	if rs.Corrupt {
		// Only its name is known (a delta's base is not): no restore of
		// it can be named, and one of it would be refused.
		take = "put its metadata back in the store (nothing restores it without its metadata), and the members weigh it again"
		drop = "if not, delete it (the object and its metadata) from the store; to recover without it all the same, 'etcd-nomad recover -from MEMBER -accept-data-loss'"
	} else if have && rs.BaseRevision <= rev {
		// Its snapshot alone is older than the source: restoring it
		// without the deltas (-accept-data-loss) would lose the writes
		// the source holds after it, and the refused object's too.
		base := rs.Name
		if rs.Base != "" {
			base = rs.Base
		}
		take += fmt.Sprintf(", which replays them to revision %d; never without them (-accept-data-loss): %s alone is older than revision %d", rs.Revision, base, rev)
		drop = fmt.Sprintf("if not, delete it (with its deltas) from the store, and the members recover from revision %d", rev)
	}
	return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("%s, but the store holds %s (epoch %d, revision %d), which members refuse (%s): it may hold this cluster's newest writes, and starting from %s would abandon them; "+
		"an operator must choose: if it is genuine, %s; %s", why, rs.Name, rs.Epoch, rs.Revision, rs.Why, start, take, drop)}, true
}

// snapshotRevision is s's revision (its chain's end), 0 for none.
func snapshotRevision(s *SnapshotInfo) int64 {
	if s == nil {
		return 0
	}
	return s.Revision
}
