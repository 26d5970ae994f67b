package task

// The in-package test kit: members built by task.New on real embedded etcd
// (127.0.0.1, free ports, TLS off), the real file-lock coordinator, the
// static provider, and one fault-injecting wrapper around the coordinator.
// Actions are called directly with a constructed planner.Decision, so each
// test pins what one action does, in seconds.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/coord/local"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/identity"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/provider/static"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// kit is one test cluster: its definition, provider and coordinator.
type kit struct {
	t    *testing.T
	dir  string
	cl   *config.Cluster
	prov *static.Provider
	co   *local.Coordinator
	// identities, optional, verifies workload identities for the
	// members made after it is set (Options.Identities).
	identities *identity.Verifier
}

// newKit defines a cluster of the named members on free local ports.
func newKit(t *testing.T, names ...string) *kit {
	t.Helper()
	dir := t.TempDir()
	ports := clustertest.FreePorts(t, 3*len(names))
	cl := &config.Cluster{
		Name: "kit", Size: len(names), DataDir: filepath.Join(dir, "data"),
		Etcd: config.Etcd{QuotaBackendBytes: config.DefaultQuotaBackendBytes, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h",
			HeartbeatInterval: 50 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond, SnapshotCount: 10000},
		TLS:           config.TLS{Mode: config.TLSOff},
		Provider:      config.Provider{Kind: config.ProviderStatic, StaleAfter: time.Second},
		Coordination:  config.Coordination{Kind: config.CoordLocal, Dir: filepath.Join(dir, "coord")},
		RecoveryGrace: 200 * time.Millisecond,
	}
	for i, n := range names {
		cl.Provider.Static = append(cl.Provider.Static, config.StaticMember{Name: n, Address: "127.0.0.1",
			ClientPort: ports[3*i], PeerPort: ports[3*i+1], StatusPort: ports[3*i+2]})
	}
	co, err := local.New(cl.Coordination.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return &kit{t: t, dir: dir, cl: cl, prov: static.New(cl.Provider.Static), co: co}
}

// member builds member name with coordinator co (the kit's when nil). The
// member's etcd, client and status server are stopped when the test ends.
func (k *kit) member(name string, co coord.Coordinator) *Member {
	k.t.Helper()
	return k.memberWith(name, co, nil)
}

// memberWith is member with a snapshot store.
func (k *kit) memberWith(name string, co coord.Coordinator, snaps *backup.Snapshots) *Member {
	k.t.Helper()
	if co == nil {
		co = k.co
	}
	m, err := New(context.Background(), Options{Cluster: k.cl, Name: name, Provider: k.prov, Coordinator: co,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "kit", Level: hclog.Warn}), LoopInterval: 100 * time.Millisecond,
		StopTimeout: 5 * time.Second, EtcdLogLevel: "error", Snapshots: snaps, Identities: k.identities})
	if err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(func() { m.halt() })
	return m
}

// halt stops what the tests started on m: a background save first (as
// shutdown does: a save streams from etcd while it uploads, and etcd's
// close would wait for the stream), then etcd, its client, the status
// server. Safe to call more than once.
func (m *Member) halt() {
	m.stopBackground()
	m.stopEtcd()
	m.closeResources()
}

// lockForTest takes the coordination lock for m, as the loop does after a
// NeedsLock decision, and reads the record as an observation would.
func (m *Member) lockForTest(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := m.opts.Coordinator.Lock(ctx, m.opts.Name)
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.lock = l
	m.mu.Unlock()
	m.readRecord(t)
}

// readRecord refreshes m.record from the coordinator (nil if absent).
func (m *Member) readRecord(t *testing.T) {
	t.Helper()
	rec, err := m.opts.Coordinator.Record(context.Background())
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case err == nil:
		m.record = &rec
	case errors.Is(err, coord.ErrNoRecord):
		m.record = nil
	default:
		t.Fatal(err)
	}
}

// memberWithMACedStore is memberWith on a file store in the kit's dir
// whose snapshots are MACed under a fixed KEK's key; snaps gives the rest.
func (k *kit) memberWithMACedStore(name string, snaps backup.Snapshots) (*Member, *file.Store, snapshot.Encryption) {
	k.t.Helper()
	key, err := snapshot.DeriveMACKey(bytes.Repeat([]byte{9}, 32), k.cl.Name)
	if err != nil {
		k.t.Fatal(err)
	}
	store, err := file.New(filepath.Join(k.dir, "snapshots"), k.cl.Name)
	if err != nil {
		k.t.Fatal(err)
	}
	snaps.Store, snaps.Encryption = store, snapshot.Encryption{MACKey: key}
	return k.memberWith(name, k.co, &snaps), store, snaps.Encryption
}

// seedForTest seeds a one-member cluster on m, waits for it to be ready,
// confirms its cluster id in the record and returns a client on it.
func (k *kit) seedForTest(m *Member) *clientv3.Client {
	k.t.Helper()
	k.seed(m)
	return k.client(m)
}

// seed is seedForTest without the plain client (TLS auto members need one
// with a certificate).
func (k *kit) seed(m *Member) {
	k.t.Helper()
	m.lockForTest(k.t)
	d := planner.Decision{Kind: planner.Seed, Name: m.opts.Name, Record: &planner.Record{Token: coord.NewToken(), Epoch: 1, Seeder: m.opts.Name}}
	if err := m.act(context.Background(), planner.Observation{}, d); err != nil {
		k.t.Fatalf("seed: %v", err)
	}
	m.waitReady(k.t)
	meta := m.waitMeta(k.t, func(mt datadir.Meta) bool { return mt.ClusterID != 0 })
	m.readRecord(k.t)
	rc := planner.Record{ClusterID: meta.ClusterID, Token: d.Record.Token, Epoch: 1, Seeder: m.opts.Name}
	if err := m.act(context.Background(), planner.Observation{}, planner.Decision{Kind: planner.RecordCluster, Record: &rc}); err != nil {
		k.t.Fatalf("confirm record: %v", err)
	}
	m.releaseLock(context.Background())
}

// client returns a client on m's client URL, closed with the test.
func (k *kit) client(m *Member) *clientv3.Client {
	k.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.clientURL(m.self)}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(func() { cli.Close() })
	return cli
}

// waitReady waits until m's etcd serves.
func (m *Member) waitReady(t *testing.T) {
	t.Helper()
	m.mu.Lock()
	e := m.proc.Server()
	m.mu.Unlock()
	if e == nil {
		t.Fatal("etcd is not running")
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		t.Fatal("etcd not ready after 20s")
	}
}

// waitMeta polls m's metadata until ok holds, and returns it.
func (m *Member) waitMeta(t *testing.T, ok func(datadir.Meta) bool) datadir.Meta {
	t.Helper()
	var last datadir.Meta
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if last, err = m.dir.ReadMeta(); err == nil && ok(last) {
			return last
		}
	}
	t.Fatalf("metadata never reached the expected state; last %+v (error %v)", last, err)
	return last
}

// reason is m's last decision and its reason.
func (m *Member) reason() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status.Decision + ": " + m.status.Reason
}

// running reports whether m's etcd runs, and with ForceNewCluster.
func (m *Member) running() (bool, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc.Server() == nil {
		return false, false
	}
	return true, m.proc.Server().Config().ForceNewCluster
}

// put writes key=val through cli.
func put(t *testing.T, cli *clientv3.Client, key, val string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, key, val); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// getVal reads key through cli, polling while the cluster elects a leader.
func getVal(t *testing.T, cli *clientv3.Client, key string) string {
	t.Helper()
	var err error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var resp *clientv3.GetResponse
		resp, err = cli.Get(ctx, key)
		cancel()
		if err == nil {
			if len(resp.Kvs) == 0 {
				return ""
			}
			return string(resp.Kvs[0].Value)
		}
	}
	t.Fatalf("get %s: %v", key, err)
	return ""
}

// errInjected is what faultyCoord returns for a failed write.
var errInjected = errors.New("injected coordinator failure")

// faultyCoord is a real coordinator whose record writes can be made to
// fail, before or after reaching the real coordinator ("crash" right after
// the write committed).
type faultyCoord struct {
	coord.Coordinator
	mu sync.Mutex
	// failUpdate makes UpdateRecord fail without writing.
	failUpdate bool
	// crashAfterUpdate makes UpdateRecord write, then report a failure,
	// as if the member died right after the write.
	crashAfterUpdate bool
	updates          []coord.Record
}

func (f *faultyCoord) UpdateRecord(ctx context.Context, l coord.Lock, r coord.Record) (coord.Record, error) {
	f.mu.Lock()
	fail, crash := f.failUpdate, f.crashAfterUpdate
	f.updates = append(f.updates, r)
	f.mu.Unlock()
	if fail {
		return coord.Record{}, fmt.Errorf("update record: %w", errInjected)
	}
	out, err := f.Coordinator.UpdateRecord(ctx, l, r)
	if err == nil && crash {
		return out, fmt.Errorf("after update record: %w", errInjected)
	}
	return out, err
}

// asideEntries lists what was set aside under m's data dir.
func (m *Member) asideEntries(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(m.dir.AsideDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
