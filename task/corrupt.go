package task

import (
	"context"
	"fmt"
	"path/filepath"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/task/etcdproc"
)

// Corruption checks (invariant 7). etcd offers three:
//   - the initial check: a restarting member compares its data's hash with
//     its peers' before it serves, and refuses to start on any mismatch.
//     Not used: it cannot tell whose data is wrong (a corrupt peer fails
//     every good member's start), and a failed check leaves the WAL's
//     file lock held in the process (etcd's Cleanup does not close the
//     WAL), so the next start in the same process dies with "file already
//     locked". checkBeforeStart makes the same comparison before etcd
//     starts, and decides by majority;
//   - the compaction hash check: every interval the leader compares the
//     hashes every member computed at a compaction and, when a majority
//     agrees, raises a CORRUPT alarm naming each member of the minority
//     (the leader too), or names member 0 when no majority agrees. Used;
//   - the periodic check compares each follower with the leader and names
//     the follower on a mismatch, even when the leader's own data is the
//     corrupt copy. Not used: acting on its alarm would set good data
//     aside and copy the leader's corrupt data over it.
//
// While any CORRUPT alarm is raised etcd refuses reads and writes
// cluster-wide; planner.DisarmCorrupt clears the alarm of a member once it
// has left the membership (its data set aside, planner.SetAside).

// observeCorrupt fills o's corruption inputs: the CORRUPT alarms while
// running, and whether this member's data is found corrupt: an alarm
// names it, or checkBeforeStart held its last start back.
func (m *Member) observeCorrupt(e *embed.Etcd, o *planner.Observation) {
	if e == nil {
		o.Corrupt = m.startCorrupt
		return
	}
	o.CorruptAlarms = etcdproc.CorruptAlarms(e)
	for _, id := range o.CorruptAlarms {
		if id == o.SelfID {
			o.Corrupt = "etcd's CORRUPT alarm names this member: its hash at a compaction differs from the majority's"
		}
	}
}

// checkBeforeStart compares this stopped member's data with its peers'
// before it starts again where a quorum runs without it: its hash at its
// own revision (computed from the database file, as etcdutl hashkv does)
// against every other voter's at that revision. When at least a quorum of
// the voters, besides this member, answer with one hash at the same
// compaction revision and this data's differs, the data is found corrupt
// (the returned reason; "" otherwise). A mismatch without such a majority
// does not hold the start back: the leader's compaction hash check
// decides by majority once the member runs.
func (m *Member) checkBeforeStart(ctx context.Context) (string, error) {
	local, err := etcdproc.DataHash(filepath.Join(m.dir.EtcdDir(), "member", "snap", "db"))
	if err != nil {
		return "", fmt.Errorf("hash of this member's data: %w", err)
	}
	cli, err := m.etcdClient(m.clientEndpoints())
	if err != nil {
		return "", err
	}
	lr, err := withTimeout(ctx, rpcTimeout, func(c context.Context) (*clientv3.MemberListResponse, error) { return cli.MemberList(c) })
	if err != nil {
		return "", fmt.Errorf("member list: %w", err)
	}
	voters, same, differ := 0, 0, 0
	var peerHash *uint32
	for _, mem := range lr.Members {
		if mem.IsLearner {
			continue
		}
		voters++
		if mem.Name == m.opts.Name || len(mem.ClientURLs) == 0 {
			continue
		}
		h, err := withTimeout(ctx, rpcTimeout, func(c context.Context) (*clientv3.HashKVResponse, error) {
			return cli.HashKV(c, mem.ClientURLs[0], local.Revision)
		})
		if err != nil || h.CompactRevision != local.CompactRevision {
			continue // not comparable: down, behind, compacted further
		}
		switch {
		case peerHash == nil:
			peerHash = &h.Hash
		case *peerHash != h.Hash:
			differ++ // the peers disagree among themselves
		}
		same++
	}
	if peerHash == nil || *peerHash == local.Hash {
		return "", nil
	}
	if differ > 0 || same < planner.Quorum(voters) {
		m.log.Warn("this member's data differs from a peer's, but no majority of the voters agrees on another hash: starting; the compaction hash check decides by majority",
			"revision", local.Revision, "comparable_peers", same, "voters", voters)
		return "", nil
	}
	return fmt.Sprintf("its hash at revision %d differs from the one %d peers of %d voters agree on", local.Revision, same, voters), nil
}

// disarmCorrupt carries out planner.DisarmCorrupt: the CORRUPT alarms of
// members that left the membership are disarmed.
func (m *Member) disarmCorrupt(ctx context.Context, d planner.Decision) error {
	cli, err := m.etcdClient([]string{m.clientURL(m.self)})
	if err != nil {
		return err
	}
	for _, id := range d.Alarms {
		if _, err := withTimeout(ctx, rpcTimeout, func(c context.Context) (*clientv3.AlarmResponse, error) {
			return cli.AlarmDisarm(c, &clientv3.AlarmMember{MemberID: id, Alarm: etcdserverpb.AlarmType_CORRUPT})
		}); err != nil {
			return fmt.Errorf("disarm the CORRUPT alarm of member %x: %w", id, err)
		}
		m.log.Warn("CORRUPT alarm disarmed", "member_id", fmt.Sprintf("%x", id), "reason", d.Reason)
	}
	return nil
}
