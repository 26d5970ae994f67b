package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// downStore is a real file store that refuses every write while down is
// set, as an unreachable S3 endpoint does.
type downStore struct {
	snapshot.Store
	down    atomic.Bool
	refused atomic.Int64
}

var errUnreachable = errors.New("store unreachable (test)")

func (s *downStore) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	if s.down.Load() {
		s.refused.Add(1)
		return 0, errUnreachable
	}
	return s.Store.Put(ctx, name, r)
}

func (s *downStore) PutMeta(ctx context.Context, m snapshot.Meta) error {
	if s.down.Load() {
		s.refused.Add(1)
		return errUnreachable
	}
	return s.Store.PutMeta(ctx, m)
}

// TestStoreUnreachableForAWhileLosesNothing: while the store refuses
// writes the recorder keeps the events and tries again at each flush;
// once the store is back the chain covers every change, without a gap.
func TestStoreUnreachableForAWhileLosesNothing(t *testing.T) {
	ctx := context.Background()
	cli, ep := startEtcd(t, filepath.Join(t.TempDir(), "src"))
	fs, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	store := &downStore{Store: fs}
	base, err := snapshot.Save(ctx, snapshot.From{Endpoint: ep, SpoolDir: t.TempDir()}, store, snapshot.Source{Cluster: "c", Epoch: 1}, snapshot.Encryption{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	recordUntil(t, cli, store, base, snapshot.Encryption{}, func() {
		store.down.Store(true)
		for i := range 20 { // 20 × ~150 bytes: below 8 flushes' worth of 4096
			must(t)(cli.Put(ctx, fmt.Sprintf("during/%04d", i), strings.Repeat("d", 100)))
		}
		if err := pollFor(10*time.Second, func() bool { return store.refused.Load() >= 3 }); err != nil {
			t.Fatalf("the recorder did not try to flush while the store was down: %v", err)
		}
		store.down.Store(false)
		must(t)(cli.Put(ctx, "after/outage", "x"))
	})
	want := dump(t, cli)
	restored, res := restoreAndReplay(t, store, base, snapshot.Encryption{})
	got := dump(t, restored)
	if res.Stopped != "" || len(got) != len(want) {
		t.Fatalf("after the outage: %d keys restored, cluster has %d (%+v)", len(got), len(want), res)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: restored %q, cluster %q", k, got[k], v)
		}
	}
}

// TestStoreUnreachableTooLongBreaksTheChain: past eight flushes' worth of
// changes held, the recorder gives up with ErrChainGap (the member then
// takes a full snapshot that starts a new chain) instead of growing
// without bound.
func TestStoreUnreachableTooLongBreaksTheChain(t *testing.T) {
	ctx := context.Background()
	cli, ep := startEtcd(t, filepath.Join(t.TempDir(), "src"))
	fs, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	store := &downStore{Store: fs}
	base, err := snapshot.Save(ctx, snapshot.From{Endpoint: ep, SpoolDir: t.TempDir()}, store, snapshot.Source{Cluster: "c", Epoch: 1}, snapshot.Encryption{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	store.down.Store(true)
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done := make(chan error, 1)
	rec := &snapshot.Recorder{Client: cli, Store: store, Source: snapshot.Source{Cluster: "c", Epoch: 1},
		Base: base, From: base.Revision + 1, FlushEvery: 50 * time.Millisecond, FlushBytes: 1024}
	go func() { done <- rec.Run(rctx) }()
	for i := range 100 { // 100 × ~1 KiB: more than 8 × 1024 bytes
		must(t)(cli.Put(ctx, fmt.Sprintf("during/%04d", i), strings.Repeat("d", 1000)))
	}
	err = <-done
	if !errors.Is(err, snapshot.ErrChainGap) || !errors.Is(err, errUnreachable) {
		t.Fatalf("recorder with the store down: %v, want ErrChainGap wrapping the store's error", err)
	}
	list, err := fs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if chain, _ := snapshot.Chain(list, base); len(chain) != 0 {
		t.Fatalf("segments stored while the store was down: %+v", chain)
	}
}

// TestWrongKeyRestoresNothing: with another key than the snapshot's, the
// fetch fails with an error that says so and leaves no file; the delta
// segments of the chain, tried with that key, are not applied (the
// replay stops at the first, naming it) and the data dir keeps the full
// snapshot's keys only.
func TestWrongKeyRestoresNothing(t *testing.T) {
	ctx := context.Background()
	cli, ep := startEtcd(t, filepath.Join(t.TempDir(), "src"))
	fill(t, cli, 10)
	store, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	key := func() snapshot.Encryption {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		return snapshot.Encryption{Recipients: []age.Recipient{id.Recipient()}, Identities: []age.Identity{id}}
	}
	right, wrong := key(), key()
	base, err := snapshot.Save(ctx, snapshot.From{Endpoint: ep, SpoolDir: t.TempDir()}, store, snapshot.Source{Cluster: "c", Epoch: 1}, right, nil)
	if err != nil {
		t.Fatal(err)
	}
	recordUntil(t, cli, store, base, right, func() {
		for i := range 50 {
			must(t)(cli.Put(ctx, fmt.Sprintf("after/%04d", i), "x"))
		}
	})

	dir := t.TempDir()
	_, err = snapshot.Fetch(ctx, store, base.Name, filepath.Join(dir, "snap.db"), wrong, nil)
	if err == nil || !strings.Contains(err.Error(), "wrong key or passphrase") {
		t.Fatalf("fetch with the wrong key: %v, want an error naming the key", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("a failed fetch left %v behind", left)
	}
	_, err = snapshot.Fetch(ctx, store, base.Name, filepath.Join(dir, "snap.db"), snapshot.Encryption{}, nil)
	if err == nil || !strings.Contains(err.Error(), "give the passphrase or an identity file") {
		t.Fatalf("fetch without a key: %v, want an error asking for one", err)
	}

	// The full snapshot restored with the right key, its chain replayed
	// with the wrong one: nothing of the chain is applied.
	dataDir := filepath.Join(t.TempDir(), "restored")
	if _, err := snapshot.FetchInto(ctx, store, base.Name, dataDir, right, nil); err != nil {
		t.Fatal(err)
	}
	peer := clustertest.FreeURL(t)
	if err := snapshot.Restore(snapshot.RestoreOptions{DataDir: dataDir, Name: "s0", PeerURL: peer.String(), Token: "t2"}); err != nil {
		t.Fatal(err)
	}
	list, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chain, _ := snapshot.Chain(list, base)
	if len(chain) == 0 {
		t.Fatal("no delta recorded")
	}
	// A segment that does not open with the reader's key is no evidence
	// of damage for anyone else (a member shares only the object's own
	// failures: data review of collect, session 13, finding 3).
	if fc, err := snapshot.FetchChain(ctx, store, chain, wrong); err != nil || fc.Damaged != chain[0].Name || !fc.Undecryptable {
		t.Fatalf("fetch of the chain with the wrong key: %+v, %v; want %s damaged as undecryptable", fc, err, chain[0].Name)
	}
	if fc, err := snapshot.FetchChain(ctx, store, chain, right); err != nil || fc.Damaged != "" || fc.Undecryptable {
		t.Fatalf("fetch of the chain with the right key: damaged %q undecryptable %v, %v; want the whole chain", fc.Damaged, fc.Undecryptable, err)
	}
	res, err := snapshot.Replay(ctx, store, chain, wrong, dataDir)
	if err != nil || res.Segments != 0 || res.Events != 0 || !strings.Contains(res.Stopped, chain[0].Name) || !strings.Contains(res.Stopped, "wrong key") {
		t.Fatalf("replay with the wrong key: %+v, %v; want nothing applied, stopped at %s naming the key", res, err, chain[0].Name)
	}
	restored, _ := startEtcd(t, dataDir)
	if got := dump(t, restored); len(got) != 10 {
		t.Fatalf("after a replay with the wrong key the data dir holds %d keys, want the snapshot's 10", len(got))
	}
}

// pollFor polls cond every 20 ms until it holds or timeout passes.
func pollFor(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// TestReplayOfLargeValues: a replay's transactions stay within what a
// client may send (gRPC's 2 MiB by default) and etcd accepts, whatever
// the values' size: 600 puts of 8 KiB (4.7 MiB) over 300 keys come
// back, each key with its last value (a key written twice in one replay
// transaction keeps the later write).
func TestReplayOfLargeValues(t *testing.T) {
	ctx := context.Background()
	cli, ep := startEtcd(t, filepath.Join(t.TempDir(), "src"))
	store, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	base, err := snapshot.Save(ctx, snapshot.From{Endpoint: ep, SpoolDir: t.TempDir()}, store, snapshot.Source{Cluster: "c", Epoch: 1}, snapshot.Encryption{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	recordUntil(t, cli, store, base, snapshot.Encryption{}, func() {
		for i := range 600 {
			must(t)(cli.Put(ctx, fmt.Sprintf("big/%04d", i%300), fmt.Sprintf("write %d ", i)+strings.Repeat("b", 8<<10)))
		}
	})
	want := dump(t, cli)
	restored, res := restoreAndReplay(t, store, base, snapshot.Encryption{})
	got := dump(t, restored)
	if len(got) != len(want) || res.Events != 600 {
		t.Fatalf("restored %d keys of %d (%+v)", len(got), len(want), res)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: restored %.20q..., cluster %.20q...", k, got[k], v)
		}
	}
}
