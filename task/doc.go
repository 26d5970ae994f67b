// Package task runs one etcd member: each loop it observes (provider,
// peers' status, etcd member list and health, local data dir, coordinator),
// asks the planner, and carries the decision out. It embeds the etcd server
// and serves /health, /status and /metrics on the status port.
//
// It never deletes a data dir: data that must not be started is renamed
// aside. Decisions that one member must take alone run while holding the
// coordinator's lock, and the record is written fenced by it.
package task
