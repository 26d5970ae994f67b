package planner

// Faults switches safety rules off, one field per rule. Plan always uses the
// zero value, which keeps every rule on; the planner's checker and the
// whole-system simulation (sim/) flip them to prove that a broken rule is
// caught. Never set one outside a test.
type Faults struct {
	SkipQuorumCheck      bool // remove members even below quorum
	PreferLeader         bool // pick the leader first for removal
	SeedDespiteRecord    bool // seed even when a record exists
	RejoinForeign        bool // start data from another cluster as-is
	IgnorePersisted      bool // run under the configured name, not the persisted one
	JoinWhileInFlight    bool // add a learner while another change is in flight
	SeedDespitePeerData  bool // seed while peers report data (lost record)
	ReplaceWhileInFlight bool // replace a second instance while one is replaced
	RecoverEarly         bool // recover before the grace period ends
	PreferOlderData      bool // recover from data older than the snapshot
	TakeoverEarly        bool // take over a recovery whose seeder may return
	RecoverFromLowest    bool // recover from the lowest revision instead of the highest

	// The safety review's defects, each switch restoring the
	// behaviour before its fix; each names the invariant it breaks
	// (docs/design.md).

	// SeedWhileSilent (invariant 8): with no record, seed although some
	// instances do not answer (they may hold the cluster's data).
	SeedWhileSilent bool
	// SetAsideOnUnconfirmed (invariant 9): set data aside because of an
	// unconfirmed record, or one of the same epoch with another token.
	SetAsideOnUnconfirmed bool
	// ObeyOlderRecord (invariant 9): obey a record older than this member's
	// own epoch (set the newer data aside, or re-record the older epoch).
	ObeyOlderRecord bool
	// LearnerSource (invariant 4): a learner's data may seed a recovery.
	LearnerSource bool
	// TakeoverFromPrevEpoch (invariant 4): a takeover recovers from data of
	// the record's epoch-1, not the last confirmed incarnation.
	TakeoverFromPrevEpoch bool
	// JoinUnconfirmed (invariant 5): join a cluster whose record is not
	// confirmed yet.
	JoinUnconfirmed bool
	// ResumeWhileSilent: resume this member's own unconfirmed seed or
	// restore, holding no data of it, although some instances do not
	// answer (they may run the incarnation it started before it lost its
	// disk).
	ResumeWhileSilent bool
	// JoinUnderNewer: join (or resume a join) under a record older than
	// a peer's epoch (Consul restored an older record of the same
	// cluster id).
	JoinUnderNewer bool
	// ResumeOverNewerSnapshot: resume this member's own unconfirmed seed
	// (empty) or restore (of its recorded snapshot) although the store
	// holds a newer snapshot.
	ResumeOverNewerSnapshot bool
	// RecoverBesideKnownHealthy (invariant 10): recover, take over or
	// resume a recovery although a member of the last known membership
	// answers as a healthy voter, because the provider no longer lists it.
	RecoverBesideKnownHealthy bool
	// RecoverBesideOtherIncarnation: recover although a member holds data
	// of another incarnation of the source's or the record's epoch.
	RecoverBesideOtherIncarnation bool
	// NoSeedTakeover: never take over an unconfirmed empty seed whose
	// seeder is gone for good (the cluster waits for it forever).
	NoSeedTakeover bool
	// SetAsideBeforeNewerRuns: set data of an older epoch aside as soon
	// as a confirmed newer record names another incarnation, although
	// no peer shows that incarnation running with a quorum (its every
	// copy may be lost since: this data may be the best one left).
	SetAsideBeforeNewerRuns bool
	// RecoverBelowOlderData: recover from a source (data or snapshot)
	// older than data of an older epoch a member still holds.
	RecoverBelowOlderData bool
	// TakeoverBesideNewer: take over a gone seeder's recovery although a
	// member holds data of an epoch newer than the record's.
	TakeoverBesideNewer bool
	// ResumeBesideQuorum: resume this member's recorded recovery from
	// data (ForceNewCluster) although a quorum answers, or with data of
	// another incarnation than the one it was recorded from.
	ResumeBesideQuorum bool
	// SettleOnOwnRecord: this member's own unconfirmed recovery record
	// sets its data aside although a quorum answers, or although the
	// recovery is from data (this data is not its source).
	SettleOnOwnRecord bool
	// RecoverBesideSkippedEpoch: a takeover recovers from the last
	// confirmed incarnation's source although a member holds data of an
	// epoch between it and the record's at a higher revision.
	RecoverBesideSkippedEpoch bool
	// RecoverBesideUnlistedVoter: recover, take over or restore although
	// a member of a known membership that the provider no longer lists
	// answers as a voter without a leader (its peers may regain a quorum
	// with it once a partition heals).
	RecoverBesideUnlistedVoter bool
	// RestoreWithoutGrace: with no record and no data anywhere, restore
	// the newest snapshot at once, without waiting RecoveryGrace for a
	// collected majority's leader to write its summary again.
	RestoreWithoutGrace bool
	// IgnorePause: act while an operator paused the cluster.
	IgnorePause bool
	// SetAsideLastGood: set data found corrupt aside although the
	// healthy voters no CORRUPT alarm names, besides this member, are
	// fewer than a quorum (the cluster would lose its quorum, or the
	// last good copy).
	SetAsideLastGood bool
	// SeedBesideRefused (invariant 8): seed empty, or restore the
	// newest authentic snapshot, with no record or over a gone seeder's
	// empty seed, although the store holds a newer object members refuse
	// (unauthenticated or forged): it may hold the cluster's data.
	SeedBesideRefused bool
	// RecoverBelowRefused (invariant 4): recover from data or a
	// snapshot older than an object of the store members refuse.
	RecoverBelowRefused bool
	// SeedWithoutListing (invariant 8): seed empty, restore,
	// or take over a gone seeder's seed, with no record or over this
	// member's own unconfirmed one, on what the store holds (nothing, as
	// far as the member knows) while its listing does not answer.
	SeedWithoutListing bool
	// RecoverWithoutListing (invariant 4): recover from data
	// or a snapshot while the store's listing does not answer (it may
	// hold a newer chain, or an object members refuse).
	RecoverWithoutListing bool
	// ResumeOperatorWithoutListing (invariant 10): resume an
	// operator's restore this member recorded, holding no data of it,
	// while the store's listing does not answer (it may hold a snapshot
	// of an incarnation that ran after the record was written).
	ResumeOperatorWithoutListing bool
	// SnapshotUnconfirmed: the leader's scheduled snapshot check runs
	// (and paces the next one) while the record is unconfirmed or names
	// another incarnation than this member's data, when no save can be
	// made: a seed's first snapshot comes a check interval late.
	SnapshotUnconfirmed bool
	// DisarmPresent: disarm the CORRUPT alarm of a member still in the
	// membership (its corrupt data would go on serving unnoticed).
	DisarmPresent bool

	// The operator's commands (the simulation's operator).

	// OperatorBelowStore: 'recover -from MEMBER' or '-from
	// snapshot:NAME' goes ahead without -accept-data-loss although the
	// store's newest snapshot with its deltas is newer than the source.
	OperatorBelowStore bool
	// OperatorBelowMetaEpoch (invariant 9): 'recover' records its epoch
	// without regard to the epoch a member's metadata names without data
	// (PeerStatus.MetaEpoch): Consul lost or rolled back that epoch's
	// record, and a collected voter of it may still run (review rev18c N3).
	OperatorBelowMetaEpoch bool
	// OperatorBelowReplacedRestore: '-from snapshot:NAME' replaces an
	// unconfirmed restore record whose command verified its source to a
	// higher revision than NAME reaches without -accept-data-loss, naming
	// neither the revisions between nor the copy that holds them.
	OperatorBelowReplacedRestore bool
	// ResumeRestoreBesideNewer: resume this member's own restore record
	// (an operator's or its own) although a peer holds another
	// incarnation of an epoch as new as the record's (one ran since the
	// record was written: Consul brought it back).
	ResumeRestoreBesideNewer bool
	// ResumeRestoreBelowLaterEpoch (invariant 4): resume this member's
	// own restore record (install it, or start the copy it installed)
	// although the store holds a snapshot of the record's epoch or a
	// later one, of its lineage or not (SnapshotEpoch; an unconfirmed
	// record's lineage takes no epoch above its own, so a later one is
	// never LatestSnapshot): the recorded restore ran, or a later
	// incarnation did, after the record was written, and Consul brought
	// the record back (sim seed 28743: an operator's restore of epoch 2
	// ran as cluster 295, a recovery of epoch 3 from its data was
	// snapshotted, and the restore was resumed below both).
	ResumeRestoreBelowLaterEpoch bool
	// RecoverFromOlderEpochSnapshot: a quorum-loss recovery restores the
	// newest snapshot over the survivors' data of a newer epoch when the
	// snapshot's revision is higher (two lines' revisions compared: an
	// operator's restore of an older snapshot starts a line below the one
	// it replaced, whose snapshots stay in the store).
	RecoverFromOlderEpochSnapshot bool
	// RecoverBelowSnapshotEpoch: a quorum-loss recovery records the epoch
	// after the record's although the newest snapshot is of that epoch or
	// a later one (Consul restored an older record).
	RecoverBelowSnapshotEpoch bool
	// RecoverBelowForeignSnapshotEpoch (invariant 9): a recovery
	// records an epoch above the lineage's newest snapshot but not above
	// a genuine one of the store the lineage calls foreign (an
	// incarnation that ran after a record Consul restored): two
	// incarnations of one epoch.
	RecoverBelowForeignSnapshotEpoch bool
	// RecoverBelowOwnMetaEpoch (invariant 9): a recovery or a restore
	// records its epoch without regard to the epoch this member's
	// metadata names without data (Local.MetaEpoch): two incarnations of
	// one epoch when Consul lost or rolled back the record of that one.
	RecoverBelowOwnMetaEpoch bool
	// RecoverBelowPeerMetaEpoch (invariant 9): a new epoch (a seed, a
	// takeover, a recovery, a restore without a record) is chosen without
	// regard to the epoch a peer's metadata names without data
	// (PeerStatus.MetaEpoch), as if only the chooser's own counted
	// (review rev18c N3).
	RecoverBelowPeerMetaEpoch bool
	// SeedBelowMetaEpoch (invariant 9): a first seed with no record
	// records epoch 1 although this member's or a peer's metadata names a
	// later epoch whose record Consul lost (review rev18c N3).
	SeedBelowMetaEpoch bool
	// PeerMetaOutOfReach (invariant 9, liveness): a peer's metadata
	// epoch counts however far above every epoch otherwise known (up to
	// 2^64-2^20): one forged /status answer pushes the record to the top
	// for good (review rev19d W1).
	PeerMetaOutOfReach bool
	// TakeoverBesideFullMeta (invariant 9, liveness): a seed takeover
	// records above this member's metadata even when that leaves no room
	// for a next epoch, instead of asking an operator (review rev19d W3b).
	TakeoverBesideFullMeta bool
	// MetaOfAnyCluster (invariants 9 and 10): the epoch this member's
	// metadata names without data counts whatever cluster that metadata
	// names, and one too close to 2^64 for a next epoch stalls the
	// restore without a record in a wait no operator is asked to end
	// (review rev18c N5).
	MetaOfAnyCluster bool
	// SettleOwnRestoreWhileSilent: this member's own unconfirmed restore
	// record sets its data aside although some instances do not answer
	// (they may hold a quorum of that data's cluster).
	SettleOwnRestoreWhileSilent bool
	// RestoreOverLaterWrites: an operator's restore sets aside, or
	// restores over, data beyond the highest revision its command saw
	// (Record.AcceptedRevision: writes acknowledged after it was recorded).
	RestoreOverLaterWrites bool
	// RestoreOverLaterSnapshot: an operator's restore goes ahead although
	// the store holds a snapshot of an older epoch beyond what its
	// command accepted (a cluster Nomad collected served on beside the
	// record, unseen by the command, and was snapshotted).
	RestoreOverLaterSnapshot bool
	// ResumeBelowVerified: an operator's restore is retried although its
	// chain now verifies below the revision its command verified (the
	// install refuses every time: a silent wedge).
	ResumeBelowVerified bool
	// AcceptAcrossLines (RestoreOverLaterWrites's rule, across lines):
	// an operator's restore compares every line's data with one accepted
	// revision, the highest the command saw on any line, so a member of
	// an older line at a higher revision accepts the live line's writes
	// acknowledged after the record.
	AcceptAcrossLines bool
	// StartPendingForceNew (invariant 10): start this member's own
	// recorded recovery from data whose ForceNewCluster start is pending
	// (the metadata already names the new epoch, etcd never started)
	// although a quorum answers, an instance is silent, or a peer holds
	// the source incarnation at a higher revision.
	StartPendingForceNew bool
	// StartInstalledRestore (invariant 10): start this
	// member's own installed restore, never completed, although a quorum
	// answers, an instance is silent, or a known voter answers.
	StartInstalledRestore bool
	// RerecordUnranEpoch (invariant 9): a running member
	// re-records the epoch its metadata names although voters of its own
	// cluster run that cluster as an older epoch (its recovery's
	// ForceNewCluster start never happened; the start rejoined).
	RerecordUnranEpoch bool
	// PendingWaitsSilently (liveness): data of this member's recovery
	// from data that never started, under a record of an older epoch
	// whose cluster does not answer while every instance does, waits for
	// that cluster without asking for an operator, while its peers wait
	// for it to re-record (sim seed 7867: Consul restored epoch 1's
	// record over epoch 3's recovery, and no member ever moved).
	PendingWaitsSilently bool
	// RejoinSupersededLine (invariant 9): start this member's own data
	// of the record's incarnation although the store holds a snapshot
	// taken under the data's cluster id at a newer epoch than the data's
	// and any the record names (a recovery from the data's line ran
	// after it, and Consul restored an older record since).
	RejoinSupersededLine bool
	// RejoinSupersededAboveRecord (invariant 9): start this member's
	// data of an epoch above the record's ("epochs only grow") although
	// the store holds a snapshot under the data's cluster id at a newer
	// epoch than the data's and the record's top (review rev18c N1).
	RejoinSupersededAboveRecord bool
	// RejoinSupersededWithoutRecord (invariant 9): with no record, start
	// this member's data although the store holds a snapshot under the
	// data's cluster id at a newer epoch than the data's (review rev18c
	// N2).
	RejoinSupersededWithoutRecord bool
	// RejoinLineUnknown (invariant 9): start stopped data that re-records
	// its epoch (no record, or an older one) while the snapshot store's
	// listing does not answer, so that nothing says whether a newer epoch
	// of the data's line ran (review rev18f F4).
	RejoinLineUnknown bool
	// RerecordSupersededLine (invariant 9): a running member re-records
	// its epoch (no record, or an older one) although the store holds a
	// snapshot under its cluster id at a newer epoch than its own and
	// any the record names (review rev18f F5).
	RerecordSupersededLine bool
	// RerecordRemoved (invariant 9): a running member re-records its
	// epoch although the member list of its cluster id that answers no
	// longer names it (a recovery from another member's data dropped
	// it; review rev18f F5, sim seed 1531).
	RerecordRemoved bool
	// KeepWithoutQuorum: 'recover -keep-running' records the running
	// incarnation although fewer than a quorum of the instances answer as
	// its healthy voters (another incarnation may be the one with data).
	KeepWithoutQuorum bool

	// LeaveBesideNewerEpoch (invariant 10): a leaving member whose
	// incarnation has no quorum keeps its etcd running, waiting for the
	// quorum to come back so that it can remove itself, although a newer
	// epoch is recorded (a recovery replaced the incarnation): a partition
	// that heals gives the old incarnation its quorum back beside the new
	// one (sim seed 1002359).
	LeaveBesideNewerEpoch bool
	// LeaveBesideStaleVoter: a leaving member whose replacement inherits
	// its data, and whose stop would leave the others below quorum only
	// because a voter gone from the provider (past StaleAfter) still
	// counts, removes itself instead of that voter: the replacement then
	// sets the data aside and joins empty, and the membership falls one
	// voter below the desired size meanwhile (e2e
	// TestScaleWithNomadJobRun: a scale-down and a destructive update in
	// one deployment).
	LeaveBesideStaleVoter bool
	// OperatorForgetsBeyond: 'recover -from MEMBER -accept-data-loss'
	// goes ahead beside a snapshot outside the record's lineage that
	// reaches past the source (OperatorView.Beyond) without recording
	// that it accepted it, and its seeder waits for an operator again
	// (review rev18c N4, rev17a F2).
	OperatorForgetsBeyond bool

	// RunBlindBesideNewerEpoch (invariant 10): a running member whose
	// provider does not answer keeps its etcd running without a quorum
	// although the record names a newer, confirmed epoch: a partition
	// that heals gives the old incarnation its quorum back beside the new
	// one (sim seed 41704).
	RunBlindBesideNewerEpoch bool

	// RecoverAcrossLines (invariants 4 and 9): a quorum-loss recovery
	// beside an authentic snapshot of a newer epoch of this data's line
	// (LineEpoch) chooses between this line's data and that snapshot by
	// revision, although the lines forked and their revisions do not
	// compare: the newer line's writes after the fork are lost (review
	// rev18f F1).
	RecoverAcrossLines bool
	// SeedWithHoldersUnsaved (invariant 8): with no record, seed or
	// restore while the member's last write of the data holders it
	// remembers failed: a restart forgets them and seeds beside one
	// (review rev19b D).
	SeedWithHoldersUnsaved bool
}

// rules is the name the planner's code uses for Faults.
type rules = Faults

// The guards below are the only code that reads a Faults switch: each
// answers, for one family of rules, whether a rule holds (with the zero
// Faults, every rule holds). The planner asks a guard by the rule's name,
// never a switch, so a rule reads the same wherever it applies and a
// switch that restores the behaviour before a fix turns off every rule
// the fix added. A rule that no case names holds.

// seedRule names a rule that keeps an empty member from seeding a new
// cluster beside existing data (invariants 1 and 8).
type seedRule int

const (
	noSeedOverRecord         seedRule = iota // never seed while a record exists and the member list is unknown
	noSeedBesidePeerData                     // never seed while a peer reports data: it re-records
	noSeedWhileSilent                        // never seed while an instance does not answer: it may hold the data
	restoreBeforeSeed                        // restore the newest snapshot rather than seed empty
	seedAboveMeta                            // a first seed records above every epoch a member's metadata names without data
	noSeedBesideRefused                      // never seed, nor restore an older snapshot, beside a newer object members refuse
	restoreAfterGrace                        // ...only once the record has been missing for RecoveryGrace
	noSeedWithoutListing                     // never seed or restore while the store's listing does not answer
	noSeedWithHoldersUnsaved                 // never seed or restore while the holders memory could not be written
)

// seedGuard reports whether rule holds.
func (f Faults) seedGuard(rule seedRule) bool {
	switch rule {
	case noSeedOverRecord:
		return !f.SeedDespiteRecord
	case noSeedBesidePeerData, restoreBeforeSeed:
		return !f.SeedDespitePeerData
	case noSeedWhileSilent:
		return !f.SeedWhileSilent && !f.SeedDespitePeerData
	case noSeedBesideRefused:
		return !f.SeedBesideRefused
	case restoreAfterGrace:
		return !f.RestoreWithoutGrace
	case noSeedWithoutListing:
		return !f.SeedWithoutListing
	case seedAboveMeta:
		return !f.SeedBelowMetaEpoch
	case noSeedWithHoldersUnsaved:
		return !f.SeedWithHoldersUnsaved
	}
	return true
}

// changeRule names a rule for membership changes: joins, removals and
// replacements (invariants 2 and 3).
type changeRule int

const (
	oneChangeAtATime  changeRule = iota // no join or voter removal while a member was added but has not started, or a learner catches up
	joinBelowSize                       // join only while the voters are fewer than the desired size
	joinOnlyConfirmed                   // join only a cluster whose record is confirmed (its id checks the member list)
	joinNotUnderNewer                   // never join under a record older than a peer's epoch
	keepQuorum                          // never remove or replace a voter below the quorum of healthy voters
	leaderRemovedLast                   // the leader is the last choice for removal
	oneReplaceAtATime                   // no replacement while another or a membership change is in flight
)

// changeGuard reports whether rule holds.
func (f Faults) changeGuard(rule changeRule) bool {
	switch rule {
	case oneChangeAtATime, joinBelowSize:
		return !f.JoinWhileInFlight
	case joinOnlyConfirmed:
		return !f.JoinUnconfirmed
	case joinNotUnderNewer:
		return !f.JoinUnderNewer
	case keepQuorum:
		return !f.SkipQuorumCheck
	case leaderRemovedLast:
		return !f.PreferLeader
	case oneReplaceAtATime:
		return !f.ReplaceWhileInFlight
	}
	return true
}

// recoveryRule names a rule of a quorum-loss recovery: when it runs and
// what it starts from (invariants 4 and 10).
type recoveryRule int

const (
	recoverAfterGrace         recoveryRule = iota // only once the quorum has been lost for RecoveryGrace
	recoverWhenAllAnswer                          // only while every instance answers
	recoverFromHighest                            // from the highest revision known
	snapshotOnlyIfNewer                           // a snapshot beats a survivor's data only when newer
	learnerNeverSource                            // a learner's data never seeds a recovery
	notBelowLearnerData                           // never from data older than a learner holds
	notBesideOtherIncarnation                     // never while a member holds another incarnation of the record's or the source's epoch
	notBelowOlderData                             // never from a source older than data of an older epoch
	notBelowSkippedEpoch                          // ...nor than data of an epoch between the source's and the record's
	notBesideKnownHealthy                         // never while a member of the last known membership answers as a healthy voter
	notBelowRefused                               // never from a source older than an object of the store members refuse
	snapshotNotOfOlderEpoch                       // a snapshot of an epoch older than the data's never beats it
	epochAboveSnapshots                           // the next epoch is above the newest snapshot's too
	epochAboveEverySnapshot                       // ...and above every snapshot's that authenticates, of the lineage or not
	epochAboveOwnMeta                             // ...and above the epoch this member's metadata names without data
	epochAbovePeersMeta                           // ...and above the epochs peers' metadata names without data
	metaOfThisCluster                             // ...metadata of this cluster only, and an operator asked when it leaves no room
	peersMetaWithinReach                          // ...a peer's metadata only within maxEpochAhead of every epoch otherwise known
	notBesideUnlistedVoter                        // never while an unlisted member of a known membership answers as a voter, with a leader or not
	notWithoutListing                             // never while the store's listing does not answer (it may hold a newer source)
	notAcrossLines                                // never beside a snapshot of a newer epoch of this data's line: an operator chooses
)

// recoveryGuard reports whether rule holds.
func (f Faults) recoveryGuard(rule recoveryRule) bool {
	switch rule {
	case recoverAfterGrace, recoverWhenAllAnswer:
		return !f.RecoverEarly
	case recoverFromHighest:
		return !f.RecoverFromLowest
	case snapshotOnlyIfNewer:
		return !f.PreferOlderData
	case learnerNeverSource, notBelowLearnerData:
		return !f.LearnerSource
	case notBesideOtherIncarnation:
		return !f.RecoverBesideOtherIncarnation
	case notBelowOlderData:
		return !f.RecoverBelowOlderData
	case notBelowSkippedEpoch:
		return !f.RecoverBesideSkippedEpoch
	case notBesideKnownHealthy:
		return !f.RecoverBesideKnownHealthy
	case notBelowRefused:
		return !f.RecoverBelowRefused
	case snapshotNotOfOlderEpoch:
		return !f.RecoverFromOlderEpochSnapshot
	case epochAboveSnapshots:
		return !f.RecoverBelowSnapshotEpoch
	case epochAboveEverySnapshot:
		return !f.RecoverBelowForeignSnapshotEpoch
	case epochAboveOwnMeta:
		return !f.RecoverBelowOwnMetaEpoch
	case epochAbovePeersMeta:
		return !f.RecoverBelowPeerMetaEpoch
	case metaOfThisCluster:
		return !f.MetaOfAnyCluster
	case peersMetaWithinReach:
		return !f.PeerMetaOutOfReach
	case notBesideUnlistedVoter:
		return !f.RecoverBesideUnlistedVoter
	case notWithoutListing:
		return !f.RecoverWithoutListing
	case notAcrossLines:
		return !f.RecoverAcrossLines
	}
	return true
}

// takeoverRule names a rule for taking over an unconfirmed seed or
// recovery whose seeder is gone (invariant 4).
type takeoverRule int

const (
	takeoverAfterGrace        takeoverRule = iota // only once the seeder has been gone for RecoveryGrace
	takeoverSeederUnlisted                        // never while the provider still lists the seeder
	takeoverNotBesideNewer                        // never while a member holds an epoch newer than the record's
	takeoverFromLastConfirmed                     // from the last confirmed incarnation the record carries
	takeoverGoneSeed                              // an empty seed whose seeder is gone for good is taken over (else the cluster waits forever)
	takeoverAsksWhenMetaFull                      // a takeover asks an operator when this member's metadata leaves no room for a next epoch
)

// takeoverGuard reports whether rule holds.
func (f Faults) takeoverGuard(rule takeoverRule) bool {
	switch rule {
	case takeoverAfterGrace, takeoverSeederUnlisted:
		return !f.TakeoverEarly
	case takeoverNotBesideNewer:
		return !f.TakeoverBesideNewer
	case takeoverFromLastConfirmed:
		return !f.TakeoverFromPrevEpoch
	case takeoverGoneSeed:
		return !f.NoSeedTakeover
	case takeoverAsksWhenMetaFull:
		return !f.TakeoverBesideFullMeta
	}
	return true
}

// resumeRule names a rule for resuming a seed, restore or recovery this
// member recorded before it stopped (invariants 1, 4 and 10).
type resumeRule int

const (
	resumeWhenAllAnswer        resumeRule = iota // a seed or restore whose data this member lost only while every instance answers
	resumeNotOverNewerSnapshot                   // never while the store holds a newer snapshot (authentic, or one members refuse) than the record starts from
	resumeAsRecorded                             // a recovery from data only from its recorded source, while no quorum answers and every instance does
	resumeNotBesideNewer                         // a restore never beside another incarnation of an epoch as new as the record's
	resumeNotBelowLaterEpoch                     // ...nor below a snapshot of an epoch as new as the record's, of its lineage or not
	resumeNotOverLaterWrites                     // an operator's restore never over data beyond what it accepted
	resumeNotOverLaterSnapshot                   // ...nor over a snapshot of an older epoch beyond it
	resumeWhenChainReaches                       // an operator's restore waits for the operator once its chain verifies below what the command verified
	resumeOperatorAfterListing                   // an operator's restore, too, waits while the store's listing does not answer
	acceptPerLine                                // ...and compares each line's data only with what the command accepted of that line
	pendingAsRecorded                            // a recovery from data whose ForceNewCluster start is pending starts only as a resumed one would
	restoreAsRecorded                            // an installed restore starts only as a resumed recovery would
	pendingAwaitsOperator                        // a never-started recovery under an older record no quorum answers for awaits the operator
)

// resumeGuard reports whether rule holds.
func (f Faults) resumeGuard(rule resumeRule) bool {
	switch rule {
	case resumeWhenAllAnswer:
		return !f.ResumeWhileSilent
	case resumeNotOverNewerSnapshot:
		return !f.ResumeOverNewerSnapshot
	case resumeAsRecorded:
		return !f.ResumeBesideQuorum
	case resumeNotBesideNewer:
		return !f.ResumeRestoreBesideNewer
	case resumeNotBelowLaterEpoch:
		return !f.ResumeRestoreBelowLaterEpoch
	case resumeNotOverLaterWrites:
		return !f.RestoreOverLaterWrites
	case resumeNotOverLaterSnapshot:
		return !f.RestoreOverLaterSnapshot
	case resumeWhenChainReaches:
		return !f.ResumeBelowVerified
	case resumeOperatorAfterListing:
		return !f.ResumeOperatorWithoutListing
	case acceptPerLine:
		return !f.AcceptAcrossLines
	case pendingAsRecorded:
		return !f.StartPendingForceNew
	case restoreAsRecorded:
		return !f.StartInstalledRestore
	case pendingAwaitsOperator:
		return !f.PendingWaitsSilently
	}
	return true
}

// dataRule names a rule for whose data a stopped or running member holds
// (invariants 5, 6 and 9).
type dataRule int

const (
	persistedName              dataRule = iota // identity is the name persisted in the data dir
	ownIncarnationOnly                         // data of another cluster, or another incarnation than the record's, is never started as-is
	epochsOnlyGrow                             // a record older than this member's epoch is never obeyed: the data re-records it
	asideForConfirmed                          // only a confirmed newer record sets data aside
	asideOnceNewerRuns                         // ...and only once a peer shows it running with a quorum
	asideNotForOwn                             // never for this member's own unconfirmed record while a quorum answers, nor its own recovery from data
	asideOwnWhenAllAnswer                      // ...nor for its own unconfirmed restore while an instance does not answer
	onlyEpochsThatRan                          // a member never re-records an epoch its own cluster's voters do not run
	notSupersededLine                          // data never starts once a newer epoch of its cluster id ran (LineEpoch)
	notSupersededAboveRecord                   // ...nor data above an older record's epoch
	notSupersededWithoutRecord                 // ...nor data without a record
	notBlindToLine                             // ...nor data that re-records its epoch while the listing does not answer
	notRerecordSupersededLine                  // a running member never re-records an epoch its line superseded
	notRerecordRemoved                         // ...nor from data the answering membership of its cluster id dropped
)

// dataGuard reports whether rule holds.
func (f Faults) dataGuard(rule dataRule) bool {
	switch rule {
	case persistedName:
		return !f.IgnorePersisted
	case ownIncarnationOnly:
		return !f.RejoinForeign
	case epochsOnlyGrow:
		return !f.ObeyOlderRecord
	case asideForConfirmed:
		return !f.SetAsideOnUnconfirmed
	case asideOnceNewerRuns:
		return !f.SetAsideBeforeNewerRuns
	case asideNotForOwn:
		return !f.SettleOnOwnRecord
	case asideOwnWhenAllAnswer:
		return !f.SettleOwnRestoreWhileSilent
	case onlyEpochsThatRan:
		return !f.RerecordUnranEpoch
	case notSupersededLine:
		return !f.RejoinSupersededLine
	case notSupersededAboveRecord:
		return !f.RejoinSupersededAboveRecord
	case notSupersededWithoutRecord:
		return !f.RejoinSupersededWithoutRecord
	case notBlindToLine:
		return !f.RejoinLineUnknown
	case notRerecordSupersededLine:
		return !f.RerecordSupersededLine
	case notRerecordRemoved:
		return !f.RerecordRemoved
	}
	return true
}

// operatorRule names a rule of an operator's command ('etcd-nomad
// recover').
type operatorRule int

const (
	notBelowStore           operatorRule = iota // a source older than the store's newest snapshot needs -accept-data-loss
	notBelowReplacedRestore                     // a restore short of the unconfirmed restore record it replaces needs -accept-data-loss
	keepOnlyAQuorum                             // -keep-running records only an incarnation a quorum of the instances answers for
	acceptBeyondLineage                         // a recovery from a member records the acceptance of what it showed outside the lineage
	aboveMetaEpochs                             // the new epoch is above every epoch a member's metadata names without data
)

// operatorGuard reports whether rule holds.
func (f Faults) operatorGuard(rule operatorRule) bool {
	switch rule {
	case notBelowStore:
		return !f.OperatorBelowStore
	case notBelowReplacedRestore:
		return !f.OperatorBelowReplacedRestore
	case keepOnlyAQuorum:
		return !f.KeepWithoutQuorum
	case acceptBeyondLineage:
		return !f.OperatorForgetsBeyond
	case aboveMetaEpochs:
		return !f.OperatorBelowMetaEpoch
	}
	return true
}

// leaveRule names a rule of a member leaving for good (PlanLeave).
type leaveRule int

const (
	stopWhenSuperseded      leaveRule = iota // without a quorum, a leaving member stops at once once a newer epoch of its cluster is known
	stopBlindWhenSuperseded                  // without a quorum and the provider, a running member stops once the record names a newer confirmed epoch (PlanUnobserved)
	staleBeforeHandover                      // a leaving member whose replacement inherits its data removes a stale voter first when only that voter keeps the others below quorum
)

// leaveGuard reports whether rule holds.
func (f Faults) leaveGuard(rule leaveRule) bool {
	switch rule {
	case stopWhenSuperseded:
		return !f.LeaveBesideNewerEpoch
	case stopBlindWhenSuperseded:
		return !f.RunBlindBesideNewerEpoch
	case staleBeforeHandover:
		return !f.LeaveBesideStaleVoter
	}
	return true
}

// holdRule names a rule that holds a member back while an operator paused
// the cluster or etcd's CORRUPT alarms are raised.
type holdRule int

const (
	holdWhilePaused   holdRule = iota // act only as paused allows while an operator paused the cluster
	keepLastGoodCopy                  // set corrupt data aside only while the good copies keep a quorum
	disarmOnlyRemoved                 // disarm only the CORRUPT alarms of members no longer in the membership
)

// holdGuard reports whether rule holds.
func (f Faults) holdGuard(rule holdRule) bool {
	switch rule {
	case holdWhilePaused:
		return !f.IgnorePause
	case keepLastGoodCopy:
		return !f.SetAsideLastGood
	case disarmOnlyRemoved:
		return !f.DisarmPresent
	}
	return true
}

// backupRule names a rule of the leader's backups (PlanSideJobs).
type backupRule int

const (
	snapshotOnlyConfirmed backupRule = iota // check the store for a scheduled snapshot only under a record confirming this member's data
)

// backupGuard reports whether rule holds.
func (f Faults) backupGuard(rule backupRule) bool {
	switch rule {
	case snapshotOnlyConfirmed:
		return !f.SnapshotUnconfirmed
	}
	return true
}
