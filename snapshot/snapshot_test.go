package snapshot_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	etcdutl "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// startEtcd runs a real one-member etcd on dataDir (existing data is used).
func startEtcd(t *testing.T, dataDir string) (*clientv3.Client, string) {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "s0"
	cfg.Dir = dataDir
	peer, client := clustertest.FreeURL(t), clustertest.FreeURL(t)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = "s0=" + peer.String()
	cfg.LogLevel = "error"
	if _, err := os.Stat(filepath.Join(dataDir, "member")); err == nil {
		// A restored data dir carries its own peer URL; keep it.
		cfg.InitialCluster = ""
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli, client.String()
}

func fill(t *testing.T, cli *clientv3.Client, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := cli.Put(context.Background(), fmt.Sprintf("k/%05d", i), strings.Repeat("v", 100)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSaveVerifyFetchRestore(t *testing.T) {
	cli, ep := startEtcd(t, filepath.Join(t.TempDir(), "etcd"))
	fill(t, cli, 500)
	store, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := snapshot.Passphrase("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := snapshot.Save(ctx, snapshot.From{Endpoint: ep}, store, snapshot.Source{Cluster: "c", ClusterID: "abc", Epoch: 1}, enc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Revision < 501 || m.Size == 0 || len(m.SHA256) != 64 || !m.Encrypted || m.StoredSize >= m.Size {
		t.Fatalf("meta %+v", m)
	}
	list, err := store.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != m.Name {
		t.Fatalf("list %v %v", list, err)
	}
	if _, err := snapshot.Verify(ctx, store, m.Name, enc, nil); err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	if _, err := snapshot.FetchInto(ctx, store, m.Name, restored, enc, nil); err != nil {
		t.Fatal(err)
	}
	peer := clustertest.FreeURL(t)
	if err := snapshot.Restore(snapshot.RestoreOptions{DataDir: restored, Name: "s0", PeerURL: peer.String(), Token: "new", RevisionBump: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := snapshot.Restore(snapshot.RestoreOptions{DataDir: restored, Name: "s0", PeerURL: peer.String(), Token: "new"}); err == nil {
		t.Fatal("restore over an existing data dir was allowed")
	}
	cli2, _ := startEtcd(t, restored)
	resp, err := cli2.Get(ctx, "k/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 500 {
		t.Fatalf("restored %v keys (%v), want 500", resp.Count, err)
	}
	if resp.Header.Revision < m.Revision+1000 {
		t.Fatalf("revision after restore %d, want >= %d (snapshot %d + bump)", resp.Header.Revision, m.Revision+1000, m.Revision)
	}
}

// A flipped byte, a truncated object and the wrong key are each refused
// with a clear error, and nothing is written.
func TestDamagedSnapshotsAreRefused(t *testing.T) {
	cli, ep := startEtcd(t, filepath.Join(t.TempDir(), "etcd"))
	fill(t, cli, 300)
	dir := filepath.Join(t.TempDir(), "store")
	store, _ := file.New(dir, "c")
	enc, _ := snapshot.Passphrase("right")
	ctx := context.Background()
	m, err := snapshot.Save(ctx, snapshot.From{Endpoint: ep}, store, snapshot.Source{Cluster: "c", Epoch: 1}, enc, nil)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(filepath.Join(dir, m.Name))
	if err != nil {
		t.Fatal(err)
	}
	wrong, _ := snapshot.Passphrase("wrong")
	plainStore, _ := file.New(filepath.Join(t.TempDir(), "plain"), "c")
	pm, err := snapshot.Save(ctx, snapshot.From{Endpoint: ep}, plainStore, snapshot.Source{Cluster: "c", Epoch: 1}, snapshot.Encryption{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	plainOrig, _ := os.ReadFile(filepath.Join(plainStore.Dir, pm.Name))
	cases := []struct {
		name  string
		store *file.Store
		obj   string
		data  []byte
		enc   snapshot.Encryption
		want  string
	}{
		{"flipped byte (encrypted)", store, m.Name, flip(orig, len(orig)/2), enc, "decrypt"},
		{"flipped byte (plain)", plainStore, pm.Name, flip(plainOrig, len(plainOrig)/2), snapshot.Encryption{}, ""},
		{"truncated", store, m.Name, orig[:len(orig)/2], enc, ""},
		{"wrong key", store, m.Name, orig, wrong, "wrong key or passphrase"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(c.store.Dir, c.obj), c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := snapshot.Verify(ctx, c.store, c.obj, c.enc, nil); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("verify: got %v, want an error mentioning %q", err, c.want)
			}
			out := filepath.Join(t.TempDir(), "out.db")
			if _, err := snapshot.Fetch(ctx, c.store, c.obj, out, c.enc, nil); err == nil {
				t.Fatal("fetch of a damaged snapshot succeeded")
			}
			if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
				t.Fatalf("fetch left files behind: %v", ents)
			}
		})
	}
	// A snapshot whose content is intact but does not match its record.
	if err := os.WriteFile(filepath.Join(plainStore.Dir, pm.Name), plainOrig, 0o600); err != nil {
		t.Fatal(err)
	}
	pm.SHA256 = strings.Repeat("0", 64)
	if err := plainStore.PutMeta(ctx, pm); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Verify(ctx, plainStore, pm.Name, snapshot.Encryption{}, nil); !errors.Is(err, snapshot.ErrChecksum) {
		t.Fatalf("checksum mismatch: got %v", err)
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0xff
	return c
}

func TestRetentionKeepsCountAndNewest(t *testing.T) {
	now := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	var list []snapshot.Meta
	for i := 0; i < 10; i++ {
		list = append(list, snapshot.Meta{Name: fmt.Sprint(i), Created: now.Add(-time.Duration(i) * 24 * time.Hour)})
	}
	exp := snapshot.Expired(list, 3, 0, now)
	if len(exp) != 7 {
		t.Fatalf("keep 3 of 10: expired %d", len(exp))
	}
	for _, m := range exp {
		if m.Name == "0" || m.Name == "1" || m.Name == "2" {
			t.Fatalf("expired a kept snapshot %s", m.Name)
		}
	}
	exp = snapshot.Expired(list, 100, 36*time.Hour, now)
	if len(exp) != 8 {
		t.Fatalf("max age 36h: expired %d, want 8", len(exp))
	}
	// Everything too old, keep count 0: the newest still stays.
	exp = snapshot.Expired(list[5:], 0, time.Hour, now)
	if len(exp) != 4 {
		t.Fatalf("the newest was not kept: expired %d of 5", len(exp))
	}
	for _, m := range exp {
		if m.Name == "5" {
			t.Fatal("the newest snapshot was expired")
		}
	}
}

// TestVerifyRefusesWrongEtcdHashThatTheRecordAgreesWith: the recorded
// sha256 and size only say the object is what was saved; a plaintext whose
// trailing 32 bytes are not the sha256 of the database before them (a
// stream cut and padded, a writer that never appended etcd's hash) must
// still be refused, by verify and by fetch, with the etcd-hash error.
func TestVerifyRefusesWrongEtcdHashThatTheRecordAgreesWith(t *testing.T) {
	ctx := context.Background()
	store, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	db := []byte(strings.Repeat("not really a bbolt file, but any bytes will do ", 2000))
	good := sha256.Sum256(db)
	plain := append(append([]byte{}, db...), good[:]...)
	plain[len(plain)-1] ^= 0x01 // the last of etcd's 32 hash bytes is wrong
	var obj bytes.Buffer
	size, sum, err := snapshot.Encode(&obj, bytes.NewReader(plain), snapshot.Encryption{})
	if err != nil {
		t.Fatal(err)
	}
	name := snapshot.ObjectName("c", 1, 1, time.Now(), false)
	stored, err := store.Put(ctx, name, &obj)
	if err != nil {
		t.Fatal(err)
	}
	// The record agrees with the (wrong) plaintext.
	m := snapshot.Meta{Name: name, Cluster: "c", Epoch: 1, Revision: 1, Created: time.Now().UTC(), Size: size, SHA256: sum, StoredSize: stored, Codec: snapshot.Codec}
	if err := store.PutMeta(ctx, m); err != nil {
		t.Fatal(err)
	}
	const want = "etcd's own hash"
	if _, err := snapshot.Verify(ctx, store, name, snapshot.Encryption{}, nil); !errors.Is(err, snapshot.ErrChecksum) || !strings.Contains(err.Error(), want) {
		t.Fatalf("verify: got %v, want %v mentioning %q", err, snapshot.ErrChecksum, want)
	}
	out := filepath.Join(t.TempDir(), "out.db")
	if _, err := snapshot.Fetch(ctx, store, name, out, snapshot.Encryption{}, nil); !errors.Is(err, snapshot.ErrChecksum) || !strings.Contains(err.Error(), want) {
		t.Fatalf("fetch: got %v, want %v mentioning %q", err, snapshot.ErrChecksum, want)
	}
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
		t.Fatalf("fetch left files behind: %v", ents)
	}
}

// contentRevision reads the revision of a plaintext snapshot file with
// etcd's own tool (etcdutl snapshot status), not with the code under test.
func contentRevision(t *testing.T, plain string) int64 {
	t.Helper()
	st, err := etcdutl.NewV3(zap.NewNop()).Status(plain)
	if err != nil {
		t.Fatalf("etcdutl status of %s: %v", plain, err)
	}
	return st.Revision
}

// TestSnapshotLabeledByItsContentNotByAnotherEndpoint: a client balances
// requests over its endpoints, so a snapshot whose status (revision) was
// read from one member could be streamed from another, a learner or an
// old epoch's member holding older data (seen: metadata revision 201,
// content revision 6, in 3 of 6 saves). Each save here must hold the
// named member's data, and its metadata must carry the revision of what
// it holds.
func TestSnapshotLabeledByItsContentNotByAnotherEndpoint(t *testing.T) {
	ctx := context.Background()
	newer, newerEP := startEtcd(t, filepath.Join(t.TempDir(), "newer"))
	fill(t, newer, 200)
	older, olderEP := startEtcd(t, filepath.Join(t.TempDir(), "older"))
	fill(t, older, 5)
	store, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	var wrong []string
	for i := range 7 {
		// Six saves of the newer member, then one of the older.
		ep, want := newerEP, int64(201)
		if i == 6 {
			ep, want = olderEP, 6
		}
		spool := t.TempDir()
		m, err := snapshot.Save(ctx, snapshot.From{Endpoint: ep, SpoolDir: spool}, store, snapshot.Source{Cluster: "c", Epoch: 1}, snapshot.Encryption{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if left, _ := os.ReadDir(spool); len(left) != 0 {
			t.Fatalf("save left its spool file behind: %v", left)
		}
		plain := filepath.Join(t.TempDir(), "snap.db")
		if _, err := snapshot.Fetch(ctx, store, m.Name, plain, snapshot.Encryption{}, nil); err != nil {
			t.Fatal(err)
		}
		if got := contentRevision(t, plain); got != m.Revision || got != want || m.Endpoint != ep || !strings.Contains(m.Name, fmt.Sprintf("-r%020d-", want)) {
			wrong = append(wrong, fmt.Sprintf("save %d of %s: metadata revision %d (name %s, endpoint %s), content revision %d, want %d", i, ep, m.Revision, m.Name, m.Endpoint, got, want))
		}
	}
	if len(wrong) > 0 {
		t.Fatalf("snapshots not labeled by their content:\n%s", strings.Join(wrong, "\n"))
	}
}

// Restore does what etcd's own restore (etcdutl) does: both restore the
// same snapshot with the same member, token and revision bump, and the two
// etcd servers started on the results hold the same keys with the same
// revisions and versions, the same leases on them, the same member and
// cluster ids, the same current revision, and both refuse a read below it
// as compacted.
func TestRestoreMatchesEtcdRestore(t *testing.T) {
	ctx := context.Background()
	cli, ep := startEtcd(t, filepath.Join(t.TempDir(), "etcd"))
	fill(t, cli, 200)
	for i := 0; i < 50; i++ { // overwritten, deleted, in transactions
		must(t)(cli.Put(ctx, fmt.Sprintf("k/%05d", i), "again"))
	}
	must(t)(cli.Delete(ctx, "k/0010", clientv3.WithPrefix()))
	must(t)(cli.Txn(ctx).Then(clientv3.OpPut("txn/a", "1"), clientv3.OpPut("txn/b", "2"), clientv3.OpDelete("k/00020")).Commit())
	lease, err := cli.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	must(t)(cli.Put(ctx, "leased", "x", clientv3.WithLease(lease.ID)))
	store, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	m, err := snapshot.Save(ctx, snapshot.From{Endpoint: ep}, store, snapshot.Source{Cluster: "c", Epoch: 1}, snapshot.Encryption{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	peerURL := clustertest.FreeURL(t)
	peer := peerURL.String()

	plain := filepath.Join(t.TempDir(), "snap.db")
	if _, err := snapshot.Fetch(ctx, store, m.Name, plain, snapshot.Encryption{}, nil); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(t.TempDir(), "etcdutl")
	if err := etcdutl.NewV3(zap.NewNop()).Restore(etcdutl.RestoreConfig{SnapshotPath: plain, Name: "s0", OutputDataDir: theirs,
		PeerURLs: []string{peer}, InitialCluster: "s0=" + peer, InitialClusterToken: "tok", RevisionBump: 1000, MarkCompacted: true}); err != nil {
		t.Fatal(err)
	}
	ours := filepath.Join(t.TempDir(), "ours")
	if _, err := snapshot.FetchInto(ctx, store, m.Name, ours, snapshot.Encryption{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := snapshot.Restore(snapshot.RestoreOptions{DataDir: ours, Name: "s0", PeerURL: peer, Token: "tok", RevisionBump: 1000}); err != nil {
		t.Fatal(err)
	}

	view := func(dir string) string {
		c, _ := startEtcd(t, dir)
		var b strings.Builder
		resp, err := c.Get(ctx, "", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "revision %d, %d keys\n", resp.Header.Revision, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			fmt.Fprintf(&b, "%s=%s create %d mod %d version %d lease %x\n", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease)
		}
		_, err = c.Get(ctx, "k/", clientv3.WithRev(m.Revision))
		fmt.Fprintf(&b, "read at the snapshot's revision: %v\n", err)
		ttl, err := c.TimeToLive(ctx, lease.ID)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "lease granted %d s\n", ttl.GrantedTTL)
		ml, err := c.MemberList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "cluster %x\n", ml.Header.ClusterId)
		for _, mem := range ml.Members {
			fmt.Fprintf(&b, "member %x %s %v learner %v\n", mem.ID, mem.Name, mem.PeerURLs, mem.IsLearner)
		}
		put, err := c.Put(ctx, "after", "x")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "next put at %d\n", put.Header.Revision)
		return b.String()
	}
	want, got := view(theirs), view(ours)
	if got != want {
		t.Fatalf("restored by etcd-nomad:\n%s\nrestored by etcdutl:\n%s", got, want)
	}
	if !strings.Contains(want, "required revision has been compacted") || !strings.Contains(want, "lease granted 3600") {
		t.Fatalf("the comparison saw no compaction or no lease:\n%s", want)
	}
	t.Logf("both:\n%.400s", want)
}
