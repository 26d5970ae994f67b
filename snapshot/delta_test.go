package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// dump reads the whole keyspace as key → value@lease-present.
func dump(t *testing.T, cli *clientv3.Client) map[string]string {
	t.Helper()
	resp, err := cli.Get(context.Background(), "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = fmt.Sprintf("%s@lease=%v", kv.Value, kv.Lease != 0)
	}
	return out
}

// recordUntil runs a recorder over cli from base until the store's chain
// reaches the cluster's current revision, then stops it.
func recordUntil(t *testing.T, cli *clientv3.Client, store snapshot.Store, base snapshot.Meta, enc snapshot.Encryption, write func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	rec := &snapshot.Recorder{Client: cli, Store: store, Encryption: enc, Source: snapshot.Source{Cluster: "c", Epoch: 1},
		Base: base, From: base.Revision + 1, FlushEvery: 100 * time.Millisecond, FlushBytes: 4096}
	go func() { done <- rec.Run(ctx) }()
	write()
	resp, err := cli.Get(context.Background(), "any")
	if err != nil {
		t.Fatal(err)
	}
	want := resp.Header.Revision
	// A polling deadline, not a bound under test: TestReplayOfLargeValues
	// reached 395-598 of 601 in 30 s at load 20-38 (three times in
	// sessions 12-13), the recorder progressing all along.
	const wait = 2 * time.Minute
	deadline := time.Now().Add(wait)
	for {
		list, err := store.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// A listing taken while the recorder stores its segments may
		// show a gap for a moment (CI, under load, once); a gap that is
		// still there at the deadline is the recorder's.
		chain, gap := snapshot.Chain(list, base)
		if n := len(chain); !gap && n > 0 && chain[n-1].Revision >= want {
			break
		}
		if time.Now().After(deadline) {
			if gap {
				t.Fatalf("the recorder left a gap: %+v", chain)
			}
			t.Fatalf("the chain did not reach revision %d in %s: %+v", want, wait, chain)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("recorder ended with %v, want context.Canceled", err)
	}
}

// restoreAndReplay restores base from store into a new data dir, replays
// its chain and returns a client on the result.
func restoreAndReplay(t *testing.T, store snapshot.Store, base snapshot.Meta, enc snapshot.Encryption) (*clientv3.Client, snapshot.ReplayResult) {
	t.Helper()
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "restored")
	if _, err := snapshot.FetchInto(ctx, store, base.Name, dataDir, enc, nil); err != nil {
		t.Fatal(err)
	}
	peer := clustertest.FreeURL(t)
	if err := snapshot.Restore(snapshot.RestoreOptions{DataDir: dataDir, Name: "s0", PeerURL: peer.String(), Token: "t2", RevisionBump: 1000}); err != nil {
		t.Fatal(err)
	}
	list, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chain, _ := snapshot.Chain(list, base)
	res, err := snapshot.Replay(ctx, store, chain, enc, dataDir)
	if err != nil {
		t.Fatalf("replay: %v (%+v)", err, res)
	}
	cli, _ := startEtcd(t, dataDir)
	return cli, res
}

// TestDeltasBringBackEveryChangeAfterTheSnapshot: puts, overwrites,
// deletes, a multi-key transaction and keys on a lease granted after the
// snapshot, recorded by a watch into segments and replayed over the full
// snapshot, give back the keyspace the cluster had at the last delta.
func TestDeltasBringBackEveryChangeAfterTheSnapshot(t *testing.T) {
	ctx := context.Background()
	cli, ep := startEtcd(t, filepath.Join(t.TempDir(), "src"))
	fill(t, cli, 50)
	old, err := cli.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "leased/old", "before", clientv3.WithLease(old.ID)); err != nil {
		t.Fatal(err)
	}
	store, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	enc := snapshot.Encryption{Recipients: []age.Recipient{id.Recipient()}, Identities: []age.Identity{id}}
	base, err := snapshot.Save(ctx, snapshot.From{Endpoint: ep, SpoolDir: t.TempDir()}, store, snapshot.Source{Cluster: "c", Epoch: 1}, enc, nil)
	if err != nil {
		t.Fatal(err)
	}
	recordUntil(t, cli, store, base, enc, func() {
		lease, err := cli.Grant(ctx, 900)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 300 {
			must(t)(cli.Put(ctx, fmt.Sprintf("after/%04d", i), strings.Repeat("x", i)))
		}
		must(t)(cli.Put(ctx, "k/00001", "overwritten"))
		must(t)(cli.Delete(ctx, "k/00002"))
		must(t)(cli.Delete(ctx, "after/01", clientv3.WithPrefix()))
		if _, err := cli.Txn(ctx).Then(clientv3.OpPut("txn/a", "1"), clientv3.OpPut("txn/b", "2"), clientv3.OpDelete("k/00003")).Commit(); err != nil {
			t.Fatal(err)
		}
		must(t)(cli.Put(ctx, "leased/new", "after", clientv3.WithLease(lease.ID)))
		must(t)(cli.Put(ctx, "leased/old", "after", clientv3.WithLease(old.ID)))
	})
	want := dump(t, cli)
	restored, res := restoreAndReplay(t, store, base, enc)
	got := dump(t, restored)
	if res.Stopped != "" || res.Segments < 2 || res.Keys == 0 {
		t.Fatalf("replay result %+v: want several segments, applied to the end", res)
	}
	var diff []string
	for k, v := range want {
		if got[k] != v {
			diff = append(diff, fmt.Sprintf("%s: restored %q, cluster %q", k, got[k], v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: restored %q, absent in the cluster", k, v))
		}
	}
	if len(diff) > 0 {
		t.Fatalf("%d keys differ after snapshot + %d deltas (%+v):\n%s", len(diff), res.Segments, res, strings.Join(diff, "\n"))
	}
	// The lease granted after the snapshot exists again, with its TTL.
	leases, err := restored.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 2 {
		t.Fatalf("restored leases %+v, want the old and the new one", leases.Leases)
	}
}

// TestDamagedDeltaEndsTheReplayThere: a segment that fails its checksum
// is not applied, nor anything after it, and the result says so; what
// precedes it is applied.
func TestDamagedDeltaEndsTheReplayThere(t *testing.T) {
	ctx := context.Background()
	cli, ep := startEtcd(t, filepath.Join(t.TempDir(), "src"))
	dir := filepath.Join(t.TempDir(), "store")
	store, err := file.New(dir, "c")
	if err != nil {
		t.Fatal(err)
	}
	base, err := snapshot.Save(ctx, snapshot.From{Endpoint: ep, SpoolDir: t.TempDir()}, store, snapshot.Source{Cluster: "c", Epoch: 1}, snapshot.Encryption{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	recordUntil(t, cli, store, base, snapshot.Encryption{}, func() {
		for i := range 200 {
			must(t)(cli.Put(ctx, fmt.Sprintf("after/%04d", i), strings.Repeat("y", 100)))
		}
	})
	list, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chain, _ := snapshot.Chain(list, base)
	if len(chain) < 3 {
		t.Fatalf("want at least 3 segments to damage the second, got %d", len(chain))
	}
	victim := filepath.Join(dir, chain[1].Name)
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, flip(b, len(b)/2), 0o600); err != nil {
		t.Fatal(err)
	}
	restored, res := restoreAndReplay(t, store, base, snapshot.Encryption{})
	if res.Segments != 1 || !strings.Contains(res.Stopped, chain[1].Name) || res.Last != chain[0].Revision {
		t.Fatalf("replay result %+v: want the first segment only, stopped at %s", res, chain[1].Name)
	}
	got := dump(t, restored)
	if n := len(got); n != chain[0].Events {
		t.Fatalf("restored %d keys, want the %d of the first segment", n, chain[0].Events)
	}
}

// TestRecorderReportsCompactedStart: a recorder asked to start below the
// compaction revision cannot record what was compacted and says so.
func TestRecorderReportsCompactedStart(t *testing.T) {
	ctx := context.Background()
	cli, _ := startEtcd(t, filepath.Join(t.TempDir(), "src"))
	fill(t, cli, 20)
	resp, err := cli.Compact(ctx, 15)
	if err != nil || resp == nil {
		t.Fatal(err)
	}
	store, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	rec := &snapshot.Recorder{Client: cli, Store: store, Base: snapshot.Meta{Name: "c-base", Revision: 5}, From: 6, FlushEvery: 50 * time.Millisecond}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := rec.Run(rctx); !errors.Is(err, snapshot.ErrChainGap) {
		t.Fatalf("recorder from a compacted revision: %v, want ErrChainGap", err)
	}
}

func TestChainStopsAtAGap(t *testing.T) {
	base := snapshot.Meta{Name: "b", Revision: 10}
	d := func(first, last int64, b string) snapshot.Meta {
		return snapshot.Meta{Name: fmt.Sprintf("d%d", first), Kind: snapshot.KindDelta, Base: b, FirstRevision: first, Revision: last}
	}
	list := []snapshot.Meta{base, d(20, 25, "b"), d(11, 19, "b"), d(27, 30, "b"), d(11, 40, "other")}
	chain, gap := snapshot.Chain(list, base)
	if len(chain) != 2 || chain[0].Name != "d11" || chain[1].Name != "d20" || !gap {
		t.Fatalf("chain %+v gap %v: want d11, d20 and a gap before d27", chain, gap)
	}
	if full := snapshot.Full(list); len(full) != 1 || full[0].Name != "b" {
		t.Fatalf("Full = %+v", full)
	}
	_, _, end, ok := snapshot.Newest(list)
	if !ok || end != 25 {
		t.Fatalf("Newest end %d, want 25", end)
	}
}

// must fails the test on a call's error: must(t)(cli.Put(...)).
func must(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecorderReportsCaughtUp: the recorder says when every change it saw
// is stored — at its ticks while the cluster is idle (nothing to lose),
// and after the flush that stores a write — so the live RPO (the time
// since) stays small on an idle cluster and covers a write once stored.
func TestRecorderReportsCaughtUp(t *testing.T) {
	ctx := context.Background()
	cli, _ := startEtcd(t, filepath.Join(t.TempDir(), "src"))
	fill(t, cli, 3)
	resp, err := cli.Get(ctx, "any")
	if err != nil {
		t.Fatal(err)
	}
	store, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var last time.Time
	calls := 0
	rec := &snapshot.Recorder{Client: cli, Store: store, Source: snapshot.Source{Cluster: "c", Epoch: 1},
		Base: snapshot.Meta{Name: "c-base", Revision: resp.Header.Revision}, From: resp.Header.Revision + 1, FlushEvery: 50 * time.Millisecond,
		OnCaughtUp: func(at time.Time) { mu.Lock(); last, calls = at, calls+1; mu.Unlock() }}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rec.Run(rctx) }()
	defer func() { cancel(); <-done }()
	caughtUpAfter := func(t0 time.Time) (time.Time, bool) {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			at := last
			mu.Unlock()
			if !at.Before(t0) {
				return at, true
			}
			time.Sleep(20 * time.Millisecond) // polls the recorder's report
		}
		return time.Time{}, false
	}
	if _, ok := caughtUpAfter(time.Now()); !ok {
		t.Fatal("an idle recorder never reported itself caught up")
	}
	if _, err := cli.Put(ctx, "after", "v"); err != nil {
		t.Fatal(err)
	}
	var stored time.Time
	for deadline := time.Now().Add(30 * time.Second); stored.IsZero(); {
		list, err := store.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range list {
			if m.Kind == snapshot.KindDelta {
				stored = m.Created
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delta stored for a write: %+v", list)
		}
		time.Sleep(20 * time.Millisecond) // polls the store
	}
	// The stored metadata may round its creation time.
	if _, ok := caughtUpAfter(stored.Truncate(time.Second)); !ok {
		t.Fatalf("the recorder never reported itself caught up after storing the write (delta created %s)", stored)
	}
}

// A segment's metadata names the member whose recorder wrote it (the
// leader), as a full snapshot's names the member it was streamed from: a
// member about to recover asks it whether it still serves (sim seeds 71
// and 172 with CollectRunning: a leader Nomad collected served on, and
// only the store named it).
func TestASegmentNamesItsRecorder(t *testing.T) {
	ctx := context.Background()
	cli, ep := startEtcd(t, filepath.Join(t.TempDir(), "src"))
	resp, err := cli.Put(ctx, "before", "v")
	if err != nil {
		t.Fatal(err)
	}
	store, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	rec := &snapshot.Recorder{Client: cli, Store: store, Source: snapshot.Source{Cluster: "c", Epoch: 1},
		Base: snapshot.Meta{Name: "c-base", Revision: resp.Header.Revision}, From: resp.Header.Revision + 1, FlushEvery: 50 * time.Millisecond,
		Endpoint: ep, MemberID: "a1"}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rec.Run(rctx) }()
	defer func() { cancel(); <-done }()
	if _, err := cli.Put(ctx, "after", "v"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		list, err := store.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range list {
			if m.Kind == snapshot.KindDelta {
				if m.Endpoint != ep || m.MemberID != "a1" {
					t.Fatalf("segment %s names endpoint %q member %q, want %q a1", m.Name, m.Endpoint, m.MemberID, ep)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delta stored for a write: %+v", list)
		}
		time.Sleep(20 * time.Millisecond) // polls the store
	}
}
