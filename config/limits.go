package config

import "time"

// The limits validate enforces. Each one is either a hard limit of the
// software the setting is handed to (a value past it is refused: it
// cannot work) or a floor or ceiling below or above which the setting is
// dangerous (a warning says why). limits_test.go checks every one of them
// just outside and exactly at the limit.
const (
	// MinSize and MaxSize bound the number of voting members. Beyond 9,
	// every write waits for more acknowledgements while the failures a
	// cluster survives hardly matter any more; etcd recommends at most 7.
	MinSize = 1
	MaxSize = 9

	// MinPort and MaxPort are the TCP port range.
	MinPort = 1
	MaxPort = 65535

	// MinHeartbeat: etcd counts ticks in whole milliseconds, and a
	// heartbeat below 1ms becomes 0, which etcd refuses to start with.
	MinHeartbeat = time.Millisecond
	// ElectionPerHeartbeat: etcd refuses an election timeout shorter than
	// 5 heartbeats (embed.Config.Validate).
	ElectionPerHeartbeat = 5
	// MaxElectionTimeout: etcd refuses election timeouts above 50000ms
	// (embed's maxElectionMs).
	MaxElectionTimeout = 50 * time.Second

	// MinQuotaBackendBytes: an empty member's database already takes tens
	// of KiB and every revision stays until compaction; under 1 MiB etcd
	// raises its NOSPACE alarm almost at once and the cluster turns
	// read-only until an operator disarms it.
	MinQuotaBackendBytes = 1 << 20
	// SuggestedMaxQuotaBytes is etcd's suggested maximum backend size
	// (storage.MaxQuotaBytes, 8 GiB): etcd warns above it, and a larger
	// database makes snapshots, defragmentation and a new member's
	// catch-up slow enough to hurt.
	SuggestedMaxQuotaBytes = 8 << 30

	// MemberRestart is how long we allow a member to come back after its
	// process dies: Nomad's restart delay (2s in the rendered job), process
	// and embedded etcd start, WAL replay and reconnection to its peers.
	// Measured here: 4.1s from kill -9 to healthy on an idle dev agent
	// (docs/benchmarks.md, c.kill); 10s leaves room for a loaded host.
	MemberRestart = 10 * time.Second
	// ElectionRounds is how many election rounds we allow a cluster to
	// need to elect a leader after a restart. Each round lasts between one
	// and two election timeouts (etcd randomizes it to break ties); split
	// votes can take several.
	ElectionRounds = 3

	// MinSessionTTL and MaxSessionTTL are the session TTLs Consul accepts.
	MinSessionTTL = 10 * time.Second
	MaxSessionTTL = 24 * time.Hour

	// MinSnapshotInterval: each scheduled snapshot streams the whole
	// database through the leader into the store (1 GiB took 5.6s here,
	// docs/benchmarks.md e.save), and a short interval also pushes the
	// older snapshots out of retain_count sooner.
	MinSnapshotInterval = time.Minute

	// MemberStopTimeout is the member's graceful stop: leadership transfer,
	// its own removal when its allocation is going away, etcd's shutdown.
	// The one copy: task.DefaultStopTimeout is this constant, so the
	// kill_timeout warnings compare against what the member really takes.
	MemberStopTimeout = 10 * time.Second
	// KillTimeoutMargin is added to MemberStopTimeout for what follows the
	// stop deadline: the process exiting, and Nomad noticing it.
	KillTimeoutMargin = 5 * time.Second
	// NomadMaxKillTimeout is the Nomad client's default max_kill_timeout:
	// a client silently caps every task's kill_timeout at it.
	NomadMaxKillTimeout = 30 * time.Second

	// NomadLostAfter is the rendered job's disconnect { lost_after }: how
	// long Nomad keeps the allocation of a disconnected client before it
	// marks it lost. Until then Nomad may bring the original allocation
	// back (reconcile = "keep_original"), data and all, so it is also the
	// nomad provider's default stale_after. jobs.Render renders it.
	NomadLostAfter = 2 * time.Minute

	// NomadMinCPU and NomadMinMemoryMB are the smallest task resources
	// Nomad accepts (structs.MinResources).
	NomadMinCPU      = 1
	NomadMinMemoryMB = 10
)

// MinRecoveryGrace is the shortest recovery_grace that cannot mistake a
// restart for a lost quorum. Quorum counts as lost while every instance
// answers and none is a healthy voter, which is also what a cluster looks
// like while its members restart together (a host reboot, a power cut, a
// bad rolling change) and then elect a leader: a member's restart plus
// ElectionRounds rounds of up to two election timeouts each. Recovering
// in that window forces a new cluster from one member while the others
// were about to come back on their own.
func MinRecoveryGrace(electionTimeout time.Duration) time.Duration {
	return MemberRestart + ElectionRounds*2*electionTimeout
}
