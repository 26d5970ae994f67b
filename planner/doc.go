// Package planner is the pure decision core of a member supervisor.
//
// Plan takes one Observation (everything the supervisor saw in one loop:
// provider instances, peers' reported status, the etcd member list, the local
// data dir, the cluster record, whether it holds the lock, elapsed durations)
// and returns one Decision with a human-readable reason. It does no I/O, reads
// no clock, starts no goroutines and never logs: time arrives as durations
// computed by the caller, randomness (a new cluster token) as a value the
// caller generated. This keeps every safety invariant (docs/design.md,
// "Safety invariants and where they are tested") testable with plain values; see
// invariants.go (Check) and check_*.go for the checker.
package planner
