package backup

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/etcd-nomad/etcd-nomad/datadir"
)

// plantAside puts a set-aside copy name under dir of incarnation (kit,
// token, epoch) whose backend holds revisions 1..revs; torn: its pages
// past the meta pages read as zeros (bbolt panics reading them).
func plantAside(t *testing.T, dir, name, token string, epoch uint64, revs int, torn bool) {
	t.Helper()
	root := filepath.Join(dir, name)
	snap := filepath.Join(root, "etcd", "member", "snap")
	if err := os.MkdirAll(snap, 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(snap, "db")
	b, err := bolt.Open(db, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists([]byte("key"))
		if err != nil {
			return err
		}
		for i := range revs {
			k := make([]byte, 17)
			binary.BigEndian.PutUint64(k, uint64(i+1))
			if err := bk.Put(k, []byte(fmt.Sprintf("value-%d-%0100d", i, i))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ps := b.Info().PageSize
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if torn {
		raw, err := os.ReadFile(db)
		if err != nil {
			t.Fatal(err)
		}
		clear(raw[2*ps:])
		if err := os.WriteFile(db, raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mb, _ := json.Marshal(datadir.Meta{Cluster: "kit", Name: "m0", Token: token, Epoch: epoch, MemberID: 7, ClusterID: 0xa1})
	if err := os.WriteFile(filepath.Join(root, datadir.MetaFile), mb, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Review rev14c-data R2 (TestRev14cUnreadableAsideIsNotPrunedForAnOlderReadableCopy): a set-aside copy whose backend does not read (revision
// unknown, 0) loses the "newest copy of its incarnation" comparison to any
// readable copy of the same incarnation at a lower revision, and is
// deleted by the prune, although it may be the newest (the only) copy of
// that incarnation's writes past the readable one's revision (its WAL, and
// every page that still reads). Before fix14b the read panicked and
// nothing was pruned.
func TestAnUnreadableAsideIsNotPrunedForAnOlderReadableCopy(t *testing.T) {
	m0 := newForTest(t, "m0", nil)
	dir := m0.dir.AsideDir()
	plantAside(t, dir, "20261127T090000.000000000Z-removed", "tokA", 1, 500, false)
	plantAside(t, dir, "20261127T100000.000000000Z-corrupt", "tokA", 1, 2000, true)
	plantAside(t, dir, "20261127T110000.000000000Z-foreign", "tokB", 2, 10, false)
	plantAside(t, dir, "20261127T120000.000000000Z-foreign", "tokB", 2, 10, false)
	if err := m0.pruneAsides(incarnationKey{"kit", "tokB", 2}, func(string) bool { return true }, func(uint64) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "20261127T100000.000000000Z-corrupt")); err != nil {
		t.Fatalf("the unreadable copy of tokA epoch 1 (writes up to revision 2000) was pruned; the readable copy at revision 500 was kept: %v", err)
	}
}

// A corrupt set-aside copy's backend read in the background prune (review rev14b (data),
// TestReviewACorruptAsideDoesNotCrashThePrune; startPruneAsides' goroutine
// has no recover): a panic there ended the member's process, etcd with it,
// at every prune.
func TestACorruptAsideDoesNotCrashThePrune(t *testing.T) {
	m0 := newForTest(t, "m0", nil)
	plantAside(t, m0.dir.AsideDir(), "20261127T101010.000000000Z-corrupt", "tok", 2, 2000, true)
	var panicked any
	func() {
		defer func() { panicked = recover() }()
		_ = m0.pruneAsides(incarnationKey{"kit", "tok", 2}, func(string) bool { return true }, func(uint64) bool { return true })
	}()
	if panicked != nil {
		t.Fatalf("the prune panics on a corrupt set-aside copy (its goroutine has no recover: the process ends): %v", panicked)
	}
}
