package task

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// defragTimeout bounds one member's defragmentation: etcd rewrites the
// whole database file (about a second per 100 MiB on a slow disk).
const defragTimeout = 5 * time.Minute

// reclaimBackoff is how long a member waits after a failed ReclaimSpace
// before trying again: a database whose live data is above the disarm
// mark would otherwise be defragmented over and over.
const reclaimBackoff = time.Minute

// reclaimSpace carries out planner.ReclaimSpace under the lock: compact
// to the current revision, defragment the members in the planner's order (the
// leader, last, hands leadership to a healthy voter first), then disarm
// NOSPACE once every member is below d.DisarmBelow. The lock is checked
// before each step: a holder that lost it stops.
func (m *Member) reclaimSpace(ctx context.Context, o planner.Observation, d planner.Decision) error {
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
	e := m.proc.Server()
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
