package task

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A corrupt set-aside copy does not break /health and /status (review
// rev14b (data), TestReviewACorruptAsideDoesNotBreakStatus). A copy set
// aside as corrupt (AsideCorrupt, AsideUnreadable: the reason it was set
// aside) may hold a backend whose pages do not read. /health and /status
// read every aside's backend (asideCache.list -> readAsides ->
// datadir.ReadBackendRevision). A page that fails bbolt's checks panicked
// inside the handler: /health and /status failed on every request (the
// cache was never filled, so every request read it again) while etcd
// served. Peers counted the member unreachable (no recovery beside a
// silent instance) and 'recover' refused for it.
func TestACorruptAsideDoesNotBreakStatus(t *testing.T) {
	k := newKit(t, "m0")
	m0 := k.member("m0", nil)
	dir := m0.dir.AsideDir()
	plantCorruptAside(t, dir)
	for range 2 { // the cache is not filled by a panic: every request reads it again
		var panicked any
		func() {
			defer func() { panicked = recover() }()
			st, _ := m0.health(context.Background()) // what /health and /status serve
			if len(st.Asides) != 1 || st.Asides[0].Revision != 0 {
				t.Errorf("the corrupt copy is listed as %+v, want one copy of unknown revision (0)", st.Asides)
			}
		}()
		if panicked != nil {
			t.Fatalf("m0's /health and /status panic on a corrupt set-aside copy: %v", panicked)
		}
	}
}

// plantCorruptAside puts a set-aside copy under dir whose backend's pages
// past the meta pages read as zeros (torn writes).
func plantCorruptAside(t *testing.T, dir string) {
	t.Helper()
	copyDir := filepath.Join(dir, "20261127T101010.000000000Z-corrupt", "etcd", "member", "snap")
	if err := os.MkdirAll(copyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(copyDir, "db")
	b, err := bolt.Open(db, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists([]byte("key"))
		if err != nil {
			return err
		}
		for i := range 2000 {
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
	// Torn writes: every page past the two meta pages reads as zeros.
	raw, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	clear(raw[2*ps:])
	if err := os.WriteFile(db, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}
