package planner

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Observation is everything one supervisor loop saw.
type Observation struct {
	// SideJobs is what the loop observed of its side jobs (PlanSideJobs).
	SideJobs SideJobState
	// ClusterName is the name of the cluster definition.
	ClusterName string
	// Self is this member's configured identity and URLs.
	Self Self
	// DesiredSize is the number of voters the cluster should have.
	DesiredSize int
	// Instances are the members the provider says should exist.
	Instances []Instance
	// MembersKnown is true when the etcd member list was read with a
	// linearizable request, which also proves the cluster has quorum.
	MembersKnown bool
	// Members is the etcd member list; meaningful only when MembersKnown.
	Members []Member
	// MembersClusterID is the cluster id of the answer that carried
	// Members (etcd's response header).
	MembersClusterID uint64
	// LeaderID is the current leader's member id, 0 if unknown.
	LeaderID uint64
	// Running is true when this member's etcd server is running; SelfID is
	// then its member id.
	Running bool
	SelfID  uint64
	// Local describes this member's data dir.
	Local Local
	// Record is the cluster record from the coordinator; nil when absent.
	Record *Record
	// HoldsLock is true when this member holds the coordination lock.
	HoldsLock bool
	// Peers are the statuses other members reported.
	Peers []PeerStatus
	// StaleAfter is how long a member must be absent from the provider
	// before it may be removed.
	StaleAfter time.Duration
	// NewToken is a fresh random cluster token, used only if this loop seeds.
	NewToken string
	// StartFailures counts this member's consecutive failed etcd starts.
	StartFailures int
	// ReplaceAfter, when positive, is how long a voter may stay unhealthy
	// before its instance is handed back to the provider for replacement
	// (auto-scaling groups); 0 disables replacement.
	ReplaceAfter time.Duration
	// ReplacementInFlight is true while the provider is already replacing
	// an instance.
	ReplacementInFlight bool
	// QuorumLostFor is how long this member has seen the cluster without
	// quorum (running, or holding data of the current incarnation).
	QuorumLostFor time.Duration
	// RecoveryGrace, when positive, is how long quorum must stay lost
	// before a recovery starts; 0 disables automatic recovery.
	RecoveryGrace time.Duration
	// LatestSnapshot is the newest snapshot in the store, nil if none or
	// unknown.
	LatestSnapshot *SnapshotInfo
	// SnapshotEpoch is the highest epoch of any snapshot in the store
	// that authenticates, of the record's lineage or not (0 if none or
	// unknown). LatestSnapshot is the lineage's newest; a recovery records
	// its epoch above every snapshot all the same (invariant 9), or a
	// genuine one the lineage calls foreign (of an incarnation that ran
	// after a record Consul restored) would share the new epoch: two
	// incarnations of one epoch (invariant 9).
	SnapshotEpoch uint64
	// LineEpoch is the highest epoch of an object in the store that
	// authenticates and was taken under this member's data's cluster id
	// (Local.ClusterID; 0 if none, unknown, or no data). ForceNewCluster
	// keeps a cluster id and a restore takes a new one, so an epoch
	// above the data's is of an incarnation recovered from this data's
	// line after it: the data's incarnation was superseded, whatever
	// record Consul holds now (it may have restored an older one). While
	// the listing does not answer it is the last listing's that did (task
	// keeps it: a snapshot of that epoch existed), 0 if none did.
	LineEpoch uint64
	// RefusedSnapshot is the newest object (snapshot or delta) of this
	// cluster in the store that members refuse (no MAC: written before
	// snapshots were authenticated or by a member without the key; or a
	// MAC that does not verify: a KEK created again, or a store writer's
	// plant), nil if none. It may hold the cluster's newest writes and
	// may not be taken: no seed, and no new recovery or restore from
	// anything older, starts beside it; the member waits for an operator
	// (etcd-nomad recover -from snapshot:NAME -accept-unauthenticated, or
	// deleting it; for corrupt metadata, putting it back or deleting it). A store writer can plant one: that only ever costs
	// the automatic path a wait, never a restore of it.
	RefusedSnapshot *RefusedSnapshot
	// ListingUnanswered, when not empty, is why the snapshot store's
	// listing did not answer at its last try (a 503, a partition to the
	// store): what the store holds is unknown, and LatestSnapshot and
	// RefusedSnapshot say nothing (nil is "none or unknown"). No seed,
	// and no new recovery or restore, is decided on the store's contents
	// then: it may hold the cluster's snapshots, or an object members
	// refuse, newer than anything the members hold; nor does stopped data
	// start to re-record its epoch (no record, or an older one: a lost or
	// rolled-back record may have forgotten a newer epoch of its line,
	// lineUnknown). Empty without a store configured, and while the store
	// answers.
	ListingUnanswered string
	// Unreachable counts the provider's other instances whose status did
	// not answer: a hidden member may hold newer data or a working quorum
	// (a partition), so no recovery starts while any is unreachable.
	Unreachable int
	// KnownHealthy names the members of this member's last known
	// membership (its own data's, whatever the provider lists) that
	// answered a probe of their client URL as healthy voters during a
	// quorum loss: a majority the provider forgot (Nomad garbage-collected
	// its allocations while a partition hid it) still serves writes, so no
	// recovery or takeover starts beside it (invariant 10).
	KnownHealthy []string
	// UnlistedVoters names the members of a known membership (probed as
	// for KnownHealthy) that the provider does not list but that answer
	// as voters without a leader: Nomad collected their allocations while
	// they run, and a partition may split them from peers that are just
	// as alive; when it heals they serve again. No recovery or takeover
	// starts beside them either (invariant 10). Without a record it also
	// names a peer the provider listed with data within the recovery
	// grace and no longer lists that does not answer either: it may run
	// behind a partition (task's rememberListedHolders).
	UnlistedVoters []string
	// HoldersUnsaved, when set, says why this member's last write of the
	// data holders it remembers (task's holders file) failed, naming the
	// file and the error; HoldersUnsavedFor is how long its writes have
	// failed. A restart would forget a holder Nomad collected while it
	// runs behind a partition, so without a record no seed or restore
	// starts meanwhile (review rev19b D).
	HoldersUnsaved    string
	HoldersUnsavedFor time.Duration
	// DataInherited is true for a leaving member whose replacement
	// inherits its data (Nomad moves a sticky, migrating disk).
	DataInherited bool
	// RecordMissingFor is how long this member has found no record in
	// the coordinator (0 while there is one): with no record a restore
	// of the newest snapshot waits RecoveryGrace, as a quorum-loss
	// recovery does.
	RecordMissingFor time.Duration
	// SeederGoneFor is how long the seeder named by an unconfirmed
	// recovery record has been missing from the provider's instances (0
	// while it is listed).
	SeederGoneFor time.Duration
	// Paused, when not empty, says an operator paused the cluster (who,
	// since when, why): no membership change, no recovery, no record
	// write, no set-aside while it lasts. Only starting this member's own
	// data (Rejoin) and resuming a recovery an operator recorded proceed.
	Paused string
	// Maintenance inputs. NoSpace is true while etcd's NOSPACE alarm is
	// raised; Quota is quota_backend_bytes; DefragRatio (0: off) and
	// DefragMinSize select fragmented members (Member.DBSize, DBSizeInUse).
	NoSpace       bool
	Quota         int64
	DefragRatio   float64
	DefragMinSize int64
	// ReclaimFailed, when not empty, says why this member's last
	// ReclaimSpace (its maintenance) failed a short while ago: not again yet.
	ReclaimFailed string
	// Corrupt, when not empty, says why this member's data is found
	// corrupt: etcd's CORRUPT alarm names it (running), or its last
	// start failed etcd's initial check of its data against its peers'
	// (stopped).
	Corrupt string
	// CorruptAlarms are the member ids etcd's raised CORRUPT alarms name
	// (running members; the alarm list is replicated).
	CorruptAlarms []uint64
}

// Self is this member's configured identity.
type Self struct {
	Name      string
	PeerURL   string
	ClientURL string
}

// Instance is one member slot the provider knows about.
type Instance struct {
	Name    string
	PeerURL string
}

// Member is one entry of etcd's member list, with health as seen by the
// supervisor.
type Member struct {
	ID       uint64
	Name     string // empty for a member added but never started
	PeerURLs []string
	// ClientURLs are the member's client URLs (empty until it started):
	// the leader's summary carries them, for a member without data to
	// probe (task's observeKnownHealthy).
	ClientURLs []string
	Learner    bool
	Healthy    bool
	// AbsentFor is how long no provider instance has matched this member
	// (by name, or by peer URL for an unstarted member); 0 while present.
	AbsentFor time.Duration
	// UnhealthyFor is how long the member has been unreachable; 0 while
	// healthy.
	UnhealthyFor time.Duration
	// DBSize and DBSizeInUse are the member's database file size and the
	// part of it in use (etcd's Status), 0 when unknown.
	DBSize, DBSizeInUse int64
}

// Local describes the data dir.
type Local struct {
	// Empty is true when there is no etcd data.
	Empty bool
	// Unreadable, when not empty, says why the data dir cannot be used.
	Unreadable string
	// NewerEtcd, when not empty, says the data was written by a newer
	// etcd than this member embeds (its storage version), and how to
	// downgrade it: never started, never set aside.
	NewerEtcd string
	// From the data dir's metadata, written when the member first started.
	// A data dir with etcd data but no metadata has an empty Token.
	Cluster   string // the cluster definition's name
	Name      string
	MemberID  uint64
	ClusterID uint64
	Token     string
	Epoch     uint64
	Revision  int64
	// Learner is true when this member is (or, stopped, was last) a
	// learner of its cluster: a learner's data never seeds a recovery.
	Learner bool
	// ForceNewPending is true when the metadata asks the next start for
	// ForceNewCluster and no start completed it (the cluster id was never
	// written), whatever Unstarted says: the fence of pendingForceNew
	// (invariant 10). A recovery
	// from this data recorded the next epoch and rewrote the metadata
	// (Token and Epoch are the new epoch's), then the member stopped
	// before its start. The data is still the source incarnation's, at
	// Revision: a prefix of that line (planner: pendingForceNew).
	ForceNewPending bool
	// Unstarted is true when no etcd start ever ran on this data as the
	// incarnation its metadata names (the start marks it durably before
	// etcd starts): an installed restore, or a ForceNewPending rewrite.
	// Set aside, it loses nothing that ever ran (invariant 10:
	// the restored copy is the snapshot's, which stays in the store). It
	// decides only what 'recover -keep-running' sets aside without
	// -accept-data-loss, never whether a start is fenced.
	Unstarted bool
	// MetaEpoch, with Empty, is the epoch the data dir's metadata names
	// although no etcd data goes with it (0 if none): a join or a start
	// wrote it from a record and created no data (a crash, a failed
	// start). A record of that epoch existed, whatever Consul holds now
	// (it lost its state, or restored an older one), and its incarnation
	// may still run where Nomad collected it: a recovery or a restore
	// records its epoch above it (invariant 9; sim seed 1009859: a
	// restore without a record labeled epoch 2 beside a collected voter
	// of epoch 2 this member had joined). Cluster, with Empty, is the
	// cluster name that metadata carries: metadata of another cluster
	// counts for nothing (ownMetaEpoch).
	MetaEpoch uint64
}

// Record is the cluster record kept by the coordinator: the committed truth
// of which cluster incarnation (token, epoch) is current. It is the one
// record type: coord.Record is this type, and its JSON is what the
// coordinator stores: members of older releases read and write it, so a
// field's name and its place in the JSON stay as they are (coord's
// TestRecordJSONIsTheStoredOneByteForByte).
type Record struct {
	// ClusterID is etcd's cluster id, 0 until the seeder confirms the
	// started cluster.
	ClusterID uint64 `json:"cluster_id"`
	// Token is the initial-cluster-token of this incarnation.
	Token string `json:"token"`
	// Epoch increases with every seed that replaces a cluster (recovery).
	Epoch uint64 `json:"epoch"`
	// Seeder names the member that seeded this incarnation.
	Seeder string `json:"seeder"`
	// Source says how the seeder starts this incarnation: "" (a new
	// cluster), FromData, or SnapshotSource(name), so that an interrupted
	// seeder resumes the right way.
	Source Source `json:"source,omitempty"`
	// LastConfirmedToken and LastConfirmedEpoch name the last incarnation
	// that was confirmed running, carried by a recovery record until the
	// recovery is confirmed: a takeover recovers from that incarnation's
	// data, however many takeovers came before it. Zero in records written
	// before they existed (a takeover then falls back to epoch-1).
	LastConfirmedToken string `json:"last_confirmed_token,omitempty"`
	LastConfirmedEpoch uint64 `json:"last_confirmed_epoch,omitempty"`
	// Operator is true for a recovery an operator recorded ('etcd-nomad
	// recover'): its seeder carries it out even while paused.
	Operator bool `json:"operator,omitempty"`
	// Join, while a running etcd cluster outside etcd-nomad is migrated in
	// ('etcd-nomad migrate'), lists its client URLs: members ask them for
	// the member list and join through them until they run as voters.
	// The migration clears it once the outside members are gone; while
	// it lists any, the record is Migrating.
	Join []string `json:"join,omitempty"`
	// SourceRevision, for an operator's recovery from a snapshot, is the
	// revision its command verified the snapshot and its delta chain to
	// reach: the seeder's install refuses to stop below it (all or
	// refuse), whatever happened to the store since. 0: no bound.
	SourceRevision int64 `json:"source_revision,omitempty"`
	// Accepted, for the same, is the highest revision of data its command
	// saw on each line (those it sets aside named, and accepted with
	// -accept-data-loss): data of a line beyond its entry holds writes
	// acknowledged after the recovery was recorded (that line got its
	// quorum back meanwhile), which the restore must not set aside. Lines'
	// revisions are never compared: a member of an older line at revision
	// 1000 accepts nothing of the live line at 300 (AcceptAcrossLines
	// breaks it). A line no entry names accepted nothing.
	Accepted []AcceptedLine `json:"accepted,omitempty"`
	// AcceptedRevision is the one bound over every line that records
	// written before Accepted carry (0: no bound), used only when Accepted
	// is empty. A record with Accepted sets it to its narrowest entry, so
	// that a member of an older release, which reads only this field and
	// drops Accepted when it writes the record back, accepts no more than
	// the snapshot's own revision (docs/operations.md, Day-2 operations: every member upgraded).
	AcceptedRevision int64 `json:"accepted_revision,omitempty"`
	// HighestEpoch, when above Epoch, is the highest epoch a record of
	// this cluster has named: 'recover -keep-running' records the running
	// incarnation (say epoch 2) in place of an unconfirmed record of a
	// higher epoch (3) that never started, but whatever that record left
	// behind (its seeder's set-aside copy, a snapshot) carries epoch 3.
	// Every new epoch is recorded above it (Record.top), so that no two
	// incarnations share an epoch; a record that replaces this one carries
	// it (invariant 9). A member of an older release drops it when it
	// writes the record back (docs/operations.md, Day-2 operations: every member upgraded).
	HighestEpoch uint64 `json:"highest_epoch,omitempty"`
	// ByHand is true for a restore an operator wrote with 'etcd-nomad
	// snapshot restore': a point-in-time restore that replaces the
	// cluster on purpose, whether or not its quorum still runs (the other
	// members set their data aside and join it). Its installed data starts
	// beside a quorum, unlike an automatic or 'recover' restore, whose
	// start is fenced until no quorum answers (the quorum check those made
	// when recording may be stale by the time the start comes).
	ByHand bool `json:"by_hand,omitempty"`
	// Index is the coordinator's modify index of the record read, which
	// UpdateRecord compares (0 in a record not read from a coordinator).
	// The planner never reads it.
	Index uint64 `json:"index"`
}

// Migrating is true while a running etcd cluster outside etcd-nomad is
// migrated in (Join lists its client URLs): its members, which no
// instance lists, are removed once stale like any unlisted member, but
// while healthy they hold no slot of the desired size, so that members
// join beside them.
func (r *Record) Migrating() bool { return len(r.Join) > 0 }

// top is the highest epoch r or a record it replaced named: a new epoch
// is recorded above it.
func (r *Record) top() uint64 { return max(r.Epoch, r.HighestEpoch) }

// maxEpochAhead bounds how far above its Epoch a record's HighestEpoch
// may lie: each record 'recover -keep-running' replaced named one epoch
// more than the record before it, so a field further ahead was not
// written by etcd-nomad (Consul's writers are in docs/security.md's threat model)
// and the epochs left above the top before it wraps (invariant 9: a
// planted highest_epoch of 2^64-1 made the next epoch 0).
const maxEpochAhead = 1 << 20

// implausibleTop says why no new epoch is recorded above r's top: a
// HighestEpoch too far above Epoch, or a top too close to 2^64 for the
// next epoch to be recorded without wrapping; "" when a new epoch may be.
func (r *Record) implausibleTop() string {
	switch {
	case r.HighestEpoch > r.Epoch && r.HighestEpoch-r.Epoch > maxEpochAhead:
		return fmt.Sprintf("the record's highest_epoch %d is more than %d above its epoch %d: not written by etcd-nomad", r.HighestEpoch, maxEpochAhead, r.Epoch)
	case r.top() > math.MaxUint64-maxEpochAhead:
		return fmt.Sprintf("the record's epoch %d leaves no room for a next epoch below 2^64", r.top())
	}
	return ""
}

// plausibleTop is top, or Epoch when HighestEpoch is implausibly far
// above it (an operator's recovery records above what it sees, not above
// a planted field).
func (r *Record) plausibleTop() uint64 {
	if r.HighestEpoch > r.Epoch && r.HighestEpoch-r.Epoch > maxEpochAhead {
		return r.Epoch
	}
	return r.top()
}

// carried is the HighestEpoch a record of epoch e that replaces r
// carries: r's top when above e, else 0.
func (r *Record) carried(e uint64) uint64 {
	if r == nil || r.top() <= e {
		return 0
	}
	return r.top()
}

// AcceptedLine is what an operator's recovery accepted of one line: the
// highest revision of its data the command saw. Token names a member's
// line; a snapshot, which carries no token, is named by its Epoch alone
// (Token empty).
type AcceptedLine struct {
	Token    string `json:"token,omitempty"`
	Epoch    uint64 `json:"epoch"`
	Revision int64  `json:"revision"`
}

// acceptedUpTo returns the highest revision of the line (token, epoch) the
// operator's record r accepted, and false when r bounds nothing (not an
// operator's record, or one written before any bound). A member's data
// (token set) is matched by its token only; a snapshot (token empty) by
// its epoch, against every entry of that epoch.
func (r *Record) acceptedUpTo(token string, epoch uint64, f Faults) (int64, bool) {
	if !r.Operator {
		return 0, false
	}
	if len(r.Accepted) == 0 || !f.resumeGuard(acceptPerLine) {
		ceiling := max(r.AcceptedRevision, r.SourceRevision)
		for _, a := range r.Accepted {
			ceiling = max(ceiling, a.Revision) // the defect: one number over every line
		}
		return ceiling, r.AcceptedRevision != 0 || len(r.Accepted) > 0
	}
	var up int64
	for _, a := range r.Accepted {
		if token != "" && a.Token == token || token == "" && a.Epoch == epoch {
			up = max(up, a.Revision)
		}
	}
	return up, true
}

// Source is a record's recovery source as the coordinator stores it: ""
// (a new cluster), FromData (a member's data) or SnapshotSource(name).
type Source string

// SnapshotSource is the source of an incarnation restored from snapshot
// name.
func SnapshotSource(name string) Source { return Source(FromSnapshot + ":" + name) }

// Snapshot returns the snapshot s restores; ok is false when s names none.
func (s Source) Snapshot() (name string, ok bool) {
	return strings.CutPrefix(string(s), FromSnapshot+":")
}

// lastConfirmed returns the incarnation a recovery recorded over r starts
// from: r itself when confirmed, else the one r carries.
func (r *Record) lastConfirmed() (string, uint64) {
	if r.ClusterID != 0 {
		return r.Token, r.Epoch
	}
	return r.LastConfirmedToken, r.LastConfirmedEpoch
}

// SnapshotInfo describes a stored snapshot.
type SnapshotInfo struct {
	Name     string
	Revision int64
	Epoch    uint64
	// Foreign, for an operator's recovery (OperatorSnapshotRecovery), says
	// the snapshot is of no incarnation of the record's lineage (another
	// incarnation's, put back in the store; snapshot.Lineage.Of, judged
	// against the record read under the lock): its epoch and revision say
	// nothing of how it relates to the members' data.
	Foreign bool
	// ClusterID is the cluster id the snapshot was taken under (0:
	// unknown); an operator's recovery tells a snapshot of a line forked
	// from its source (the same cluster id, a newer epoch) by it.
	ClusterID uint64
}

// RefusedSnapshot describes a stored object members refuse.
type RefusedSnapshot struct {
	Name  string
	Epoch uint64
	// Revision is the highest revision it may hold: its (unauthenticated)
	// metadata's, and for a snapshot the end of every delta of it, those
	// that authenticate included (snapshot.Reach).
	Revision int64
	// Base is the snapshot a delta follows on from ("" for a snapshot):
	// the name an operator recovers from.
	Base string
	// BaseRevision is the revision of the snapshot an operator recovers
	// from (Base, or this snapshot itself), 0 if the listing does not
	// show it: restored without the deltas that follow it, it holds no
	// more than that.
	BaseRevision int64
	Why          string // unauthenticated, forged
	// Corrupt: its metadata cannot be read (snapshot.NameMeta): only
	// what its name encodes is known (a delta's base is not), and no
	// restore of it can be named until its metadata is put back.
	Corrupt bool
}

// PeerStatus is what another member reported about itself.
type PeerStatus struct {
	Name     string
	MemberID uint64
	Token    string // empty when the peer has no data
	Epoch    uint64
	Running  bool
	Learner  bool
	Healthy  bool
	// Revision is the newest revision in the peer's data.
	Revision int64
	// ClusterID is etcd's cluster id of the peer's data (0 unknown): an
	// operator's -keep-running (OperatorKeepRunning) records the cluster
	// a quorum answers for by it.
	ClusterID uint64
	// ForceNewPending is the peer's Local.ForceNewPending: its data
	// (Token and Epoch the recorded recovery's) never started, and is a
	// prefix of the recovery's source line.
	ForceNewPending bool
	// Unstarted is the peer's Local.Unstarted: its stopped data never
	// started as the incarnation it names.
	Unstarted bool
	// MetaEpoch is the peer's Local.MetaEpoch (Token empty): the epoch
	// its metadata names without data, of this cluster. A record of
	// that epoch existed, whatever Consul holds now, and its
	// incarnation may still run where Nomad collected it: a new epoch
	// chosen anywhere is recorded above it, as above this member's own
	// (knownMetaEpoch; review rev18c N3: only the restorer's own counted).
	MetaEpoch uint64
}

// Kind names a decision.
type Kind string

// Decision kinds.
const (
	// Wait: do nothing this loop.
	Wait Kind = "wait"
	// Seed: create the record (create-only) and start a one-member cluster.
	Seed Kind = "seed"
	// Rejoin: start etcd with the data in the data dir.
	Rejoin Kind = "rejoin"
	// JoinAsLearner: add this member as a learner, then start it empty.
	JoinAsLearner Kind = "join-as-learner"
	// ResumeJoin: this member was added but never started; start it empty.
	ResumeJoin Kind = "resume-join"
	// Promote: promote this running learner to a voter.
	Promote Kind = "promote"
	// RemoveMember: remove MemberID from the membership.
	RemoveMember Kind = "remove-member"
	// SetAside: stop etcd if running and rename the data dir (never delete).
	SetAside Kind = "set-aside"
	// RecordCluster: write the cluster record from this member's data.
	RecordCluster Kind = "record-cluster"
	// ReplaceInstance: ask the provider to replace Instance's instance.
	ReplaceInstance Kind = "replace-instance"
	// KeepMembership: a leaving member whose replacement inherits its data
	// stops without removing itself; the replacement runs as this member.
	KeepMembership Kind = "keep-membership"
	// LeaveSuperseded: a leaving member whose incarnation has no quorum
	// and was replaced by a newer epoch stops at once, without removing
	// itself: its removal is moot, and while it runs a partition that
	// heals may give the old incarnation its quorum back beside the new
	// one. Never holds the lock.
	LeaveSuperseded Kind = "leave-superseded"
	// StopSuperseded: a running member whose provider does not answer
	// (PlanUnobserved), without a quorum, whose epoch the record replaced
	// with a newer confirmed one, stops its etcd and keeps its data and
	// membership: the next observation decides what the data becomes.
	// Never holds the lock.
	StopSuperseded Kind = "stop-superseded"
	// UpdatePeerURL: this running member's peer URL in the membership is
	// not the one it listens on (its data came from another allocation,
	// whose ports differ): update it.
	UpdatePeerURL Kind = "update-peer-url"
	// RecoverQuorum: record the next epoch, then restart this member as a
	// one-member cluster from its own data (From "data", ForceNewCluster)
	// or from the snapshot Snapshot (From "snapshot").
	RecoverQuorum Kind = "recover-quorum"
	// ReclaimSpace: under the lock, compact to the current revision (Compact),
	// defragment the members Defrag names one at a time in that order
	// (the leader, last, after handing leadership away), then disarm
	// NOSPACE once every member is below DisarmBelow bytes (Disarm).
	ReclaimSpace Kind = "reclaim-space"
	// DisarmCorrupt: disarm the CORRUPT alarms of the members Alarms
	// names, which have left the membership (their data set aside): while
	// any CORRUPT alarm is raised etcd refuses reads and writes.
	DisarmCorrupt Kind = "disarm-corrupt"
)

// Decision is what the supervisor should do next.
type Decision struct {
	Kind   Kind
	Reason string
	// Name is the member name to run under (start decisions).
	Name string
	// MemberID: the member to remove (RemoveMember), this member's id
	// (ResumeJoin, Promote).
	MemberID uint64
	// Record is the record to create (Seed) or write (RecordCluster).
	Record *Record
	// Aside says why a SetAside sets the data aside: the set-aside
	// folder is named for it.
	Aside AsideReason
	// Instance is the member whose instance ReplaceInstance asks the
	// provider to replace.
	Instance string
	// From is where a RecoverQuorum recovers from: FromData (this
	// member's data) or FromSnapshot (the stored snapshot Snapshot).
	From RecoverFrom
	// Snapshot is the snapshot a RecoverQuorum from FromSnapshot
	// restores; empty for every other decision.
	Snapshot string
	// ReclaimSpace: see the kind.
	Compact     bool
	Defrag      []uint64
	Disarm      bool
	DisarmBelow int64
	// Alarms: the member ids whose CORRUPT alarms to disarm
	// (DisarmCorrupt).
	Alarms []uint64
	// NeedsLock is true when the action requires the coordination lock and
	// this member does not hold it: take it and observe again.
	NeedsLock bool
	// AwaitsOperator is true for a Wait that only an operator ends (two
	// incarnations, newer data than any recovery source, nothing to
	// recover from...): the reason says what to choose. The member exports
	// it (etcd_nomad_awaiting_operator) for an alert to page someone.
	AwaitsOperator bool
}

// AsideReason is why a SetAside sets the data dir aside; the set-aside
// folder is named for it.
type AsideReason string

// Aside reasons.
const (
	// AsideForeign: the data is of another cluster or incarnation.
	AsideForeign AsideReason = "foreign"
	// AsideRemoved: this member was removed from its cluster.
	AsideRemoved AsideReason = "removed"
	// AsideUnreadable: the data dir cannot be read.
	AsideUnreadable AsideReason = "unreadable"
	// AsideCorrupt: the data was found corrupt (a CORRUPT alarm or a
	// hash that a quorum of voters contradicts).
	AsideCorrupt AsideReason = "corrupt"
)

// ChangesMembership reports whether d changes the etcd membership.
func (d Decision) ChangesMembership() bool {
	switch d.Kind {
	case JoinAsLearner, Promote, RemoveMember, ReplaceInstance, UpdatePeerURL:
		return true
	}
	return false
}

// Quorum is the number of votes a membership of n voters needs.
func Quorum(n int) int { return n/2 + 1 }
