package task

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
)

// Two members move at once (Nomad stopped both allocations and placed
// their replacements, each with the previous one's disk, at new ports):
// the first to come back updates its peer URL and leads; the second's
// data names the leader's old URL and the leader names its old one, so
// neither reaches the other and its own server never hears from the
// leader. It must update its peer URL through the other members and
// rejoin (found by chaos-hosts, "stop two members' allocations at once":
// the member stayed "running; member list unreachable" for good).
func TestTwoMembersMovedAtOnceRejoin(t *testing.T) {
	k := newKit(t, "m0", "m1", "m2")
	all := k.cl.Provider.Static
	k.prov.Set(all[:1])
	ms := map[string]*Member{}
	stops := map[string]func(){}
	ms["m0"] = k.member("m0", nil)
	stops["m0"] = runLoop(t, ms["m0"])
	cli := k.client(ms["m0"])
	voters := func(want int) func() (bool, string) {
		return func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			resp, err := cli.MemberList(ctx)
			if err != nil {
				return false, err.Error()
			}
			n := 0
			for _, mem := range resp.Members {
				if !mem.IsLearner {
					n++
				}
			}
			return n == want && len(resp.Members) == want, fmt.Sprint(resp.Members)
		}
	}
	waitUntil(t, 20*time.Second, "m0 seeded", voters(1))
	k.prov.Set(all)
	for _, n := range []string{"m1", "m2"} {
		ms[n] = k.member(n, nil)
		stops[n] = runLoop(t, ms[n])
	}
	waitUntil(t, 60*time.Second, "3 voters", voters(3))
	ids := map[string]uint64{}
	for _, n := range []string{"m1", "m2"} {
		meta, err := ms[n].dir.ReadMeta()
		if err != nil {
			t.Fatal(err)
		}
		ids[n] = meta.MemberID
	}

	// Both stop, then come back with their data at new peer ports.
	stops["m1"]()
	stops["m2"]()
	ports := clustertest.FreePorts(t, 2)
	moved := slices.Clone(all)
	moved[1].PeerPort, moved[2].PeerPort = ports[0], ports[1]
	k.cl.Provider.Static = moved
	k.prov.Set(moved)
	peerOf := func(id uint64) (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return err.Error(), false
		}
		for _, mem := range resp.Members {
			if mem.ID == id && len(mem.PeerURLs) == 1 {
				return mem.PeerURLs[0], true
			}
		}
		return fmt.Sprint(resp.Members), false
	}
	m1 := k.member("m1", nil)
	runLoop(t, m1)
	waitUntil(t, 30*time.Second, "m1's new peer URL in the membership", func() (bool, string) {
		u, ok := peerOf(ids["m1"])
		return ok && u == m1.peerURL(m1.self), u
	})
	// m1 leads: it is the member whose old URL m2's data names.
	waitUntil(t, 30*time.Second, "m1 leading", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := cli.Status(ctx, ms["m0"].clientURL(ms["m0"].self))
		if err != nil {
			return false, err.Error()
		}
		if st.Leader == ids["m1"] {
			return true, ""
		}
		if st.Leader == st.Header.MemberId {
			if _, err := cli.MoveLeader(ctx, ids["m1"]); err != nil {
				return false, err.Error()
			}
		} else {
			lc, err := clientv3.New(clientv3.Config{Endpoints: []string{m1.clientURL(m1.self)}, DialTimeout: time.Second, Logger: zap.NewNop()})
			if err != nil {
				return false, err.Error()
			}
			defer lc.Close()
			if _, err := lc.MoveLeader(ctx, ids["m1"]); err != nil {
				return false, err.Error()
			}
		}
		return false, fmt.Sprintf("leader %x", st.Leader)
	})

	m2 := k.member("m2", nil)
	runLoop(t, m2)
	m2cli := k.client(m2)
	waitUntil(t, 30*time.Second, "m2's new peer URL in the membership and m2 serving a linearizable read", func() (bool, string) {
		u, ok := peerOf(ids["m2"])
		if !ok || u != m2.peerURL(m2.self) {
			return false, fmt.Sprintf("peer URL %s; m2: %s", u, m2.reason())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := m2cli.Get(ctx, "x"); err != nil {
			return false, fmt.Sprintf("m2: %v (%s)", err, m2.reason())
		}
		return true, ""
	})
}

// A member that runs alone moves (a one-member cluster rescheduled at a
// new peer port with its data, or a recovery from data carried to a new
// allocation, which keeps the old URL in the membership): with no peer to
// ask, it must read the member list from its own server and update its
// URL there, not lose sight of its quorum and recover again and again (the
// e2e lock-holder test saw epochs climb by one every 14 s).
func TestMovedMemberAloneUpdatesItsURL(t *testing.T) {
	k := newKit(t, "m0")
	m0 := k.member("m0", nil)
	stop := runLoop(t, m0)
	waitUntil(t, 20*time.Second, "m0 seeded", func() (bool, string) {
		meta, err := m0.dir.ReadMeta()
		return err == nil && meta.MemberID != 0, fmt.Sprint(meta, err)
	})
	before, err := m0.dir.ReadMeta()
	if err != nil {
		t.Fatal(err)
	}
	stop()
	moved := slices.Clone(k.cl.Provider.Static)
	moved[0].PeerPort = clustertest.FreePorts(t, 1)[0]
	k.cl.Provider.Static = moved
	k.prov.Set(moved)
	again := k.member("m0", nil)
	runLoop(t, again)
	cli := k.client(again)
	waitUntil(t, 30*time.Second, "m0's new peer URL in the membership and a write served", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		if len(resp.Members) != 1 || len(resp.Members[0].PeerURLs) != 1 || resp.Members[0].PeerURLs[0] != again.peerURL(again.self) {
			return false, fmt.Sprintf("%v; m0: %s", resp.Members, again.reason())
		}
		if _, err := cli.Put(ctx, "moved", "yes"); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if after, err := again.dir.ReadMeta(); err != nil || after.Epoch != before.Epoch {
		t.Fatalf("epoch %d before the move, %+v (%v) after: a member that moved alone must not recover", before.Epoch, after, err)
	}
}
