package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
)

func TestContendersCreateOneRecord(t *testing.T) {
	c, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	created := make(chan string, 8)
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			l, err := c.Lock(ctx, name)
			if err != nil {
				errs <- err
				return
			}
			defer l.Unlock(ctx)
			_, err = c.CreateRecord(ctx, l, coord.Record{Token: name, Epoch: 1, Seeder: name})
			switch {
			case err == nil:
				created <- name
			case !errors.Is(err, coord.ErrRecordExists):
				errs <- err
			}
		}(fmt.Sprintf("m%d", i))
	}
	wg.Wait()
	close(created)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var winners []string
	for n := range created {
		winners = append(winners, n)
	}
	if len(winners) != 1 {
		t.Fatalf("want exactly one seeder, got %v", winners)
	}
	r, err := c.Record(ctx)
	if err != nil || r.Seeder != winners[0] {
		t.Fatalf("record %+v (%v), want seeder %s", r, err, winners[0])
	}
}

func TestStaleHolderIsFenced(t *testing.T) {
	c, _ := New(t.TempDir())
	ctx := context.Background()
	a, err := c.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.CreateRecord(ctx, a, coord.Record{Token: "t", Epoch: 1, Seeder: "a"})
	if err != nil {
		t.Fatal(err)
	}
	a.Unlock(ctx)
	b, err := c.Lock(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unlock(ctx)
	if b.Fence() <= a.Fence() {
		t.Fatalf("fence did not grow: %d then %d", a.Fence(), b.Fence())
	}
	rec.ClusterID = 7
	if _, err := c.UpdateRecord(ctx, a, rec); !errors.Is(err, coord.ErrLockLost) {
		t.Fatalf("stale holder's write: got %v, want ErrLockLost", err)
	}
	got, err := c.UpdateRecord(ctx, b, rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateRecord(ctx, b, rec); !errors.Is(err, coord.ErrConflict) {
		t.Fatalf("update with old index: got %v, want ErrConflict", err)
	}
	if got.ClusterID != 7 {
		t.Fatalf("record not updated: %+v", got)
	}
}

func TestLoadOrStoreKeepsFirst(t *testing.T) {
	c, _ := New(t.TempDir())
	ctx := context.Background()
	var wg sync.WaitGroup
	results := make([][]byte, 6)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			b, err := c.LoadOrStore(ctx, "ca", []byte(fmt.Sprint(i)))
			if err != nil {
				t.Error(err)
			}
			results[i] = b
		}(i)
	}
	wg.Wait()
	for _, r := range results {
		if string(r) != string(results[0]) {
			t.Fatalf("contenders saw different values: %q", results)
		}
	}
}

// Load only reads: ErrNotStored when nothing is stored, and nothing is
// created by asking.
func TestLoadOnlyReads(t *testing.T) {
	dir := t.TempDir()
	c, _ := New(dir)
	ctx := context.Background()
	if _, err := c.Load(ctx, "ca"); !errors.Is(err, coord.ErrNotStored) {
		t.Fatalf("Load of a missing key: %v, want ErrNotStored", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kv-ca")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load created the key: %v", err)
	}
	if _, err := c.LoadOrStore(ctx, "ca", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Load(ctx, "ca"); err != nil || string(b) != "one" {
		t.Fatalf("Load: %q %v", b, err)
	}
}

// Store overwrites the value Load reads (the snapshot lease).
func TestStoreOverwritesWhatLoadReads(t *testing.T) {
	c, _ := New(t.TempDir())
	ctx := context.Background()
	for _, v := range []string{"one", "two"} {
		if err := c.Store(ctx, "lease", []byte(v)); err != nil {
			t.Fatal(err)
		}
		if b, err := c.Load(ctx, "lease"); err != nil || string(b) != v {
			t.Fatalf("Load after Store(%q): %q %v", v, b, err)
		}
	}
}
