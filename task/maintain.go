package task

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// defragTimeout bounds one member's defragmentation: etcd rewrites the
// whole database file (about a second per 100 MiB on a slow disk).
const defragTimeout = 5 * time.Minute

// alarms returns the alarms raised in e's cluster (the alarm list is
// replicated: every member knows it), read from etcd's backend. Not
// Server.Alarms(): etcd swaps its in-memory alarm store without a lock when
// a member applies a snapshot from the leader, so reading it from /health
// or the loop races that swap (seen under -race while a learner caught up);
// the backend is read under its own lock. A read error counts as no alarm:
// the next observation reads again.
func alarms(e *embed.Etcd) []*etcdserverpb.AlarmMember {
	as, err := alarmList(e)
	if err != nil {
		return nil
	}
	return as
}

// errStopped: etcd's backend is closed, the server stopped.
var errStopped = errors.New("etcd has stopped")

// alarmList reads the alarm list from e's backend. The backend is closed
// when the server stops, by stopEtcd or on its own (removed from the
// cluster, a fatal error), and an old backend is closed after a snapshot
// from the leader replaced it: a read then finds no bolt transaction and
// etcd dereferences nil (a member leaving the cluster crashed so in
// TestASGProviderLifecycle). A stopping server is not read; the read that
// loses the race with the close is recovered here and reported as
// errStopped: etcd holds the read lock with a deferred unlock, so the
// backend stays consistent, and nothing else is read from it.
func alarmList(e *embed.Etcd) (as []*etcdserverpb.AlarmMember, err error) {
	select {
	case <-e.Server.StoppingNotify():
		return nil, errStopped
	default:
	}
	defer func() {
		if r := recover(); r != nil {
			as, err = nil, fmt.Errorf("%w: reading the alarms: %v", errStopped, r)
		}
	}()
	return schema.NewAlarmBackend(zap.NewNop(), e.Server.Backend()).GetAllAlarms()
}

// noSpace reports whether etcd's NOSPACE alarm is raised in e's cluster.
func noSpace(e *embed.Etcd) bool {
	for _, a := range alarms(e) {
		if a.Alarm == etcdserverpb.AlarmType_NOSPACE {
			return true
		}
	}
	return false
}

// maintainBackoff is how long a member waits after a failed maintenance
// before trying again: a database whose live data is above the disarm
// mark would otherwise be defragmented over and over.
const maintainBackoff = time.Minute

// maintain carries out planner.Maintain under the lock: compact to the
// current revision, defragment the members in the planner's order (the
// leader, last, hands leadership to a healthy voter first), then disarm
// NOSPACE once every member is below d.DisarmBelow. The lock is checked
// before each step: a holder that lost it stops.
func (m *Member) maintain(ctx context.Context, o planner.Observation, d planner.Decision) error {
	if _, err := m.heldLock(); err != nil {
		return err
	}
	cli, err := m.etcdClient([]string{m.clientURL(m.self)})
	if err != nil {
		return err
	}
	lr, err := withTimeout(ctx, rpcTimeout, func(c context.Context) (*clientv3.MemberListResponse, error) { return cli.MemberList(c) })
	if err != nil {
		return fmt.Errorf("member list before maintenance: %w", err)
	}
	urls := map[uint64]string{}
	names := map[uint64]string{}
	for _, mem := range lr.Members {
		names[mem.ID] = mem.Name
		if len(mem.ClientURLs) > 0 {
			urls[mem.ID] = mem.ClientURLs[0]
		}
	}
	start := time.Now()
	if d.Compact {
		gr, err := withTimeout(ctx, rpcTimeout, func(c context.Context) (*clientv3.GetResponse, error) {
			return cli.Get(c, "\x00", clientv3.WithCountOnly())
		})
		if err != nil {
			return fmt.Errorf("current revision before compacting: %w", err)
		}
		rev := gr.Header.Revision
		if _, err := withTimeout(ctx, time.Minute, func(c context.Context) (*clientv3.CompactResponse, error) {
			return cli.Compact(c, rev, clientv3.WithCompactPhysical())
		}); err != nil && !isCompacted(err) {
			return fmt.Errorf("compact to revision %d: %w", rev, err)
		}
		m.log.Warn("maintenance: compacted", "revision", rev)
	}
	for _, id := range d.Defrag {
		if _, err := m.heldLock(); err != nil {
			return fmt.Errorf("maintenance stopped before defragmenting %s: %w", names[id], err)
		}
		if id == o.SelfID && uint64(m.etcdServerLeader()) == o.SelfID {
			m.handOffLeadership(ctx, o)
		}
		url, ok := urls[id]
		if !ok {
			return fmt.Errorf("member %s (%x) has no client URL: not defragmenting it", names[id], id)
		}
		t0 := time.Now()
		if _, err := withTimeout(ctx, defragTimeout, func(c context.Context) (*clientv3.DefragmentResponse, error) { return cli.Defragment(c, url) }); err != nil {
			return fmt.Errorf("defragment %s: %w", names[id], err)
		}
		after, _ := withTimeout(ctx, rpcTimeout, func(c context.Context) (*clientv3.StatusResponse, error) { return cli.Status(c, url) })
		if after != nil {
			m.log.Warn("maintenance: defragmented", "target", names[id], "took", time.Since(t0).Round(time.Millisecond), "db_size", after.DbSize, "in_use", after.DbSizeInUse)
		}
	}
	if !d.Disarm {
		return nil
	}
	for id, url := range urls {
		st, err := withTimeout(ctx, rpcTimeout, func(c context.Context) (*clientv3.StatusResponse, error) { return cli.Status(c, url) })
		if err != nil {
			return fmt.Errorf("status of %s before disarming NOSPACE: %w", names[id], err)
		}
		if st.DbSize >= d.DisarmBelow {
			return fmt.Errorf("NOSPACE kept: member %s's database is %d bytes after compaction and defragmentation, above %d (%.0f%% of quota_backend_bytes): the data itself needs more room; raise quota_backend_bytes or delete keys", names[id], st.DbSize, d.DisarmBelow, planner.DisarmShare*100)
		}
	}
	if _, err := m.heldLock(); err != nil {
		return fmt.Errorf("NOSPACE not disarmed: %w", err)
	}
	alarms, err := withTimeout(ctx, rpcTimeout, func(c context.Context) (*clientv3.AlarmResponse, error) { return cli.AlarmList(c) })
	if err != nil {
		return fmt.Errorf("alarm list: %w", err)
	}
	for _, a := range alarms.Alarms {
		if a.Alarm != etcdserverpb.AlarmType_NOSPACE {
			continue // another alarm (CORRUPT) is not ours to clear
		}
		if _, err := withTimeout(ctx, rpcTimeout, func(c context.Context) (*clientv3.AlarmResponse, error) {
			return cli.AlarmDisarm(c, (*clientv3.AlarmMember)(a))
		}); err != nil {
			return fmt.Errorf("disarm NOSPACE of member %x: %w", a.MemberID, err)
		}
	}
	m.log.Warn("maintenance: NOSPACE disarmed: the cluster takes writes again", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// etcdServerLeader is the running server's view of the leader, 0 if none.
func (m *Member) etcdServerLeader() uint64 {
	m.mu.Lock()
	e := m.etcd
	m.mu.Unlock()
	if e == nil {
		return 0
	}
	return uint64(e.Server.Leader())
}

func isCompacted(err error) bool { return errors.Is(err, rpctypes.ErrCompacted) }

func withTimeout[T any](ctx context.Context, d time.Duration, f func(context.Context) (T, error)) (T, error) {
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return f(c)
}
