package datadir_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// startEtcd runs a real one-member etcd on dataDir: a new cluster when
// the dir is empty, else the data it holds (its own peer URL kept).
func startEtcd(t *testing.T, dataDir, name string) *clientv3.Client {
	t.Helper()
	e, cli := launchEtcd(t, dataDir, name, false)
	t.Cleanup(e.Close)
	return cli
}

// launchEtcd is startEtcd with ForceNewCluster if force, leaving the
// server to the caller to close.
func launchEtcd(t *testing.T, dataDir, name string, force bool) (*embed.Etcd, *clientv3.Client) {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = name, dataDir
	peer, client := clustertest.FreeURL(t), clustertest.FreeURL(t)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = name + "=" + peer.String()
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{os.DevNull}
	if _, err := os.Stat(filepath.Join(dataDir, "member")); err == nil {
		cfg.InitialCluster = ""
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	cfg.ForceNewCluster = force
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		t.Fatal("etcd not ready")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, Logger: zap.NewNop()})
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return e, cli
}

// backup is a full snapshot of a small cluster (20 keys, one key on a
// lease of snapTTL seconds) in a file store, with deltas written after it.
type backup struct {
	dir      string // the file store's directory
	store    snapshot.Store
	base     snapshot.Meta
	snapTTL  int64
	snapKeys int
	next     int64 // the next revision a delta records
}

func newBackup(t *testing.T, snapTTL int64) *backup {
	t.Helper()
	ctx := context.Background()
	cli := startEtcd(t, filepath.Join(t.TempDir(), "src"), "src")
	for i := range 20 {
		if _, err := cli.Put(ctx, fmt.Sprintf("snap/%03d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	l, err := cli.Grant(ctx, snapTTL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "snap/leased", "on a lease", clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	b := &backup{dir: filepath.Join(t.TempDir(), "store"), snapTTL: snapTTL, snapKeys: 21}
	if b.store, err = file.New(b.dir, "c"); err != nil {
		t.Fatal(err)
	}
	b.base, err = snapshot.Save(ctx, snapshot.From{Endpoint: cli.Endpoints()[0], SpoolDir: t.TempDir()}, b.store, snapshot.Source{Cluster: "c", Epoch: 1}, snapshot.Encryption{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.next = b.base.Revision + 1
	return b
}

// put is an event of the next revision: key = value on lease (0: none).
func (b *backup) put(key, value string, lease int64) *mvccpb.Event {
	ev := &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value), Lease: lease,
		CreateRevision: b.next, ModRevision: b.next, Version: 1}}
	b.next++
	return ev
}

// store writes seg as the chain's next delta, as the recorder does.
func (b *backup) storeSegment(t *testing.T, seg snapshot.Segment) snapshot.Meta {
	t.Helper()
	ctx := context.Background()
	plain, err := seg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var enc bytes.Buffer
	size, sum, err := snapshot.Encode(&enc, bytes.NewReader(plain), snapshot.Encryption{})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now().UTC()
	m := snapshot.Meta{Cluster: "c", Epoch: 1, Kind: snapshot.KindDelta, Base: b.base.Name, FirstRevision: seg.First(), Revision: seg.Last(),
		Events: len(seg.Events), Created: created, Codec: snapshot.Codec, EtcdVersion: b.base.EtcdVersion, Size: size, SHA256: sum}
	m.Name = snapshot.DeltaName("c", 1, m.Revision, created, false)
	if m.StoredSize, err = b.store.Put(ctx, m.Name, bytes.NewReader(enc.Bytes())); err != nil {
		t.Fatal(err)
	}
	if err := b.store.PutMeta(ctx, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// fourSegments stores 4 deltas of 50 puts each (one revision each):
// with the snapshot's 21 keys, 221 keys.
func (b *backup) fourSegments(t *testing.T) []snapshot.Meta {
	t.Helper()
	var out []snapshot.Meta
	for s := range 4 {
		var seg snapshot.Segment
		for i := range 50 {
			seg.Events = append(seg.Events, b.put(fmt.Sprintf("delta/%d/%03d", s, i), strings.Repeat("d", 100), 0))
		}
		out = append(out, b.storeSegment(t, seg))
	}
	return out
}

var errReset = fmt.Errorf("read tcp 127.0.0.1:51234->127.0.0.1:9000: %w", syscall.ECONNRESET)

// flakyStore is a real store whose reads fail as a network store's do:
// fail[name] failures (-1: every time) at Open, or midRead[name] in the
// middle of the body; onOpen runs before every Open; delay slows each.
type flakyStore struct {
	snapshot.Store
	mu      sync.Mutex
	fail    map[string]int
	midRead map[string]int
	opens   map[string]int
	delay   time.Duration
	onOpen  func(name string)
}

func (s *flakyStore) Open(ctx context.Context, name string) (io.ReadCloser, snapshot.Meta, error) {
	if s.onOpen != nil {
		s.onOpen(name)
	}
	if err := ctx.Err(); err != nil {
		return nil, snapshot.Meta{}, err
	}
	time.Sleep(s.delay)
	s.mu.Lock()
	if s.opens == nil {
		s.opens = map[string]int{}
	}
	s.opens[name]++
	failOpen, failRead := s.fail[name], s.midRead[name]
	if failOpen > 0 {
		s.fail[name]--
	}
	if failRead > 0 {
		s.midRead[name]--
	}
	s.mu.Unlock()
	if failOpen != 0 {
		return nil, snapshot.Meta{}, errReset
	}
	rc, m, err := s.Store.Open(ctx, name)
	if err != nil || failRead == 0 {
		return rc, m, err
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, m, err
	}
	return io.NopCloser(io.MultiReader(bytes.NewReader(b[:len(b)/2]), errReader{errReset})), m, nil
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// install runs InstallNextEpoch into root and counts the calls of next.
func install(ctx context.Context, t *testing.T, root string, src datadir.Source) (datadir.Installed, int, error) {
	t.Helper()
	calls := 0
	peer := clustertest.FreeURL(t)
	got, err := datadir.InstallNextEpoch(ctx, root, src, func(snapshot.Meta) (datadir.Incarnation, error) {
		calls++
		return datadir.Incarnation{Cluster: "c", Name: "m0", PeerURL: peer.String(), Token: "t2", Epoch: 2, RevisionBump: 1000}, nil
	}, "restored-over")
	return got, calls, err
}

// keys reads every key of the installed member (etcd started on it).
func keys(t *testing.T, root string) map[string]*mvccpb.KeyValue {
	t.Helper()
	cli := startEtcd(t, datadir.Dir{Root: root}.EtcdDir(), "m0")
	resp, err := cli.Get(context.Background(), "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mvccpb.KeyValue{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = kv
	}
	return out
}

// chainEnd is the revision the planner compares: the newest snapshot's
// chain end as the store lists it.
func chainEnd(t *testing.T, store snapshot.Store) int64 {
	t.Helper()
	list, err := store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, _, end, _ := snapshot.Newest(list)
	return end
}

// TestRestoreRetriesAMomentaryReadError: a connection reset opening the
// second segment and another in the middle of the third are read again:
// the install holds every key of the snapshot and of all four deltas
// (today's main installed the first segment's and said nothing).
func TestRestoreRetriesAMomentaryReadError(t *testing.T) {
	b := newBackup(t, 600)
	chain := b.fourSegments(t)
	store := &flakyStore{Store: b.store, fail: map[string]int{chain[1].Name: 1}, midRead: map[string]int{chain[2].Name: 1}}
	root := t.TempDir()
	got, calls, err := install(context.Background(), t, root, datadir.Source{Store: store, Name: b.base.Name, Want: chainEnd(t, b.store)})
	if err != nil || calls != 1 {
		t.Fatalf("install: %v (next called %d times), want success", err, calls)
	}
	if got.Replay.Stopped != "" || got.Replay.Segments != 4 || got.Replay.Last != chain[3].Revision || got.End != chain[3].Revision {
		t.Fatalf("replay %+v, end %d: want all 4 segments to revision %d", got.Replay, got.End, chain[3].Revision)
	}
	if n := len(keys(t, root)); n != b.snapKeys+200 {
		t.Fatalf("the installed member holds %d keys, want %d", n, b.snapKeys+200)
	}
	if store.opens[chain[1].Name] != 2 || store.opens[chain[2].Name] != 2 {
		t.Fatalf("opens %v: want segments 2 and 3 read twice", store.opens)
	}
}

// TestRestoreRefusesBeforeRecordingWhenTheStoreStaysDown: a segment that
// cannot be read however often it is tried fails the install before the
// next epoch is recorded: next is never called and the member's data dir
// is as it was (not set aside, nothing moved in).
func TestRestoreRefusesBeforeRecordingWhenTheStoreStaysDown(t *testing.T) {
	b := newBackup(t, 600)
	chain := b.fourSegments(t)
	store := &flakyStore{Store: b.store, fail: map[string]int{chain[1].Name: -1}}
	root := t.TempDir()
	d := datadir.Dir{Root: root}
	if err := d.WriteMeta(datadir.Meta{Cluster: "c", Name: "m0", Token: "t1", Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	_, calls, err := install(context.Background(), t, root, datadir.Source{Store: store, Name: b.base.Name, Want: chainEnd(t, b.store)})
	if err == nil || !errors.Is(err, syscall.ECONNRESET) || calls != 0 {
		t.Fatalf("install with segment 2 unreadable: %v, next called %d times; want the read error and no record", err, calls)
	}
	if m, err := d.ReadMeta(); err != nil || m.Token != "t1" {
		t.Fatalf("the member's data changed: %+v, %v", m, err)
	}
	if _, err := os.Stat(d.AsideDir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("something was set aside: %v", err)
	}
	if store.opens[chain[1].Name] < 2 {
		t.Fatalf("segment 2 opened %d times: want retries", store.opens[chain[1].Name])
	}
}

// TestRestoreCancelledDuringAFetchIsAnError: the member's context ending
// (a SIGTERM) while the first segment is fetched is an error, never an
// install of the snapshot alone.
func TestRestoreCancelledDuringAFetchIsAnError(t *testing.T) {
	b := newBackup(t, 600)
	chain := b.fourSegments(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := &flakyStore{Store: b.store, onOpen: func(name string) {
		if name == chain[0].Name {
			cancel()
		}
	}}
	root := t.TempDir()
	_, calls, err := install(ctx, t, root, datadir.Source{Store: store, Name: b.base.Name, Want: chainEnd(t, b.store)})
	if !errors.Is(err, context.Canceled) || calls != 0 {
		t.Fatalf("install cancelled during a fetch: %v, next called %d times; want context.Canceled and no record", err, calls)
	}
	if (datadir.Dir{Root: root}).HasEtcdData() {
		t.Fatal("a cancelled install left etcd data in the member's dir")
	}
}

// TestRestoreRefusesADamagedSegmentBeforeRecording: a segment failing its
// checksum ends the verified chain before the end the planner compared:
// the install is refused before next (ChainShortError naming the segment
// and the true end). Chosen again for that end (the task's observation
// leaves the damaged segment out), it installs the segments before it.
func TestRestoreRefusesADamagedSegmentBeforeRecording(t *testing.T) {
	b := newBackup(t, 600)
	chain := b.fourSegments(t)
	want := chainEnd(t, b.store)
	victim := filepath.Join(b.dir, chain[1].Name)
	damageFile(t, victim)
	root := t.TempDir()
	_, calls, err := install(context.Background(), t, root, datadir.Source{Store: b.store, Name: b.base.Name, Want: want})
	var short *datadir.ChainShortError
	if !errors.As(err, &short) || calls != 0 || short.End != chain[0].Revision || short.Damaged != chain[1].Name || short.Want != want {
		t.Fatalf("install over a damaged segment: %v (%+v), next called %d times; want refused at revision %d naming %s", err, short, calls, chain[0].Revision, chain[1].Name)
	}
	if (datadir.Dir{Root: root}).HasEtcdData() {
		t.Fatal("a refused install left etcd data in the member's dir")
	}
	got, calls, err := install(context.Background(), t, root, datadir.Source{Store: b.store, Name: b.base.Name, Want: short.End})
	if err != nil || calls != 1 || got.Replay.Segments != 1 || !strings.Contains(got.Replay.Stopped, chain[1].Name) {
		t.Fatalf("install for the true end: %v, %d calls, %+v", err, calls, got.Replay)
	}
	if n := len(keys(t, root)); n != b.snapKeys+50 {
		t.Fatalf("installed %d keys, want the snapshot's and the first segment's %d", n, b.snapKeys+50)
	}
}

// TestReplayKeepsLeasesThatExpireDuringIt: a snapshot key on a 2 s lease,
// a delta key on another 2 s lease, and a replay that takes longer than
// both (slow reads, and 3000 keys each on its own lease): etcd started on
// the installed dir holds every key on its lease, and each lease has its
// recorded TTL. A replay through a live member counted the leases down
// and revoked them midway (their keys lost, the read-back failing).
func TestReplayKeepsLeasesThatExpireDuringIt(t *testing.T) {
	const short, many = 2, 3000
	b := newBackup(t, short)
	const deltaLease = 0x7e57
	leases := map[string]int64{} // key -> lease
	ttls := map[int64]int64{deltaLease: short}
	var seg snapshot.Segment
	seg.Leases = append(seg.Leases, snapshot.Lease{ID: deltaLease, TTL: short})
	seg.Events = append(seg.Events, b.put("delta/leased", "on a short lease", deltaLease))
	leases["delta/leased"] = deltaLease
	var chain []snapshot.Meta
	for i := range many {
		id := int64(0x10000 + i)
		key := fmt.Sprintf("delta/many/%04d", i)
		seg.Leases = append(seg.Leases, snapshot.Lease{ID: id, TTL: 600})
		seg.Events = append(seg.Events, b.put(key, "v", id))
		leases[key], ttls[id] = id, 600
		if len(seg.Events) >= 1000 {
			chain = append(chain, b.storeSegment(t, seg))
			seg = snapshot.Segment{}
		}
	}
	if len(seg.Events) > 0 {
		chain = append(chain, b.storeSegment(t, seg))
	}
	store := &flakyStore{Store: b.store, delay: time.Duration(short) * time.Second / time.Duration(len(chain))}
	root := t.TempDir()
	start := time.Now()
	got, calls, err := install(context.Background(), t, root, datadir.Source{Store: store, Name: b.base.Name, Want: chainEnd(t, b.store)})
	took := time.Since(start)
	if err != nil || calls != 1 {
		t.Fatalf("install: %v (%d calls)", err, calls)
	}
	t.Logf("install of a snapshot + %d segments (%d events, %d leases): %s, replay %+v", len(chain), got.Replay.Events, many+1, took, got.Replay)
	if took < time.Duration(short)*time.Second {
		t.Fatalf("the install took %s, not longer than the %d s TTL: the test proves nothing", took, short)
	}
	cli := startEtcd(t, datadir.Dir{Root: root}.EtcdDir(), "m0")
	ctx := context.Background()
	resp, err := cli.Get(ctx, "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	kvs := map[string]*mvccpb.KeyValue{}
	for _, kv := range resp.Kvs {
		kvs[string(kv.Key)] = kv
	}
	if len(kvs) != b.snapKeys+many+1 {
		t.Fatalf("etcd on the installed dir holds %d keys, want %d", len(kvs), b.snapKeys+many+1)
	}
	sl := kvs["snap/leased"]
	if sl == nil || sl.Lease == 0 {
		t.Fatalf("the snapshot's leased key: %v", sl)
	}
	leases["snap/leased"], ttls[sl.Lease] = sl.Lease, short
	for key, id := range leases {
		if kv := kvs[key]; kv == nil || kv.Lease != id {
			t.Fatalf("%s: %v, want it on lease %x", key, kv, id)
		}
	}
	for _, id := range []int64{sl.Lease, deltaLease, 0x10000, 0x10000 + many - 1} {
		r, err := cli.TimeToLive(ctx, clientv3.LeaseID(id), clientv3.WithAttachedKeys())
		if err != nil {
			t.Fatal(err)
		}
		if r.GrantedTTL != ttls[id] || r.TTL <= 0 || len(r.Keys) != 1 {
			t.Fatalf("lease %x: granted TTL %d, remaining %d, %d keys; want %d, alive, its key", id, r.GrantedTTL, r.TTL, len(r.Keys), ttls[id])
		}
	}
	if got.Replay.Txns == 0 || got.Replay.Keys != many+1 {
		t.Fatalf("replay %+v", got.Replay)
	}
}

// damageFile flips a byte in the middle of the file at path (a stored
// object): its checksum fails.
func damageFile(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}
