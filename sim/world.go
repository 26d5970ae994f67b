package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Timing of the modeled system, in simulated time. They follow task's
// defaults where task has one.
const (
	loopInterval    = time.Second      // task.DefaultLoopInterval
	recoveryGrace   = 20 * time.Second // cluster.recovery_grace
	staleAfter      = 30 * time.Second // provider.stale_after
	lockTTL         = 10 * time.Second // the Consul session's TTL
	leaveTimeout    = 15 * time.Second // task.DefaultLeaveTimeout
	leaveRetryEvery = 500 * time.Millisecond
	strictWindow    = 5 * time.Second // etcd's HealthInterval (strict reconfiguration)
	snapshotEvery   = 30 * time.Second
	// snapshotCheckEvery paces the leader's scheduled check of the store
	// (task/backup's snapshotCheckEvery: min(1 minute, Interval/4), a
	// minute at the default interval).
	snapshotCheckEvery = time.Minute
	staleListMax       = 2 * time.Second // how old the provider's list may be
	clusterName        = "c"
	revisionBump       = 1_000_000       // task's RevisionBump on a snapshot restore
	deltaEvery         = 3 * time.Second // the leader's recorder writes a delta segment
	// readErrorPct is the chance (percent) that fetching a snapshot with a
	// non-empty delta chain hits a read error at one of its segments;
	// damagePerStep the chance per fault step that a stored segment is
	// damaged (fails its checksum from then on).
	readErrorPct  = 20
	damagePerStep = 0.002
	// gcPerStep is the chance per fault step that Nomad makes the
	// allocation of a disconnected client terminal (declared lost and
	// garbage-collected) while its process still runs.
	gcPerStep = 0.001
	maxSkew   = 90 * time.Second // how far an allocation's clock may be off
	// summaryBeat is task's summaryBeat: a leader writes its summary
	// again this often unchanged.
	summaryBeat = 5 * time.Second
)

// Defects turns the fixes of the safety review off, one switch each: the
// planner's own (Planner) and the two that live outside it.
type Defects struct {
	Planner planner.Faults
	// ProviderDropsUnknown (invariant 10): the Nomad provider drops
	// allocations whose client is disconnected (unknown) from the
	// instance list, so they never count as unreachable.
	ProviderDropsUnknown bool
	// NoLineWhenRunningWithoutRecord (invariant 10): a running member
	// without a record whose cluster has no quorum lists no store
	// (LineEpoch stays 0), as task did before review rev18e F3: a leaving
	// one never saw that a recovery from its data's line replaced its
	// incarnation, and ran on through its leave.
	NoLineWhenRunningWithoutRecord bool
	// LeaveSnapshotWithoutQuorum (invariant 6, acknowledged writes): a
	// voter leaving for good without a quorum saves a full snapshot of
	// its own data before its allocation (and its disk) goes: the fix
	// review rev18e F4 suggested, which task does not make. It cannot
	// tell a lost quorum from a partition with a majority that writes on:
	// its snapshot, newer than the lineage's last full one, outranks it
	// (snapshot.Later: epoch, then the full snapshot's revision), and
	// with it the delta chain that reaches further, so a recovery
	// restores less than the store holds (sim seed 870: revision 13
	// over a chain to 19).
	LeaveSnapshotWithoutQuorum bool
	// NoPeerMetaEpoch (invariant 9): a member's /status does not report
	// the epoch its metadata names without data (PeerStatus.MetaEpoch),
	// as task's did before review rev18c N3: only the member choosing a
	// new epoch counted its own.
	NoPeerMetaEpoch bool
	// LeaveOnce (invariant 12): a member whose allocation is stopped
	// gracefully tries to remove itself once, then stops.
	LeaveOnce bool
	// LeaveLooksUnderLockOnly (invariant 10): a leaving member observes
	// only when it holds the lock, as task's leave did before sim seed
	// 1002359: while the recovering member and the members joining its
	// epoch held the lock, it never saw the newer record and kept its old
	// incarnation running until a healed partition gave it a quorum.
	LeaveLooksUnderLockOnly bool
	// SeedRecordBeforeMetadata: a seed creates the record before it
	// writes the metadata that its /status names, so a peer may see
	// the record gone (Consul lost its state) and no seed here.
	SeedRecordBeforeMetadata bool
	// ForceNewDropKeepsEpoch (invariant 9): a start that
	// refuses a pending ForceNew flag (no record names the recovery any
	// more) drops the flag only: the metadata keeps naming the recovery's
	// epoch, never run, while the data rejoins its old cluster, as task's
	// start did before datadir.Meta.DropForceNew named the source again.
	ForceNewDropKeepsEpoch bool
	// InstallChainPrefix (the replay defect of the second safety round):
	// an install of a snapshot with its delta chain that a read error or
	// a damaged segment cuts installs the snapshot and the segments before
	// the cut and reports success, with no check against the revision the
	// planner chose it for, as task's recovery did before
	// datadir.InstallNextEpoch fetched and verified the whole chain first.
	InstallChainPrefix bool
	// NewestByCreated: the newest snapshot is the one its taker's clock
	// says was created last, as before snapshot.Later ordered snapshots
	// by (epoch, revision) with the creation time only breaking a tie.
	NewestByCreated bool
	// NoSummaryProbe: a member probes only its own data's last known
	// membership, not the members of the leader's summary, and a leader
	// whose observation fails writes no summary (before sim seed 5 with
	// CollectRunning: an empty replacement recovered beside a collected
	// majority that still served).
	NoSummaryProbe bool
	// NoSourceLineProbe: data of a recovery whose ForceNewCluster start
	// is pending (cluster id 0) probes no one of its source line, whose
	// membership it still holds (review rev18b F1).
	NoSourceLineProbe bool
	// NoLineWithoutRecord: stopped data without a record lists no store
	// and probes no one (LineEpoch and KnownHealthy stay empty), as task
	// did before review rev18c N2.
	NoLineWithoutRecord bool
	// NoLineWhenRerecording: a running member that re-records its epoch
	// (no record, or an older one) lists no store (LineEpoch stays
	// empty), as task did before review rev18f F5.
	NoLineWhenRerecording bool
	// OperatorSeesAll: the operator's commands see the store's newest
	// snapshot of any lineage as Latest, not the record's lineage's
	// newest (what 'etcd-nomad recover' computes: storeView), as the
	// model did before review rev18c N4.
	OperatorSeesAll bool
	// NoWriterProbe: a member probes the newest snapshot's taker only
	// without a record, and not the member whose recorder wrote its
	// chain's last delta segment (before sim seeds 71 and 172 with
	// CollectRunning: a seeder or a recovering member that Nomad
	// collected right after it started serves alone, and a takeover
	// under its record, or an older one Consul restored, started a
	// second cluster beside it).
	NoWriterProbe bool
	// AnyLineage: the newest snapshot is given to the planner as the
	// lineage's whatever its epoch and cluster id (before review rev16a
	// A1 showed the member's listing refuses it).
	AnyLineage bool
	// ForgetKnownHealthy: KnownHealthy names only the members that
	// answer the probe now, not those that answered within the recovery
	// grace (before sim seeds 17 and 143 with CollectRunning: a partition
	// hid a collected majority for a few seconds, and a takeover started
	// a second cluster beside it).
	ForgetKnownHealthy bool
	// NoDamageShared: a member leaves out of the chain only the delta
	// segments its own installs found damaged, not those its peers'
	// /status names (before sim seed 682 with CollectRunning: the member
	// that found the damage waited for a survivor to recover from its
	// data, the survivor for it to restore the whole chain, for good).
	NoDamageShared bool
	// NoSummaryBeat: a leader writes its summary only when it changed,
	// and a member probing before a recovery takes no word from a
	// rewrite (before sim seeds 423, 458, 591 and others with
	// CollectRunning: a partition longer than the recovery grace hid a
	// collected majority whose leader still reached Consul, and a
	// recovery started a second cluster beside it).
	NoSummaryBeat bool
	// NoUnconfirmedSummary: a leader whose observation fails writes the
	// summary only for the record's confirmed cluster, not for its own
	// started, unconfirmed seed or recovery (before sim seed 466 with
	// CollectRunning: Nomad collected the seeder right after its start,
	// and a takeover started a second cluster beside it).
	NoUnconfirmedSummary bool
	// NoFoundVotersShared: a member's /status does not name the voters
	// its probes found, so a member probes and names only those it found
	// itself (before sim seed 180 with CollectRunning: a fresh replacement
	// with no record, summary or snapshot to name a collected voter seeded
	// a second epoch 1 while its peers waited for that voter).
	NoFoundVotersShared bool
	// ForgetListedVoter: a member does not remember a listed peer whose
	// /status answered as a healthy voter (rememberListedVoter), so once
	// the provider stops listing it nothing names it (before sim seed
	// 8920 and 33 others of 100 M steps with CollectRunning: Consul lost
	// its state, Nomad collected the one-member cluster's seeder while it
	// served, and its peers, which had just waited for its data, seeded a
	// second epoch 1 beside it).
	ForgetListedVoter bool
	// ListedVoterBecomesWord: a listed healthy voter this member found
	// for a cluster it knew (the record's) becomes a peer's word when it
	// is found again while the member knows no record (Consul lost its
	// state): once Consul restores an older record, narrowPeersWord lets
	// it lapse (before sim seed 1004733).
	ListedVoterBecomesWord bool
	// ForgetListedHolder: a member does not remember the listed peers
	// whose /status named data of a cluster (rememberListedHolder): once
	// the provider stops listing such a peer, it is probed only if
	// something else names it (before sim seed 36353 with
	// SnapshotUnconfirmed: Consul lost its state, Nomad collected both
	// voters of a cluster without a quorum while they ran, and an empty
	// replacement that had waited for one of them seeded a second epoch 1
	// beside them; the partition healed and they served again).
	ForgetListedHolder bool
	// NoHoldersShared: a member's /status does not name the data holders
	// it remembers (rememberListedHolder), so a member that restarts, or
	// a fresh replacement, knows only those its own provider listed
	// (before review rev18f F3, sim seed 36353 driven to step 296: m0-1
	// crashed behind a partition, restarted knowing nothing of the epoch
	// 1 holders Nomad had collected while they ran, and seeded a second
	// epoch 1).
	NoHoldersShared bool
	// NoHoldersPersisted: the data holders a member remembers live only
	// in its process (task's holders file beside the data is not
	// written), so a crash of every member that remembered them loses
	// them (before review rev18f F3: sim seed 36353 driven to step 296,
	// m0-0 and m1-0 behind a partition and every member on the other
	// side crashed at once, data kept: none knew of the epoch 1 holders
	// Nomad had collected while they ran, and one seeded a second epoch
	// 1).
	NoHoldersPersisted bool
	// NoRecordlessSummary: a leader whose observation fails writes no
	// summary when the last record it read was none (Consul lost its
	// state), although it leads its own data's confirmed cluster
	// (before sim seed 1004733, with ListedVoterBecomesWord).
	NoRecordlessSummary bool
	// SeedForgetsItsRecord: a seeder does not keep the record its seed
	// re-read before the start, so until its next observation succeeds
	// it knows no record and writes no summary (before sim seed 13315
	// with CollectRunning: Nomad collected the seeder right after its
	// start, a partition hid it from its peers for longer than the
	// recovery grace, and a takeover seeded epoch 2 beside it).
	SeedForgetsItsRecord bool
	// OperatorShortChainRefused: 'recover -from snapshot:NAME
	// -accept-data-loss' refuses a snapshot whose delta chain verifies
	// short of its listed end (a damaged segment), as before the command
	// restored it up to its verified end when the operator accepts the
	// loss: every snapshot whose chain holds a damaged segment was out of
	// the operator's reach.
	OperatorShortChainRefused bool
	// RotationSkipsMembers: 'tls rotate-ca' moves to the next phase
	// without waiting for the members to report the current one (a
	// broken command, for the proof that Config.RotateCA's check
	// catches one).
	RotationSkipsMembers bool
}

// Config describes one run.
type Config struct {
	Seed uint64
	// Size is the desired number of voters (3 when 0).
	Size int
	// FaultSteps is the number of steps with faults (2000 when 0).
	FaultSteps int
	// QuietTime bounds the quiet phase: once faults stop, the cluster must
	// be healthy within this much simulated time (300 s when 0).
	QuietTime time.Duration
	// FaultRate is the chance that a step injects a fault (0.04 when 0).
	FaultRate float64
	// Defects switches fixes off.
	Defects Defects
	// TraceLen is how many events the trace keeps (200 when 0).
	TraceLen int
	// NoCollectRunning turns off the fault collectRunning, on by default:
	// Nomad makes the allocations of hosts cut off from its servers (not
	// from their peers) terminal and places replacements while their
	// processes still serve (invariant 10). doc.go names the fixes of
	// the runs it broke. The defects found before it was on are searched
	// without it (their catching seeds' schedules).
	NoCollectRunning bool
	// OperatorRate is the chance that an impatient operator runs a
	// command (operator.go) at a step of the fault phase (0.001 when 0;
	// negative: never, the operator only takes the way out of a stuck
	// run).
	OperatorRate float64
	// NoOperator: no operator ever runs a command, neither an impatient
	// one nor the way out of a stuck run (the model before operators).
	NoOperator bool
	// RotateCA adds the cluster CA, the members' trust and the
	// operator's 'tls rotate-ca' (rotation.go). Off by default: the
	// product breaks its check (a rotation never cuts members off) in
	// about one run in ten with the impatient operator, every time after
	// Consul lost or restored its state around a rotation (see
	// rotation.go).
	RotateCA bool
}

func (c *Config) defaults() {
	if c.Size == 0 {
		c.Size = 3
	}
	if c.FaultSteps == 0 {
		c.FaultSteps = 2000
	}
	if c.QuietTime == 0 {
		c.QuietTime = 300 * time.Second
	}
	if c.FaultRate == 0 {
		c.FaultRate = 0.04
	}
	if c.TraceLen == 0 {
		c.TraceLen = 200
	}
	if c.OperatorRate == 0 {
		c.OperatorRate = 0.001
	}
}

// World is the whole modeled system: allocations with their supervisor
// and data, etcd clusters, the coordinator, the provider, the snapshot
// store, simulated time and the trace.
type World struct {
	cfg Config
	rng *rand.Rand
	// crng draws the delta chain's faults (read errors, damage): a stream
	// of its own, so that the schedule of every other fault of a seed is
	// what it was before the chain was modeled.
	crng *rand.Rand
	// srng draws each allocation's clock skew, a stream of its own too.
	srng *rand.Rand
	now  time.Duration
	step int
	// op is the operator (operator.go), drawing from a stream of its own.
	op operator
	// caParent maps a CA made by a rotation to the CA that certified it
	// (rotation.go).
	caParent map[int]int

	nodes  []*node // every allocation ever placed
	slots  []*node // the current allocation of each slot
	byName map[string]*node
	groups []*group
	coord  coordinator
	lists  []listVersion // the provider's instance lists over time
	store  []snapshot
	events []event
	leaves []*leave

	nextID    uint64
	quiet     bool
	quietAt   time.Duration
	trace     ring
	failure   *Violation
	failState string
	branches  int
	snapAt    time.Duration
	deltaAt   time.Duration
	faults    int
}

// node is one allocation: the supervisor process, its data dir and its
// view of the world (the task.Member's in-memory state).
type node struct {
	// fenceStreak: task's, the loops in a row whose fenceUnobserved
	// found it without a quorum under a newer recorded epoch.
	fenceStreak int
	slot, gen   int
	name        string
	peerURL     string
	alloc       allocStatus
	up          bool
	side        int  // network partition side
	noConsul    bool // cut off from Consul
	noNomad     bool // its Nomad client is disconnected (allocation unknown)
	collected   bool // Nomad garbage-collected its allocation while it ran: cut off until its own reconnect
	hostDown    bool // its host is down (nothing restarts it until it is back)
	// stalledUntil: the process is stalled (slow, its messages delayed)
	// until then; it cannot act, so a leave cannot progress meanwhile.
	stalledUntil time.Duration
	// skew is how far this allocation's wall clock runs ahead (behind
	// when negative) of simulated time: the Created of the snapshots it
	// takes.
	skew       time.Duration
	lastFail   string
	lastReason string

	data  *data
	aside []*data
	etcd  *etcdProc

	lockSession uint64 // the session this process believes holds the lock
	pending     []action
	pendingWhat string
	nextAt      time.Duration

	// The supervisor's memory (lost on a crash).
	quorumLostSince    time.Duration
	seederGoneSince    time.Duration
	recordMissingSince time.Duration
	absentAt           map[uint64]time.Duration
	unhealthyAt        map[uint64]time.Duration
	startFailures      int
	record             *planner.Record // the record read by the last observation
	recIndex           uint64
	answered           *group // the cluster whose member list the last observation read
	lastSnapshot       time.Duration
	// snapshotCheckAt is when the leader's next scheduled check of the
	// store is due (task/backup's nextSnapshotCheck).
	snapshotCheckAt time.Duration
	leave           *leave
	// damaged names the delta segments an install here found damaged,
	// or a peer's /status named (task's Member.damagedDeltas): left out
	// of the chain it observes; found those this member's own installs
	// found (its /status names them: task's DamagedDeltas).
	damaged, found map[string]bool
	// fetchedEnd is the verified end of the snapshot and chain the
	// current recovery fetched.
	fetchedEnd int64
	// healthySeen is when each member named in KnownHealthy last
	// answered (task's Member.knownHealthySeen).
	healthySeen map[string]seenMember
	// holders are the listed peers whose /status named data of a
	// cluster, with when the provider last listed them (task's
	// knownState.holders).
	holders map[string]heldSeen
	// holdersDisk is holders' file in the member's directory (task's
	// datadir HoldersFile): written at the end of each observation, read
	// back by a restart (kill), lost with the directory (a crash that
	// loses the data dir), kept when data is set aside (it lives beside
	// current/, not in it).
	holdersDisk map[string]heldSeen
	// summaryAt is when this member last wrote the summary (task's
	// Member.summaryAt); summaryRead and summarySeen the summary its
	// last probe read (task's Member.summaryRead).
	summaryAt   time.Duration
	summaryRead bool
	summarySeen *clusterSummary
	// tls is the process's CA state, tlsDisk its member directory's
	// (rotation.go); caChecked when it last checked the cluster CA.
	tls       *tlsProc
	tlsDisk   *tlsDisk
	caChecked time.Duration
}

type allocStatus int

const (
	allocRunning  allocStatus = iota
	allocUnknown              // the client is disconnected: Nomad cannot tell
	allocStopping             // stopped gracefully: listed (Unknown) until the process has left
	allocTerminal             // stopped for good
)

// gone reports whether Nomad made n's allocation terminal while its
// process still runs (its client disconnected: the server declared it
// lost, garbage-collected it): the provider no longer lists it, it still
// serves, and its client stops it when it reconnects.
func (n *node) gone() bool { return n.alloc == allocTerminal && n.up }

// data is a data dir's content: etcd-nomad's metadata and etcd's data,
// modeled by the incarnation it belongs to and the writes it holds.
type data struct {
	cluster, name, token string
	epoch                uint64
	memberID, clusterID  uint64
	wal                  bool // etcd data exists (false: metadata only)
	forceNew             bool
	// srcToken, srcEpoch: the incarnation the data held before a recovery
	// from it rewrote its metadata (datadir.Meta.ForceNewFrom).
	srcToken string
	srcEpoch uint64
	restored bool // installed from a snapshot, not started yet
	learner  bool // the member was a learner when last written
	// superseded: set aside while another copy (a data dir or a
	// snapshot) held all of its writes; the planner never reads set-aside
	// data (invariants 5, 7: it is the operator's), so such a copy does
	// not count as one the serving cluster must hold.
	superseded bool
	group      *group
	branch     *branch
	rev        int64
}

// etcdProc is a running embedded etcd server.
type etcdProc struct {
	group    *group
	memberID uint64
}

// group is one etcd cluster incarnation (one raft group). A ForceNewCluster
// start makes a new group that keeps the old cluster id.
type group struct {
	n         int
	clusterID uint64
	token     string
	epoch     uint64
	members   []*gmember
	branch    *branch
	committed int64
	leader    uint64
	quorum    int // the partition side holding its quorum, -1 when none
}

type gmember struct {
	id          uint64
	name        string // empty until the member started
	peerURL     string
	learner     bool
	active      bool // running and connected to the leader
	activeSince time.Duration
}

// branch is a history of writes: a seed starts one; a ForceNewCluster or a
// restore forks one from its source's content at fork.
type branch struct {
	n      int
	parent *branch
	fork   int64
	acked  int64 // the highest revision acknowledged to a client; 0 if none
}

type snapshot struct {
	name   string
	branch *branch
	rev    int64
	epoch  uint64
	// created is the taker's wall clock when it took it.
	created time.Duration
	// clusterID and taker are its metadata's cluster id and Endpoint:
	// the member it was streamed from (the leader then).
	clusterID uint64
	taker     string
	// chain is the delta segments the leader's recorder wrote after it,
	// in order: each holds the writes since the previous end.
	chain []segment
}

// segment is one delta backup segment: it ends at revision end; a damaged
// one fails its checksum. recorder is its metadata's Endpoint: the
// member whose recorder wrote it (the leader then).
type segment struct {
	name     string
	end      int64
	damaged  bool
	recorder string
}

// later is snapshot.Later: a higher epoch, then a higher revision; the
// taker's clock only breaks a tie. byCreated orders by the clock alone
// (NewestByCreated).
func (s *snapshot) later(o *snapshot, byCreated bool) bool {
	if byCreated {
		return s.created > o.created
	}
	if s.epoch != o.epoch {
		return s.epoch > o.epoch
	}
	if s.rev != o.rev {
		return s.rev > o.rev
	}
	return s.created > o.created
}

// newest returns the index of the newest snapshot among those ok
// accepts, -1 if none.
func (w *World) newest(ok func(*snapshot) bool) int {
	best := -1
	for i := range w.store {
		s := &w.store[i]
		if ok(s) && (best < 0 || s.later(&w.store[best], w.cfg.Defects.NewestByCreated)) {
			best = i
		}
	}
	return best
}

// chainEnd is the end of s with its chain as a reader that leaves out the
// segments in skip sees it, before fetching (the listing: a damaged
// segment is not known as such until it is read): what follows a
// left-out segment cannot be replayed (no overlapping segment bridges one
// in the model).
func (s *snapshot) chainEnd(skip map[string]bool) int64 {
	end := s.rev
	for _, g := range s.chain {
		if skip[g.name] {
			break
		}
		end = g.end
	}
	return end
}

// verifiedEnd is the end of s with its chain once every segment is read
// and checked (segments in skip left out): the first damaged one ends it
// and is named.
func (s *snapshot) verifiedEnd(skip map[string]bool) (int64, string) {
	end := s.rev
	for _, g := range s.chain {
		if skip[g.name] {
			break
		}
		if g.damaged {
			return end, g.name
		}
		end = g.end
	}
	return end, ""
}

type listVersion struct {
	at    time.Duration
	nodes []*node
}

type event struct {
	at   time.Duration
	what string
	do   func(w *World) string
}

// leave follows one graceful stop for invariant 12.
type leave struct {
	node       *node
	group      *group
	id         uint64
	final      bool
	start      time.Duration
	deadline   time.Duration
	tried      bool
	done       bool
	crashed    bool
	okSince    time.Duration
	ok         bool
	shouldLeft bool
}

// Violation is a broken invariant.
type Violation struct {
	Step      int
	Time      time.Duration
	Invariant string
	Detail    string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("step %d (t=%s): %s: %s", v.Step, fmtDur(v.Time), v.Invariant, v.Detail)
}

// New builds the world of cfg: Size allocations placed, empty, no record.
func New(cfg Config) *World {
	cfg.defaults()
	w := &World{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)), crng: rand.New(rand.NewPCG(cfg.Seed, 0xde17a)), srng: rand.New(rand.NewPCG(cfg.Seed, 0xc10c)), byName: map[string]*node{}, nextID: 0x10}
	w.op.rng = rand.New(rand.NewPCG(cfg.Seed, 0x0be))
	w.caParent = map[int]int{}
	w.trace.init(cfg.TraceLen)
	w.coord.holder = nil
	for i := 0; i < cfg.Size; i++ {
		w.slots = append(w.slots, nil)
		w.place(i)
	}
	w.listChanged()
	return w
}

// place puts a new allocation (new name, empty data dir) in slot.
func (w *World) place(slot int) *node {
	gen := 0
	if old := w.slots[slot]; old != nil {
		gen = old.gen + 1
	}
	n := &node{slot: slot, gen: gen, name: fmt.Sprintf("m%d-%d", slot, gen), up: true,
		absentAt: map[uint64]time.Duration{}, unhealthyAt: map[uint64]time.Duration{},
		nextAt: w.now + w.jitter(100*time.Millisecond, time.Second)}
	n.peerURL = "http://" + n.name + ":2380"
	n.skew = time.Duration(w.srng.Int64N(int64(2*maxSkew))) - maxSkew
	n.quorumLostSince, n.seederGoneSince, n.recordMissingSince = -1, -1, -1
	if old := w.slots[slot]; old != nil {
		n.side = old.side
	}
	w.slots[slot] = n
	w.nodes = append(w.nodes, n)
	w.byName[n.name] = n
	return n
}

func (w *World) id() uint64 {
	w.nextID++
	return w.nextID
}

func (w *World) jitter(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)+1))
}

func (w *World) newBranch(parent *branch, fork int64) *branch {
	w.branches++
	return &branch{n: w.branches, parent: parent, fork: fork}
}

// level is the highest revision of b whose writes content (on br at rev)
// holds; -1 when it holds none of b.
func level(br *branch, rev int64, b *branch) int64 {
	for br != nil {
		if br == b {
			return rev
		}
		rev = min(rev, br.fork)
		br = br.parent
	}
	return -1
}

func (w *World) schedule(after time.Duration, what string, do func(w *World) string) {
	w.events = append(w.events, event{at: w.now + after, what: what, do: do})
}

// reachable reports whether a and b can talk (both up, same side).
func reachable(a, b *node) bool { return a.up && b.up && a.side == b.side }

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
