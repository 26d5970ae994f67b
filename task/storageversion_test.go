package task

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/version"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// A data dir written by a newer etcd (its storage version, as etcd 3.7
// would record it) is never started and never set aside: the member waits
// and says how to downgrade. The same data at the embedded version starts.
func TestNewerStorageVersionIsRefused(t *testing.T) {
	k := newKit(t, "m0")
	m := k.member("m0", nil)
	cli := k.seedForTest(m)
	put(t, cli, "kept", "v")
	// etcd records its storage version a moment after it starts serving
	// (CI once halted it before); until then Status reports 3.5.0, what
	// etcd infers from a backend without one. Wait for its own version.
	embedded := func(v string) bool { return v != "" && strings.HasPrefix(version.Version, strings.TrimSuffix(v, ".0")) }
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err := cli.Status(context.Background(), cli.Endpoints()[0])
		if err == nil && embedded(st.StorageVersion) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd recorded no storage version of its own in 30s (%+v, %v)", st, err)
		}
	}
	m.halt()
	db := filepath.Join(m.dir.EtcdDir(), "member", "snap", "db")
	if got := m.dir.StorageVersion(); !embedded(got) {
		t.Fatalf("etcd %s recorded storage version %q", version.Version, got)
	}
	setStorageVersion(t, db, "3.99.0")

	o, err := m.observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d := planner.Plan(o)
	if d.Kind != planner.Wait || !strings.Contains(d.Reason, "newer than the etcd "+version.Version) || !strings.Contains(d.Reason, "etcdutl migrate --data-dir") {
		t.Fatalf("newer storage version: %s (%s), want a wait saying how to downgrade", d.Kind, d.Reason)
	}
	if len(m.asideEntries(t)) != 0 {
		t.Fatal("data of a newer etcd was set aside")
	}

	setStorageVersion(t, db, "3.6.0")
	o, err = m.observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := planner.Plan(o); d.Kind != planner.Rejoin {
		t.Fatalf("storage version 3.6.0: %s (%s), want a rejoin", d.Kind, d.Reason)
	}
}

func setStorageVersion(t *testing.T, path, v string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("storageVersion"), []byte(v))
	}); err != nil {
		t.Fatal(err)
	}
}
