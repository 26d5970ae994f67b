// Package task runs one etcd member: each loop it observes (provider,
// peers' status, etcd member list and health, local data dir, coordinator),
// asks the planner, and carries the decision out. It embeds the etcd server
// and serves /health, /status and /metrics on the status port.
//
// It never deletes a data dir in use: data that must not be started is
// renamed aside, and an aside is deleted only while a newer copy of its
// incarnation is kept (backup/prune.go). Decisions that one member must take alone
// run while holding the coordinator's lock, and the record is written
// fenced by it; long work (snapshot uploads, pruning) runs beside the loop,
// never under that lock.
package task
