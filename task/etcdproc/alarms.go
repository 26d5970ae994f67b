// Package etcdproc is the member's embedded etcd: the Process that starts,
// watches and stops its server, the server's alarms and role, the
// corruption checks' settings, the data hash of a stopped member, and the
// gRPC interceptors of its client port. It is one part of the member
// supervisor (docs/redesign.md): the loop in package task calls down into
// it; it imports no other package of task. (The loop still builds the
// server's configuration and keeps the start's bookkeeping: step 4's
// remainder.)
package etcdproc

import (
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"
)

// Alarms returns the alarms raised in e's cluster (the alarm list is
// replicated: every member knows it), read from etcd's backend. Not
// Server.Alarms(): etcd swaps its in-memory alarm store without a lock when
// a member applies a snapshot from the leader, so reading it from /health
// or the loop races that swap (seen under -race while a learner caught up);
// the backend is read under its own lock. A read error counts as no alarm:
// the next observation reads again.
func Alarms(e *embed.Etcd) []*etcdserverpb.AlarmMember {
	as, err := AlarmList(e)
	if err != nil {
		return nil
	}
	return as
}

// ErrStopped: etcd's backend is closed, the server stopped.
var ErrStopped = errors.New("etcd has stopped")

// AlarmList reads the alarm list from e's backend. The backend is closed
// when the server stops, by stopEtcd or on its own (removed from the
// cluster, a fatal error), and an old backend is closed after a snapshot
// from the leader replaced it: a read then finds no bolt transaction and
// etcd dereferences nil (a member leaving the cluster crashed so in
// TestASGProviderLifecycle). A stopping server is not read; the read that
// loses the race with the close is recovered here and reported as
// ErrStopped: etcd holds the read lock with a deferred unlock, so the
// backend stays consistent, and nothing else is read from it.
func AlarmList(e *embed.Etcd) (as []*etcdserverpb.AlarmMember, err error) {
	select {
	case <-e.Server.StoppingNotify():
		return nil, ErrStopped
	default:
	}
	defer func() {
		if r := recover(); r != nil {
			as, err = nil, fmt.Errorf("%w: reading the alarms: %v", ErrStopped, r)
		}
	}()
	return schema.NewAlarmBackend(zap.NewNop(), e.Server.Backend()).GetAllAlarms()
}

// NoSpace reports whether etcd's NOSPACE alarm is raised in e's cluster.
func NoSpace(e *embed.Etcd) bool {
	for _, a := range Alarms(e) {
		if a.Alarm == etcdserverpb.AlarmType_NOSPACE {
			return true
		}
	}
	return false
}

// CorruptAlarms returns the member ids etcd's CORRUPT alarms name.
func CorruptAlarms(e *embed.Etcd) []uint64 {
	var ids []uint64
	for _, a := range Alarms(e) {
		if a.Alarm == etcdserverpb.AlarmType_CORRUPT {
			ids = append(ids, a.MemberID)
		}
	}
	return ids
}

// SelfRole reports whether this server is a learner and whether it is a
// member at all. etcd's own IsLearner panics once the member is removed.
func SelfRole(srv *etcdserver.EtcdServer) (learner, member bool) {
	mem := srv.Cluster().Member(srv.MemberID())
	if mem == nil {
		return false, false
	}
	return mem.IsLearner, true
}
