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
//     leave deadline (or once, LeaveOnce);
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
//     every 30 s and before membership changes;
//   - client writes to every cluster with a quorum; an acknowledged write
//     is the committed revision of a quorum.
//
// What it does not model: etcd's log below the revision (members in the
// quorum's partition side are caught up at once, others lag), elections
// and terms (the lowest live voter leads), two allocations of one slot at
// once (Nomad replacing a disconnected allocation while it still runs),
// sticky-disk migration (a replacement always starts empty), the CA and
// TLS, ASG replacement (ReplaceInstance), snapshot retention and damaged
// snapshots, Consul's lock-delay, message loss beyond partitions (a stall
// delays a member's next steps). A decision's first step runs in the
// same step as its observation.
//
// Invariants (check.go): at most one cluster with a quorum; no two seeds
// of one epoch while the first still has a copy; no member serving a
// cluster with data (metadata) of another incarnation; the serving cluster
// holds every acknowledged write that still exists in a copy (data dir,
// set aside or not, or snapshot); no data of a member of a cluster with a
// quorum set aside; no cluster started without a voter; a stopping member
// whose removal was possible for 4 s is out by its deadline; and liveness:
// once faults stop, one recorded, confirmed cluster of the desired size
// within QuietTime, unless only an operator can help (Result.Stuck: no
// copy left; an unconfirmed record of a newer epoch whose seeder is gone
// for good beside an older epoch running with a quorum; or the planner's
// reason says an operator must decide).
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
