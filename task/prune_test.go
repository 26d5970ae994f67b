package task

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

// writeDataDir writes dir as a data dir set aside or carried: metadata
// meta (none when nil) and a real bbolt backend whose newest key is at
// revision rev (none when 0).
func writeDataDir(t *testing.T, dir string, meta *datadir.Meta, rev int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "etcd", "member", "snap"), 0o700); err != nil {
		t.Fatal(err)
	}
	if meta != nil {
		b, _ := json.Marshal(meta)
		if err := os.WriteFile(filepath.Join(dir, datadir.MetaFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if rev == 0 {
		return
	}
	db, err := bolt.Open(filepath.Join(dir, "etcd", "member", "snap", "db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("key"))
		if err != nil {
			return err
		}
		k := make([]byte, 17) // etcd's revision key: main, '_', sub
		binary.BigEndian.PutUint64(k, uint64(rev))
		k[8] = '_'
		return b.Put(k, []byte("v"))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func ls(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// Pruning what was set aside (invariant 7): asides and data carried from earlier
// allocations grow without bound. A member that runs as a healthy voter of
// the confirmed record prunes them by the documented rule (task/backup/prune.go),
// from its loop: the newest two asides, the newest copy of every
// incarnation (by revision), unreadable ones and any of an epoch newer
// than the record stay; an earlier allocation's directory of this cluster
// whose member left goes aside first; a live instance's directory and a
// current member's are left alone. Real directories, real bbolt backends,
// a real embedded etcd and the real loop.
func TestAsidesPrunedByTheRule(t *testing.T) {
	k := newKit(t, "m0", "m1")
	k.prov.Set(k.cl.Provider.Static[:1])
	m0 := k.member("m0", nil)
	k.seedForTest(m0)
	rec, err := k.co.Record(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	self, err := m0.dir.ReadMeta()
	if err != nil || self.MemberID == 0 {
		t.Fatalf("m0's metadata: %+v %v", self, err)
	}
	old := func() *datadir.Meta { return &datadir.Meta{Cluster: "kit", Name: "m9", Token: "old-token", Epoch: 0} }
	running := func() *datadir.Meta {
		return &datadir.Meta{Cluster: "kit", Name: "m0", Token: rec.Token, Epoch: rec.Epoch}
	}
	asides := m0.dir.AsideDir()
	for _, a := range []struct {
		name string
		meta *datadir.Meta
		rev  int64
	}{
		{"20200101T000000.000000000Z-foreign", &datadir.Meta{Cluster: "other", Token: "x", Epoch: 1}, 10},
		{"20200102T000000.000000000Z-removed", old(), 100},
		{"20200103T000000.000000000Z-removed", old(), 300}, // the newest copy of the old incarnation
		{"20200104T000000.000000000Z-removed", old(), 200},
		{"20200105T000000.000000000Z-removed", running(), 50},                                                           // m0's own data is newer
		{"20200105T120000.000000000Z-foreign", &datadir.Meta{Cluster: "kit", Token: "future", Epoch: rec.Epoch + 4}, 5}, // an epoch the record has not reached: never
		{"20200106T000000.000000000Z-foreign", &datadir.Meta{Cluster: "kit", Token: "future", Epoch: rec.Epoch + 4}, 10},
		{"20200107T000000.000000000Z-unreadable", nil, 0},
		{"20200108T000000.000000000Z-removed", running(), 60},
	} {
		writeDataDir(t, filepath.Join(asides, a.name), a.meta, a.rev)
	}
	data := filepath.Dir(m0.dir.Root)
	writeDataDir(t, filepath.Join(data, "m-gone", "current"), old(), 250)
	current := running()
	current.Name, current.MemberID = "m-member", self.MemberID // listed in the membership
	writeDataDir(t, filepath.Join(data, "m-member", "current"), current, 70)
	writeDataDir(t, filepath.Join(data, "m1", "current"), old(), 80) // a live instance's

	k.prov.Set(k.cl.Provider.Static) // m1 is a live instance (not started)
	o, err := m0.observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mayPrune := func(o planner.Observation) bool {
		o.SideJobs.PruneDue = true
		return planner.PlanSideJobs(o).PruneAsides
	}
	if !mayPrune(o) {
		t.Fatalf("a healthy voter of the confirmed record may not prune: %+v", o)
	}
	for name, broken := range map[string]func(){
		"record unconfirmed": func() { o.Record.ClusterID = 0 },
		"another epoch":      func() { o.Record.Epoch++ },
		"self a learner":     func() { o.Members[0].Learner = true },
		"self unhealthy":     func() { o.Members[0].Healthy = false },
		"not running":        func() { o.Running = false },
	} {
		o2, _ := m0.observe(context.Background())
		o = o2
		broken()
		if mayPrune(o) {
			t.Errorf("%s: pruning allowed", name)
		}
	}

	stop := runLoop(t, m0)
	defer stop()
	want := []string{
		"20200101T000000.000000000Z-foreign", "20200103T000000.000000000Z-removed", "20200105T120000.000000000Z-foreign", "20200106T000000.000000000Z-foreign",
		"20200107T000000.000000000Z-unreadable", "20200108T000000.000000000Z-removed",
	}
	var got []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got = ls(t, asides)
		if len(got) == len(want)+1 && !slices.Contains(got, "20200102T000000.000000000Z-removed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("asides never pruned: %v; m0 %s", got, m0.reason())
		}
	}
	carried := got[len(got)-1] // set aside now: the newest
	if !slices.Equal(got[:len(want)], want) || !strings.HasSuffix(carried, "-carried-m-gone") {
		t.Fatalf("asides left %v, want %v and the carried m-gone", got, want)
	}
	if rev := datadir.BackendRevision(filepath.Join(asides, carried, "etcd")); rev != 250 {
		t.Fatalf("carried data's revision %d, want 250 (moved, not rewritten)", rev)
	}
	if entries := ls(t, data); !slices.Equal(entries, []string{"m-member", "m0", "m1"}) {
		t.Fatalf("data dir holds %v, want m-member (a current member's), m0 and m1 (a live instance's)", entries)
	}
}
