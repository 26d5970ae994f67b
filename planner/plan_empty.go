// planEmpty and the rules for a member whose etcd is stopped and whose data
// dir is empty: seeding, joining, seeds from snapshots and takeovers.

package planner

import (
	"fmt"
	"time"
)

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
		if o.HoldersUnsaved != "" && r.seedGuard(noSeedWithHoldersUnsaved) {
			return holdersUnsaved(o, name)
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
		if d, ok := r.metaLeavesNoRoom(o, name, "no cluster record and no data anywhere"); ok && r.seedGuard(seedAboveMeta) {
			return d
		}
		// Epoch 1, or above an epoch a member's metadata names without
		// data: Consul lost that record (review rev18c N3), and a
		// collected voter of it that comes back would take this seed's
		// epoch 1 for older and re-record its own over it (invariant 9).
		next := uint64(1)
		if r.seedGuard(seedAboveMeta) {
			next = r.aboveOwnMeta(o, next)
		}
		why := "no cluster record and no data anywhere: seeding a new one-member cluster"
		if next > 1 {
			why += fmt.Sprintf(" as epoch %d, above the epoch %d a member's metadata names (its record was lost)", next, next-1)
		}
		if r.seedGuard(seedAboveMeta) {
			why += r.metaIgnored(o)
		}
		return Decision{Kind: Seed, Name: name, Record: &Record{Token: o.NewToken, Epoch: next, Seeder: name}, Reason: why}
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
			if o.SnapshotEpoch >= rec.Epoch && r.resumeGuard(resumeNotBelowLaterEpoch) {
				// The same outside the lineage: a restore records the
				// epoch above every snapshot its writer saw, so one of
				// the record's epoch or a later one was taken after it,
				// of the recorded restore that ran (its cluster id, not
				// the record's 0, in the metadata) or of an incarnation
				// that followed it, and Consul brought the record back.
				// The lineage of an unconfirmed record takes no epoch
				// above its own (snapshot.Lineage), so the newest is no
				// LatestSnapshot: SnapshotEpoch names it (sim seed
				// 28743: the operator's restore of epoch 2 ran as
				// cluster 295, epoch 3 recovered from its data and was
				// snapshotted, then every copy but the store's was
				// gone; the resume installed revision 161 below it).
				which := fmt.Sprintf("a snapshot of epoch %d", o.SnapshotEpoch)
				if rs := o.RefusedSnapshot; rs != nil && rs.Epoch == o.SnapshotEpoch {
					which = fmt.Sprintf("snapshot %s of epoch %d (revision %d with its deltas)", rs.Name, rs.Epoch, rs.Revision)
				}
				return Decision{Kind: Wait, AwaitsOperator: true, Name: name, Reason: fmt.Sprintf("this member recorded epoch %d as a restore of snapshot %s, but the store holds %s, taken after the record was written (the recorded restore ran, or a later incarnation did, and Consul brought the record back): not restoring below it; an operator must choose ('etcd-nomad snapshot list' names it; 'etcd-nomad recover -from snapshot:NAME' restores it)", rec.Epoch, snap, which)}
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
			return Decision{Kind: RecoverQuorum, Name: name, From: FromSnapshot, Snapshot: snap, Record: &rc,
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
	if d, ok := r.metaLeavesNoRoom(o, name, fmt.Sprintf("no cluster record and no member holds data; the store holds snapshot %s (revision %d)", s.Name, s.Revision)); ok {
		return d
	}
	next := r.aboveOwnMeta(o, s.Epoch+1)
	return Decision{Kind: RecoverQuorum, Name: name, From: FromSnapshot, Snapshot: s.Name,
		Record: &Record{Token: o.NewToken, Epoch: next, Seeder: name, Source: SnapshotSource(s.Name)},
		Reason: fmt.Sprintf("no cluster record and no member holds data, but the store holds snapshot %s (revision %d): restoring it as epoch %d instead of seeding an empty cluster%s", s.Name, s.Revision, next, r.metaIgnored(o))}
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
	return Decision{Kind: RecoverQuorum, Name: name, From: FromSnapshot, Snapshot: s.Name,
		Record: &Record{Token: o.NewToken, Epoch: next, Seeder: name, Source: SnapshotSource(s.Name)},
		Reason: fmt.Sprintf("%s: restoring it as epoch %d instead", why, next)}, true
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
	if d, ok := r.metaLeavesNoRoom(o, name, why+" and no member holds data"); ok && r.takeoverGuard(takeoverAsksWhenMetaFull) {
		return d, true // review rev19d W3b: as a first seed does
	}
	if s := o.LatestSnapshot; s != nil {
		next := r.aboveOwnMeta(o, max(rec.top(), s.Epoch)+1)
		return Decision{Kind: RecoverQuorum, Name: name, From: FromSnapshot, Snapshot: s.Name,
			Record: &Record{Token: o.NewToken, Epoch: next, Seeder: name, Source: SnapshotSource(s.Name)},
			Reason: fmt.Sprintf("%s and no member holds data: restoring snapshot %s (revision %d) as epoch %d%s", why, s.Name, s.Revision, next, r.metaIgnored(o))}, true
	}
	next := r.aboveOwnMeta(o, rec.top()+1)
	return Decision{Kind: Seed, Name: name, Record: &Record{Token: o.NewToken, Epoch: next, Seeder: name},
		Reason: fmt.Sprintf("%s, no member holds data and there is no snapshot: seeding epoch %d in its place%s", why, next, r.metaIgnored(o))}, true
}

// holdersUnsaved is the wait of a member that would seed or restore
// without a record while its last write of the data holders it remembers
// failed (Observation.HoldersUnsaved): a restart would forget a holder
// Nomad collected while it runs behind a partition, and seed beside it.
// Once the writes have failed for the recovery grace, an operator must
// fix what makes them fail.
func holdersUnsaved(o Observation, name string) Decision {
	d := Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("no cluster record and no data anywhere, but %s: a restart would forget the data holders this member saw listed (one Nomad collected may still run behind a partition); not seeding while the write fails", o.HoldersUnsaved)}
	if o.RecoveryGrace > 0 && o.HoldersUnsavedFor >= o.RecoveryGrace {
		d.AwaitsOperator = true
		d.Reason += fmt.Sprintf("; it has failed for %s: make the member's data directory writable (free space, a read-write mount, its owner), or stop this member (etcd-nomad does not seed while it cannot remember)", o.HoldersUnsavedFor.Round(time.Second))
	}
	return d
}
