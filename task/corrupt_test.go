package task

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// corruptValue rewrites, in the stopped member m's database, the value of
// every stored revision of key: the data now differs from its peers' at
// the same revisions, as a bit flip on disk would make it.
func corruptValue(t *testing.T, m *Member, key, val string) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(m.dir.etcdDir(), "member", "snap", "db"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		changed := map[string][]byte{}
		if err := b.ForEach(func(k, v []byte) error {
			var kv mvccpb.KeyValue
			if err := kv.Unmarshal(v); err != nil {
				return err
			}
			if string(kv.Key) != key {
				return nil
			}
			kv.Value = []byte(val)
			nv, err := kv.Marshal()
			changed[string(k)] = nv
			return err
		}); err != nil {
			return err
		}
		for k, v := range changed {
			if err := b.Put([]byte(k), v); err != nil {
				return err
			}
		}
		n = len(changed)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("key %s not found in %s's database", key, m.opts.Name)
	}
}

// serializableGet reads key from m's own endpoint without asking the
// leader: what m's own data holds.
func serializableGet(m *Member, key string) (string, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.clientURL(m.self)}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return "", err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key, clientv3.WithSerializable())
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) != 1 {
		return "", fmt.Errorf("%s: %d values", key, len(resp.Kvs))
	}
	return string(resp.Kvs[0].Value), nil
}

// rejoinedGood waits until member m runs again under a new member id (its
// old one, old, gone from the membership), as a voter, its own data
// holding every key of want, with its corrupt data set aside, and returns
// how long that took.
func rejoinedGood(t *testing.T, cli *clientv3.Client, m *Member, old uint64, want map[string]string) {
	t.Helper()
	waitUntil(t, 2*time.Minute, m.opts.Name+" rejoins as a voter with good data", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return false, err.Error() + "; " + m.reason()
		}
		var self *mvccMember
		for _, mem := range resp.Members {
			if mem.ID == old {
				return false, fmt.Sprintf("old identity %x still a member; %s", old, m.reason())
			}
			if mem.Name == m.opts.Name {
				self = &mvccMember{id: mem.ID, learner: mem.IsLearner}
			}
		}
		if self == nil || self.learner {
			return false, fmt.Sprintf("not a voter yet (%+v); %s", self, m.reason())
		}
		for k, v := range want {
			got, err := serializableGet(m, k)
			if err != nil || got != v {
				return false, fmt.Sprintf("%s holds %s=%q (%v)", m.opts.Name, k, got, err)
			}
		}
		return true, ""
	})
	aside := m.asideEntries(t)
	if len(aside) != 1 || !strings.HasSuffix(aside[0], "-corrupt") {
		t.Fatalf("set aside: %v, want one corrupt data dir", aside)
	}
}

type mvccMember struct {
	id      uint64
	learner bool
}

// A member whose data was corrupted while it was stopped is compared with
// its peers before it starts again: they agree among themselves on another
// hash, so its data is set aside (kept, not deleted) and it rejoins as a
// learner, is promoted, and holds the cluster's data again.
func TestCorruptMemberIsFoundBeforeItStartsAndRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("three embedded members")
	}
	k := newKit(t, "m0", "m1", "m2")
	ms, cli, stops := startLoopsStops(t, k)
	want := map[string]string{}
	for i := range 20 {
		key, val := fmt.Sprintf("k/%02d", i), fmt.Sprintf("v%02d", i)
		put(t, cli, key, val)
		want[key] = val
	}
	// Every member holds the last key before m2 stops.
	waitUntil(t, 10*time.Second, "m2 caught up", func() (bool, string) {
		v, err := serializableGet(ms["m2"], "k/19")
		return v == "v19", fmt.Sprint(v, err)
	})
	old := ms["m2"].waitMeta(t, func(m Meta) bool { return m.MemberID != 0 }).MemberID
	stops["m2"]()
	ms["m2"].halt()
	corruptValue(t, ms["m2"], "k/07", "rotten")

	m2 := k.member("m2", nil)
	start := time.Now()
	runLoop(t, m2)
	rejoinedGood(t, cli, m2, old, want)
	t.Logf("corrupt member found at its start, set aside and rejoined as a voter in %s", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "after", "ok"); err != nil {
		t.Fatalf("put after the rejoin: %v", err)
	}
}

// A member whose data was corrupted, started where no quorum could judge
// it (in a whole-cluster restart the first members up are not compared; a
// good member compared with it and a good peer finds no majority), is
// found by the leader's compaction hash check: the majority's hash names
// it in a CORRUPT alarm, under which etcd refuses writes; its data is set
// aside, its alarm disarmed once it left the membership, and it rejoins
// with good data.
func TestCompactionHashCheckFindsACorruptMember(t *testing.T) {
	if testing.Short() {
		t.Skip("three embedded members")
	}
	k := newKit(t, "m0", "m1", "m2")
	k.cl.Etcd.CorruptCheckInterval = time.Second
	ms, cli, stops := startLoopsStops(t, k)
	want := map[string]string{}
	for i := range 20 {
		key, val := fmt.Sprintf("k/%02d", i), fmt.Sprintf("v%02d", i)
		put(t, cli, key, val)
		want[key] = val
	}
	waitUntil(t, 10*time.Second, "m2 caught up", func() (bool, string) {
		v, err := serializableGet(ms["m2"], "k/19")
		return v == "v19", fmt.Sprint(v, err)
	})
	old := ms["m2"].waitMeta(t, func(m Meta) bool { return m.MemberID != 0 }).MemberID
	for _, n := range []string{"m0", "m1", "m2"} {
		stops[n]()
		ms[n].halt()
	}
	corruptValue(t, ms["m2"], "k/07", "rotten")

	// m2 and m0 start together (neither sees a quorum: not compared),
	// then m1, whose data differs from m2's and matches m0's: no
	// majority of the voters agrees on another hash, so it starts.
	again := map[string]*Member{}
	for _, n := range []string{"m0", "m1", "m2"} {
		again[n] = k.member(n, nil)
	}
	runLoop(t, again["m2"])
	runLoop(t, again["m0"])
	waitUntil(t, 30*time.Second, "m0 and m2 run with a quorum", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := cli.MemberList(ctx)
		return err == nil, fmt.Sprintf("%v; m0: %s; m2: %s", err, again["m0"].reason(), again["m2"].reason())
	})
	runLoop(t, again["m1"])
	waitUntil(t, 30*time.Second, "m1 runs", func() (bool, string) {
		ok, _ := again["m1"].running()
		return ok, again["m1"].reason()
	})

	// A compaction gives the leader's check a hash to compare.
	var compacted time.Time
	waitUntil(t, 30*time.Second, "a compaction at the current revision", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := cli.Put(ctx, "compact-marker", "x")
		if err != nil {
			return false, err.Error()
		}
		_, err = cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
		compacted = time.Now()
		return err == nil, fmt.Sprint(err)
	})
	want["compact-marker"] = "x"
	refused, warned := false, ""
	waitUntil(t, 2*time.Minute, "the CORRUPT alarm is raised, then handled", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := cli.Put(ctx, "probe", "p")
		if errors.Is(err, rpctypes.ErrCorrupt) {
			refused = true
			for _, m := range again {
				if code, body := healthOf(m); code == http.StatusTooManyRequests && strings.Contains(body, "CORRUPT alarm raised") {
					warned = body
				}
			}
		}
		return refused && err == nil, fmt.Sprintf("refused seen %v, put: %v; m2: %s", refused, err, again["m2"].reason())
	})
	if warned == "" {
		t.Error("no member's /health turned warning (429) naming the CORRUPT alarm while writes were refused")
	}
	t.Logf("health while refused: %s", strings.TrimSpace(warned))
	t.Logf("CORRUPT alarm raised and the cluster serving again %s after the compaction", time.Since(compacted).Round(time.Millisecond))
	rejoinedGood(t, cli, again["m2"], old, want)
	t.Logf("corrupt member found by the compaction hash check, set aside and rejoined in %s", time.Since(compacted).Round(time.Millisecond))
	for _, n := range []string{"m0", "m1"} {
		if a := again[n].asideEntries(t); len(a) != 0 {
			t.Errorf("%s's good data was set aside: %v", n, a)
		}
	}
}
