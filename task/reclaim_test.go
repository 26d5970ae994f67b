package task

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/task/etcdproc"
)

// startLoops bootstraps a cluster of k's members under their supervisor
// loops: the first seeds alone, the others join one at a time. It returns
// the members and a client on all of them once every one is a voter.
func startLoops(t *testing.T, k *kit) (map[string]*Member, *clientv3.Client) {
	t.Helper()
	ms, cli, _ := startLoopsStops(t, k)
	return ms, cli
}

// startLoopsStops is startLoops that also returns each member's loop stop.
func startLoopsStops(t *testing.T, k *kit) (map[string]*Member, *clientv3.Client, map[string]func()) {
	t.Helper()
	all := k.cl.Provider.Static
	ms := map[string]*Member{}
	stops := map[string]func(){}
	var eps []string
	for _, s := range all {
		ms[s.Name] = k.member(s.Name, nil)
		eps = append(eps, ms[s.Name].clientURL(ms[s.Name].self))
	}
	k.prov.Set(all[:1])
	stops[all[0].Name] = runLoop(t, ms[all[0].Name])
	waitUntil(t, 20*time.Second, "the first member seeds", func() (bool, string) {
		return ms[all[0].Name].etcdServerLeader() != 0, ms[all[0].Name].reason()
	})
	k.prov.Set(all)
	for _, s := range all[1:] {
		stops[s.Name] = runLoop(t, ms[s.Name])
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	waitUntil(t, 90*time.Second, "every member a voter", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		voters := 0
		for _, m := range resp.Members {
			if !m.IsLearner && m.Name != "" {
				voters++
			}
		}
		return voters == len(all), fmt.Sprintf("%d voters of %d", voters, len(all))
	})
	return ms, cli, stops
}

// waitUntil polls cond until it holds or timeout, then fails with what it
// last saw.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	last := ""
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ok, seen := cond()
		if ok {
			return
		}
		last = seen
	}
	t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
}

// healthOf returns m's /health status code and body.
func healthOf(m *Member) (int, string) {
	return getWith(http.DefaultClient, m.statusURL(m.self)+"/health")
}

// NOSPACE without a human: a 3-member cluster with a 16 MiB quota is
// filled (a few keys overwritten with 64 KiB values) until etcd refuses
// writes; the Consul check turned warning (429) before that. The leader
// compacts, defragments every member and disarms the alarm, the cluster
// takes writes again, and every acknowledged value is there.
func TestNoSpaceRecoversWithoutAHuman(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a 16 MiB quota on 3 members")
	}
	k := newKit(t, "m0", "m1", "m2")
	k.cl.Etcd.QuotaBackendBytes = 16 << 20
	k.cl.Etcd.DefragRatio = 0 // NOSPACE alone
	ms, cli := startLoops(t, k)

	ctx := context.Background()
	value := strings.Repeat("v", 64<<10)
	acked := map[string]string{}
	for i := range 50 {
		key := fmt.Sprintf("unique/%03d", i)
		if _, err := cli.Put(ctx, key, "x"); err != nil {
			t.Fatal(err)
		}
		acked[key] = "x"
	}
	warned := false
	var full time.Time
	// The put refused with NOSPACE may still have been applied: etcd's
	// apply layer applies a put and then reports the quota exceeded
	// (quotaApplierV3). Its key may hold either value.
	maybe := map[string]string{}
	for i := 0; ; i++ {
		if i%10 == 0 && !warned {
			for _, m := range ms {
				if code, body := healthOf(m); code == http.StatusTooManyRequests && strings.HasPrefix(body, "warning:") {
					warned = true
					t.Logf("warning before NOSPACE: %s", strings.TrimSpace(body))
					break
				}
			}
		}
		key := fmt.Sprintf("hot/%02d", i%20)
		val := fmt.Sprintf("%06d:%s", i, value)
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Put(pctx, key, val)
		cancel()
		if errors.Is(err, rpctypes.ErrNoSpace) {
			full = time.Now()
			maybe[key] = val
			t.Logf("NOSPACE after %d puts of 64 KiB (refused: %s=%06d)", i, key, i)
			break
		}
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		acked[key] = val
		if i > 2000 {
			t.Fatal("the 16 MiB quota never filled")
		}
	}
	if !warned {
		t.Fatal("no member's /health turned warning (429) before etcd refused writes")
	}
	waitUntil(t, 2*time.Minute, "the cluster takes writes again", func() (bool, string) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := cli.Put(pctx, "after", "ok")
		reasons := []string{}
		for n, m := range ms {
			reasons = append(reasons, n+": "+m.reason())
		}
		return err == nil, fmt.Sprintf("%v; %s", err, strings.Join(reasons, "; "))
	})
	t.Logf("NOSPACE to writable again: %s", time.Since(full).Round(time.Millisecond))
	for key, want := range acked {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 1 && maybe[key] != "" && string(resp.Kvs[0].Value) == maybe[key] {
			continue // overwritten by the refused put, applied anyway
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
			got := "(missing)"
			if len(resp.Kvs) == 1 {
				got = string(resp.Kvs[0].Value)
				got = got[:min(len(got), 8)]
			}
			t.Fatalf("acknowledged %s=%s lost or changed after maintenance: holds %s", key, want[:min(len(want), 8)], got)
		}
	}
	for n, m := range ms {
		if code, body := healthOf(m); code != http.StatusOK {
			t.Errorf("%s /health after maintenance: %d %s", n, code, body)
		}
	}
}

// Fragmentation-based defragmentation: once compaction leaves most of the
// members' databases free pages (defrag_ratio 0.5, defrag_min_size 4 MiB),
// the leader defragments them one at a time without anyone asking, and
// every key survives.
func TestFragmentedMembersAreDefragmented(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and compacts 3 members")
	}
	k := newKit(t, "m0", "m1", "m2")
	k.cl.Etcd.DefragRatio, k.cl.Etcd.DefragMinSize = 0.5, 4<<20
	ms, cli := startLoops(t, k)
	ctx := context.Background()
	value := strings.Repeat("f", 32<<10)
	var rev int64
	for i := range 300 {
		resp, err := cli.Put(ctx, fmt.Sprintf("churn/%d", i%5), value)
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	for n, m := range ms {
		st, err := cli.Status(ctx, m.clientURL(m.self))
		if err != nil {
			t.Fatal(err)
		}
		if st.DbSize < 8<<20 {
			t.Fatalf("%s: database %d bytes before defragmentation, want the 9 MiB written", n, st.DbSize)
		}
	}
	waitUntil(t, 60*time.Second, "every member defragmented", func() (bool, string) {
		// A trickle of writes, as a live cluster has: etcd updates a
		// member's in-use size when its backend commits.
		if _, err := cli.Put(ctx, "trickle", "x"); err != nil {
			return false, err.Error()
		}
		var seen []string
		ok := true
		for n, m := range ms {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := cli.Status(sctx, m.clientURL(m.self))
			cancel()
			if err != nil {
				return false, err.Error()
			}
			seen = append(seen, fmt.Sprintf("%s %d/%d", n, st.DbSizeInUse, st.DbSize))
			// A bbolt file never shrinks but by defragmentation.
			ok = ok && st.DbSize < 2<<20
		}
		return ok, strings.Join(seen, ", ")
	})
	for i := range 5 {
		resp, err := cli.Get(ctx, fmt.Sprintf("churn/%d", i))
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != value {
			t.Fatalf("churn/%d after defragmentation: %v", i, err)
		}
	}
}

// TestAlarmsOfAStoppedServer: the loop and /health read alarms from etcd's
// backend while the member may be stopping etcd (or etcd stops on its own,
// removed from the cluster): a read after the backend closed must report no
// alarms, not crash the member (CI: TestASGProviderLifecycle, a member
// leaving panicked in bbolt "tx closed" under etcdproc.NoSpace).
func TestAlarmsOfAStoppedServer(t *testing.T) {
	k := newKit(t, "a")
	m := k.member("a", nil)
	k.seed(m)
	m.mu.Lock()
	e := m.proc.Server()
	m.mu.Unlock()
	if _, err := etcdproc.AlarmList(e); err != nil {
		t.Fatalf("alarms of a running server: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-e.Server.StopNotify():
				return
			default:
				etcdproc.NoSpace(e)
			}
		}
	}()
	m.stopEtcd()
	<-done
	if etcdproc.NoSpace(e) || len(etcdproc.CorruptAlarms(e)) != 0 {
		t.Fatal("a stopped server reports alarms")
	}
	if _, err := etcdproc.AlarmList(e); err == nil {
		t.Fatal("reading the alarms of a stopped server gave no error")
	}
}
