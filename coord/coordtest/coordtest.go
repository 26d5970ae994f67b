// Package coordtest is the conformance suite every coordinator backend
// (coord/local, coord/consul) runs: the contract of coord.Coordinator as
// members rely on it (one seed among contenders, writes fenced by the lock,
// create-only and compare-and-set records, values stored once, the pause),
// checked the same way against each backend on its real store. Backend
// tests keep only what is theirs (a killed holder's session, ACLs).
package coordtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
)

// Open returns two coordinators of one fresh cluster (two members on the
// same store, each with its own client), stopped by the test's cleanup.
type Open func(t *testing.T) (a, b coord.Coordinator)

// storer is the overwriting store some backends have beside the
// coord.Coordinator contract (the snapshot lease).
type storer interface {
	Store(ctx context.Context, key string, value []byte) error
}

// Run runs the suite, each case on a fresh cluster from open.
func Run(t *testing.T, open Open) {
	for _, c := range []struct {
		name string
		test func(*testing.T, coord.Coordinator, coord.Coordinator)
	}{
		{"ContendersCreateOneRecord", contendersCreateOneRecord},
		{"CreateOnlyThenCompareAndSet", createOnlyThenCompareAndSet},
		{"StaleHolderIsFenced", staleHolderIsFenced},
		{"LockIsExclusive", lockIsExclusive},
		{"LoadOrStoreContendersAgree", loadOrStoreContendersAgree},
		{"LoadOnlyReadsAndDeleteRemoves", loadOnlyReadsAndDeleteRemoves},
		{"StoreOverwritesWhatLoadReads", storeOverwritesWhatLoadReads},
		{"PauseRoundTrip", pauseRoundTrip},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := open(t)
			c.test(t, a, b)
		})
	}
}

func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func lock(t *testing.T, ctx context.Context, c coord.Coordinator, holder string) coord.Lock {
	t.Helper()
	l, err := c.Lock(ctx, holder)
	if err != nil {
		t.Fatalf("lock as %s: %v", holder, err)
	}
	return l
}

// Members of both coordinators race to seed: each takes the lock, joins
// if a record exists, else creates one. Exactly one seeds, every round,
// and the record names it.
func contendersCreateOneRecord(t *testing.T, a, b coord.Coordinator) {
	ctx := timeout(t)
	var wg sync.WaitGroup
	seeded := make(chan string, 8)
	errs := make(chan error, 8)
	for i := range 8 {
		c := []coord.Coordinator{a, b}[i%2]
		name := fmt.Sprintf("m%d", i)
		wg.Go(func() {
			l, err := c.Lock(ctx, name)
			if err != nil {
				errs <- fmt.Errorf("lock as %s: %w", name, err)
				return
			}
			defer l.Unlock(ctx)
			if _, err := c.Record(ctx); err == nil {
				return // joins
			}
			_, err = c.CreateRecord(ctx, l, coord.Record{Token: name, Epoch: 1, Seeder: name})
			switch {
			case err == nil:
				seeded <- name
			case !errors.Is(err, coord.ErrRecordExists):
				errs <- fmt.Errorf("create as %s: %w", name, err)
			}
		})
	}
	wg.Wait()
	close(seeded)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var winners []string
	for n := range seeded {
		winners = append(winners, n)
	}
	if len(winners) != 1 {
		t.Fatalf("want exactly one seeder, got %v", winners)
	}
	for _, c := range []coord.Coordinator{a, b} {
		if r, err := c.Record(ctx); err != nil || r.Seeder != winners[0] {
			t.Fatalf("record %+v (%v), want seeder %s", r, err, winners[0])
		}
	}
}

// A record is created once (ErrRecordExists after), read back by the
// other member with its index, and replaced only at that index
// (ErrConflict with a stale one, or none).
func createOnlyThenCompareAndSet(t *testing.T, a, b coord.Coordinator) {
	ctx := timeout(t)
	if _, err := b.Record(ctx); !errors.Is(err, coord.ErrNoRecord) {
		t.Fatalf("fresh cluster: Record = %v, want ErrNoRecord", err)
	}
	l := lock(t, ctx, a, "a")
	defer l.Unlock(ctx)
	if _, err := a.CreateRecord(ctx, l, coord.Record{Token: "a", Epoch: 1, Seeder: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateRecord(ctx, l, coord.Record{Token: "b", Epoch: 1, Seeder: "a"}); !errors.Is(err, coord.ErrRecordExists) {
		t.Fatalf("second create: %v, want ErrRecordExists", err)
	}
	r, err := b.Record(ctx)
	if err != nil || r.Token != "a" || r.Index == 0 {
		t.Fatalf("record read by the other member: %+v %v, want token a with an index", r, err)
	}
	r.ClusterID = 42
	r2, err := a.UpdateRecord(ctx, l, r)
	if err != nil || r2.Index == r.Index || r2.ClusterID != 42 {
		t.Fatalf("update: %+v %v, want cluster 42 at a new index", r2, err)
	}
	if got, err := b.Record(ctx); err != nil || got.ClusterID != 42 || got.Index != r2.Index {
		t.Fatalf("record after the update: %+v %v, want %+v", got, err, r2)
	}
	if _, err := a.UpdateRecord(ctx, l, r); !errors.Is(err, coord.ErrConflict) {
		t.Fatalf("update with a stale index: %v, want ErrConflict", err)
	}
	r2.Index = 0
	if _, err := a.UpdateRecord(ctx, l, r2); !errors.Is(err, coord.ErrConflict) {
		t.Fatalf("update without an index: %v, want ErrConflict", err)
	}
}

// A holder that lost the lock (it released it, and the other member took
// it) still has its Lock value: every write it makes with it is refused
// with ErrLockLost and lands nowhere, and the fence grew.
func staleHolderIsFenced(t *testing.T, a, b coord.Coordinator) {
	ctx := timeout(t)
	la := lock(t, ctx, a, "a")
	rec, err := a.CreateRecord(ctx, la, coord.Record{Token: "t", Epoch: 1, Seeder: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lb := lock(t, ctx, b, "b")
	defer lb.Unlock(ctx)
	if lb.Fence() <= la.Fence() {
		t.Fatalf("fence did not grow: %d then %d", la.Fence(), lb.Fence())
	}
	stale := rec
	stale.ClusterID = 7
	if _, err := a.UpdateRecord(ctx, la, stale); !errors.Is(err, coord.ErrLockLost) {
		t.Fatalf("stale holder's update: %v, want ErrLockLost", err)
	}
	if got, err := b.Record(ctx); err != nil || got.ClusterID != 0 {
		t.Fatalf("the stale update landed: %+v %v", got, err)
	}
	rec.ClusterID = 9
	if got, err := b.UpdateRecord(ctx, lb, rec); err != nil || got.ClusterID != 9 {
		t.Fatalf("the holder's update: %+v %v", got, err)
	}
}

// While one member holds the lock the other cannot take it; after Unlock
// it can, with a greater fence. Unlock twice is no error.
func lockIsExclusive(t *testing.T, a, b coord.Coordinator) {
	ctx := timeout(t)
	la := lock(t, ctx, a, "a")
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if l, err := b.Lock(short, "b"); err == nil {
		l.Unlock(ctx)
		t.Fatal("the other member took a held lock")
	}
	for range 2 {
		if err := la.Unlock(ctx); err != nil {
			t.Fatalf("unlock: %v", err)
		}
	}
	lb := lock(t, ctx, b, "b")
	defer lb.Unlock(ctx)
	if lb.Fence() <= la.Fence() {
		t.Fatalf("fence did not grow: %d then %d", la.Fence(), lb.Fence())
	}
}

// Contenders of both members that find no value and store theirs at the
// same moment all get one and the same value back (the cluster CA is
// created once), round after round on fresh keys.
func loadOrStoreContendersAgree(t *testing.T, a, b coord.Coordinator) {
	ctx := timeout(t)
	for round := range 100 {
		key := fmt.Sprintf("ca%d", round)
		start := make(chan struct{})
		got := make([]string, 6)
		var wg sync.WaitGroup
		for i := range got {
			c := []coord.Coordinator{a, b}[i%2]
			wg.Go(func() {
				<-start
				v, err := c.LoadOrStore(ctx, key, []byte(fmt.Sprint(i)))
				if err != nil {
					t.Error(err)
				}
				got[i] = string(v)
			})
		}
		close(start)
		wg.Wait()
		for _, g := range got {
			if g != got[0] || g == "" {
				t.Fatalf("round %d: contenders got different values %q", round, got)
			}
		}
	}
}

// Load only reads (ErrNotStored, and asking stores nothing); Delete
// removes a value, and deleting a missing key is no error.
func loadOnlyReadsAndDeleteRemoves(t *testing.T, a, b coord.Coordinator) {
	ctx := timeout(t)
	for range 2 {
		if _, err := b.Load(ctx, "ca"); !errors.Is(err, coord.ErrNotStored) {
			t.Fatalf("Load of a missing key: %v, want ErrNotStored", err)
		}
	}
	if v, err := a.LoadOrStore(ctx, "ca", []byte("one")); err != nil || string(v) != "one" {
		t.Fatalf("LoadOrStore after Load: %q %v, want the new value (Load stored something)", v, err)
	}
	if v, err := b.Load(ctx, "ca"); err != nil || string(v) != "one" {
		t.Fatalf("Load: %q %v", v, err)
	}
	for range 2 {
		if err := a.Delete(ctx, "ca"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if _, err := b.Load(ctx, "ca"); !errors.Is(err, coord.ErrNotStored) {
		t.Fatalf("Load after Delete: %v, want ErrNotStored", err)
	}
}

// Store (where a backend has it) overwrites the value Load reads.
func storeOverwritesWhatLoadReads(t *testing.T, a, b coord.Coordinator) {
	s, ok := a.(storer)
	if !ok {
		t.Skipf("%T has no Store", a)
	}
	ctx := timeout(t)
	for _, v := range []string{"one", "two"} {
		if err := s.Store(ctx, "lease", []byte(v)); err != nil {
			t.Fatal(err)
		}
		if got, err := b.Load(ctx, "lease"); err != nil || string(got) != v {
			t.Fatalf("Load after Store(%q): %q %v", v, got, err)
		}
	}
}

// A pause is stored by one member, read back by the other and removed;
// removing twice is no error.
func pauseRoundTrip(t *testing.T, a, b coord.Coordinator) {
	ctx := timeout(t)
	if _, err := b.Pause(ctx); !errors.Is(err, coord.ErrNotPaused) {
		t.Fatalf("fresh cluster: got %v, want ErrNotPaused", err)
	}
	want := coord.Pause{By: "ops@host", Reason: "investigating", Since: time.Unix(1700000000, 0).UTC()}
	if err := a.SetPause(ctx, &want); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Pause(ctx); err != nil || !got.Since.Equal(want.Since) || got.By != want.By || got.Reason != want.Reason {
		t.Fatalf("pause read back as %+v, %v; want %+v", got, err, want)
	}
	for range 2 {
		if err := a.SetPause(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Pause(ctx); !errors.Is(err, coord.ErrNotPaused) {
		t.Fatalf("after resume: got %v, want ErrNotPaused", err)
	}
}
