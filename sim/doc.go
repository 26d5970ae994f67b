// Package sim is a deterministic whole-system simulation of etcd-nomad: N
// allocations each run the real planner (planner.Faults.Plan and PlanLeave,
// the same code task runs) against modeled parts, with faults at every
// step, and global invariants checked after every step. One seed gives one
// schedule; time is simulated.
//
// What it models:
//   - each allocation's supervisor loop as task runs it: observe (the
//     provider's possibly stale list, peers' /status over the network,
//     the member list only when a quorum answers and its cluster id
//     checks, the record, durations from simulated time), plan, take the
//     lock when asked, carry the decision out as the steps task/act.go
//     takes (a crash or another member may come between two), release;
//     graceful stops retry PlanLeave's removal under the lock until the
//     leave deadline (or once, LeaveOnce), and look without the lock
//     when it is not to be had (the provider's newest list), stopping at
//     once when PlanLeave finds their incarnation replaced without a
//     quorum (LeaveSuperseded; LeaveLooksUnderLockOnly reverts the look,
//     sim seed 1002359); a running member whose observation failed on
//     the provider reads the record all the same and stops its etcd when
//     PlanUnobserved finds its incarnation replaced without a quorum
//     (StopSuperseded, task's fenceUnobserved; sim seed 41704);
//   - etcd: clusters as raft groups (voters, learners, quorum per
//     partition side, leader, committed revision, catch-up), cluster ids
//     kept by ForceNewCluster and new on a restore, one learner at a time,
//     promotion only in sync, strict reconfiguration (removal refused
//     unless a quorum of the remaining voters has been connected for 5 s);
//   - Consul: a session lock with a TTL that expires when its holder is
//     dead or cut off (a member takes back at once a lock its own stale
//     session holds, as coord/consul does), a record written create-only
//     or by CAS and fenced by the lock, state loss, restore of an older
//     state;
//   - Nomad: allocations that run, stop gracefully (listed as Unknown
//     until the member has exited, as provider/nomad does; replaced),
//     crash and restart with or without their disk, become
//     unknown (client disconnected) and come back or are declared lost;
//     stale lists; ProviderDropsUnknown drops unknown allocations;
//   - snapshots labeled by content (the history and revision they hold),
//     every 30 s (the interval, compressed) and before membership
//     changes; and the leader's scheduled check of the store (task's
//     Scheduled, as planner.PlanSideJobs decides it, paced a minute):
//     under a record that confirms its data (snapshotSource refuses a
//     save otherwise), with the store holding no snapshot of that
//     incarnation, it saves one at once, so a seed's or a recovery's
//     first snapshot comes in the loop after its confirmation.
//     SnapshotUnconfirmed reverts the fix that waits for the
//     confirmation: the check under the seed's own unconfirmed record is
//     refused and the next comes a minute later (a real member's first
//     snapshot came 60 s after its seed; sim seed 220 lost its quorum
//     at 14 s with nothing saved); and task's snapshot as a member stops
//     without having left the membership (stopSnapshot, BeforeStop: the
//     last voter always, a voter beside others unless the store's newest
//     of its incarnation is under 10 minutes old; sim seed 517's only
//     voter was stopped 0.1 s after its seed's confirmation);
//   - delta backups, a permanent part of the model: the leader's recorder
//     extends the chain of its incarnation's newest full snapshot every
//     3 s with a segment holding the writes since the chain's end; a
//     segment may be damaged (fails its checksum from then on). A member
//     observes the newest snapshot at its chain's end without the
//     segments it found damaged (task's newestSnapshot). A recovery or a
//     seed from the store does what datadir.InstallNextEpoch does: it
//     fetches and verifies the snapshot and its whole chain before the
//     next epoch is recorded; a read error at any segment, or a crash
//     during the fetch, fails it with nothing recorded; a damaged segment
//     ends the chain, and a verified end below the revision it was chosen
//     for (the planner's, or for a resumed recovery every member's data,
//     or an operator record's SourceRevision) is refused and the segment
//     marked damaged (forgotten on a crash) so that the planner decides
//     again; the installed data holds the verified end. The store's copy
//     of a write is its snapshot with its chain up to the first damaged
//     segment. InstallChainPrefix reverts the fix (the prefix before a
//     cut is installed and reported as a success);
//   - Nomad making allocations terminal while their processes still run
//     and serve (collectRunning, on unless Config.NoCollectRunning:
//     hosts cut off from the Nomad servers, not from their peers:
//     replacements are placed, the provider no longer lists them, their
//     supervisors cannot list instances; their client stops them when it
//     reconnects, their disk going with them) and task's guard against
//     it (invariant 10): during a quorum loss, and without a record, a
//     member probes its data's last known membership, the members of the
//     leader's summary in the coordinator, and the store's writers (the
//     newest snapshot's taker, the recorder of its chain's newest
//     segment) whatever the provider lists (KnownHealthy: a voter with a
//     leader; UnlistedVoters: one the provider does not list, without a
//     leader, or a learner: a partition may split a collected majority,
//     a learner may be its incarnation's only copy); a member that
//     answered is asked again and stays named for the recovery grace
//     after its last answer; the summary is its leader's heartbeat
//     (written every summaryBeat, changed or not, also by a leader whose
//     observation fails, for the record's cluster or its own unconfirmed
//     seed, or, its last record read none, its own data's cluster), and
//     a probe that finds it rewritten names that leader; a
//     restore with no record waits the recovery grace (a recovery's epoch
//     is above the newest snapshot's: RecoverBelowSnapshotEpoch, found
//     by the operator first, and by this fault too). No seed, restore or
//     takeover runs
//     beside any of them. Members share the delta segments they found
//     damaged (/status), so they agree on the chain's end. The fixes
//     came from runs this fault broke (83 of 1488 at 3M steps from seed
//     7 before them, 370 of 1632 before the summary probe): each has a
//     switch, NoSummaryProbe, NoWriterProbe, ForgetKnownHealthy,
//     NoSummaryBeat, NoUnconfirmedSummary, NoDamageShared,
//     ForgetListedVoter (a listed peer that answered as a healthy voter
//     is remembered like a probe's find, sim seed 8920),
//     SeedForgetsItsRecord (a seeder keeps the record it started under,
//     so its summary beats before its next observation, sim seed 13315),
//     ListedVoterBecomesWord (a voter a member found for a cluster it
//     knew stays its own find, not a peer's word, when found again
//     without a record or named by a peer: under an older record Consul
//     restored, narrowPeersWord let every member's word lapse, sim seed
//     1004733), ForgetListedHolder (a listed peer whose /status named
//     data is remembered until the grace has passed since the provider
//     last listed it, probed once it no longer does, and without a
//     record named while silent: a cluster without a quorum never
//     answers as a healthy voter; sim seed 36353 with
//     SnapshotUnconfirmed), NoHoldersShared (a member's /status shares
//     the data holders it remembers, with the age of their last listing:
//     a restarted member or a replacement takes them as a peer's word,
//     which moves only a known holder's time and keeps it named at most
//     twice the grace after the first listing a word claimed;
//     review rev18f F3, seed 36353 driven to step 296, m0-1 crashed
//     with its data dir lost), NoHoldersPersisted (the holders a member
//     remembers are a file beside its data, read back at a restart: a
//     crash of every member that remembered them keeps them; the same
//     seed and step, every member on m0-1's side crashed, data kept;
//     a lost data dir loses the file, and the member knows only what
//     its peers share, as a fresh replacement),
//     NoRecordlessSummary (a leader whose observation fails
//     and whose last record read was none beats the summary for its own
//     data's confirmed cluster: the same seed, either fix enough there)
//     and the
//     planner's RecoverBesideKnownHealthy, RecoverBesideUnlistedVoter,
//     RestoreWithoutGrace, RestoreOverLaterSnapshot (an operator's
//     recorded restore waits while the store holds a snapshot of an older
//     epoch beyond what its command accepted: the command sees only the
//     listed instances, and a collected majority served on after it),
//     RecoverBelowOwnMetaEpoch (a recovery or restore records its epoch
//     above the one the member's metadata without data names,
//     Local.MetaEpoch: a record of it existed before Consul lost it, sim
//     seed 1009859; a failed seed drops that metadata, as task's does),
//     RecoverBelowPeerMetaEpoch and SeedBelowMetaEpoch (the same for the
//     epoch a peer's metadata names, which /status reports:
//     PeerStatus.MetaEpoch, and for a first seed; NoPeerMetaEpoch drops it
//     from the model's /status; review rev18c N3, no seed reaches it yet),
//     NoLineWhenRunningWithoutRecord (a running member without a record
//     or a quorum lists the store, so a leaving one sees a newer epoch of
//     its data's line: review rev18e F3, no seed reaches it yet);
//   - per-member clocks: every allocation's wall clock is off by up to
//     90 s either way, and a snapshot's Created is its taker's clock;
//     every ordering of snapshots (the newest a member observes and
//     recovers from, the one the recorder extends) is snapshot.Later's
//     (epoch, then revision, Created only breaking a tie).
//     NewestByCreated reverts it (the clock decides);
//   - client writes to every cluster with a quorum; an acknowledged write
//     is the committed revision of a quorum;
//   - the operator (operator.go): pause and resume, 'recover -from
//     MEMBER' and 'recover -from snapshot:NAME|latest', each through the
//     pure fence the command applies (planner.OperatorRecovery,
//     OperatorSnapshotRecovery, Restorer) over what the command reads
//     (the record, every listed instance's /status, the store's listing,
//     its own fetch and verification of the snapshot's chain). An
//     impatient operator runs one at random at any step of the fault
//     phase (Config.OperatorRate), with a random member, snapshot and
//     -accept-data-loss; and a run that ends stuck for an operator gets
//     the operator's way out (resume; else recover from the highest
//     revision known, with -accept-data-loss only when every choice is
//     refused for a loss) and a second quiet phase that must end healthy.
//     A loss the operator accepted (the members and snapshots the fence
//     named without -accept-data-loss, beyond the source, and the
//     revisions an unconfirmed restore record it replaces was verified to
//     beyond the new source's end) is excused by
//     the write check, and no other (Result.AcceptedLoss counts such
//     runs). Consul's state loss takes the pause with it, and a restore of
//     an older state brings back the pause it held. A resume the way out
//     begins with (a pause a restore of Consul brought back) is followed
//     by another look at the product;
//   - with Config.RotateCA, the cluster CA and 'tls rotate-ca'
//     (rotation.go): members settle their CA at start (chooseCA), offer it
//     to the coordinator (restoreCA), follow the rotation record
//     (planner.FollowRotation) and load ca.crt when etcd starts; the
//     command moves phases as planner.RotationPhaseDone allows; checked:
//     a rotation never leaves two members of one cluster unable to verify
//     each other. Off by default: Consul losing or restoring its state
//     around a rotation breaks it (TestRotationFindingsAfterConsulStateLoss).
//
// What it does not model: etcd's log below the revision (members in the
// quorum's partition side are caught up at once, others lag), elections
// and terms (the lowest live voter leads), sticky-disk migration (a
// replacement always starts empty), TLS on the client and status ports
// (and, without RotateCA, the CA), ASG replacement
// (ReplaceInstance), snapshot retention (the store keeps every snapshot)
// and damaged full snapshots, overlapping delta segments (one bridging a
// damaged one), a chain broken by compaction, the replay itself (its
// leases expiring while it runs, its read-back), the store's listing
// cache (snapshotListEvery), clocks anywhere but a snapshot's Created (the
// supervisor's durations are simulated time), 'snapshot restore' on a
// stopped member's data dir ('recover -record-live', modelled once, was
// reverted with its command), Consul's lock-delay, message loss beyond
// partitions (a stall delays a member's next steps), a probe's duration
// (one that cannot reach its member fails at once), a save's duration (a
// snapshot is taken in one step) and failure (a store that does not
// answer: the next check is a minute later; SnapshotUnconfirmed stands in
// for a late first snapshot where a test needs one), and the 30 s
// schedule's choice of clusters (it saves every cluster with a quorum,
// recorded or not; task's leader saves only the incarnation the record
// confirms). A decision's first step runs in the same step as its
// observation.
//
// What the guard of invariant 10 cannot see, and the model therefore
// rarely shows: a majority Nomad collected that is cut off from the
// member about to recover and from Consul too (no probe answers, no
// summary beat) for longer than the recovery grace, while it serves; and
// the only copies of an incarnation on collected disks without a quorum
// that nothing (record, summary, snapshot, a live member that found them
// answering: /status shares what each found, or saw them listed with
// their data within the grace) names: an empty member with
// no record seeds or restores beside them (they go when their clients
// reconnect; see checkNewGroup, which counts a named one).
//
// Invariants (check.go): at most one cluster with a quorum; no two seeds
// of one epoch while the first still has a copy; no member serving a
// cluster with data (metadata) of another incarnation; the serving cluster
// holds every acknowledged write that still exists in a copy (data dir,
// set aside or not, or snapshot up to the verified end of its delta
// chain; not the disk of an allocation Nomad made terminal, for this rule,
// nor for the one seed per epoch's unless something a member reads names
// it: it goes when its client reconnects, as a lost host's goes at once);
// no data of a
// member of a cluster with a quorum set aside; no cluster started without a voter; a stopping member
// whose removal was possible for 4 s is out by its deadline; and liveness:
// once faults stop, one recorded, confirmed cluster of the desired size
// within QuietTime, unless only an operator can help (no copy left; an
// unconfirmed record of a newer epoch whose seeder is gone for good beside
// an older epoch running with a quorum; the planner's reason says an
// operator must decide; an operator's pause): then the operator's way out
// and another QuietTime, after which the run must be healthy. A run no
// modeled command frees ends stuck (Result.Stuck, Result.NoWayOut says
// why each command was refused).
// Set-aside data counts as a copy unless another copy held all of it when
// it was set aside (the planner never reads set-aside data).
//
// Three task behaviours were found through the model and then built in
// task (act.go, server.go): /status names the incarnation of metadata
// without etcd data while the start that wrote it is in flight, a seed
// writes that metadata before it creates the record, and a seed re-reads
// the record before it starts etcd.
//
// It never does I/O and never reads the clock: it must stay a pure
// function of its Config.
package sim
