package local

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
)

// The cluster CA is created once: contenders that all find no value and
// store theirs at the same moment must still all get one and the same
// value back. Many rounds on fresh keys, each started together, so that
// an overwriting store is caught, not only a slow one.
func TestLoadOrStoreContendersAgreeEveryRound(t *testing.T) {
	c, _ := New(t.TempDir())
	ctx := context.Background()
	for round := range 200 {
		key := fmt.Sprintf("ca%d", round)
		start := make(chan struct{})
		got := make([]string, 8)
		var wg sync.WaitGroup
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				b, err := c.LoadOrStore(ctx, key, []byte(fmt.Sprint(i)))
				if err != nil {
					t.Error(err)
				}
				got[i] = string(b)
			}()
		}
		close(start)
		wg.Wait()
		for _, g := range got {
			if g != got[0] {
				t.Fatalf("round %d: contenders got different values %q", round, got)
			}
		}
	}
}

// A pause is stored, read back by another coordinator on the same
// directory (another member), and removed; removing twice is no error.
func TestPauseRoundTrip(t *testing.T) {
	dir := t.TempDir()
	a, _ := New(dir)
	b, _ := New(dir)
	ctx := context.Background()
	if _, err := b.Pause(ctx); !errors.Is(err, coord.ErrNotPaused) {
		t.Fatalf("fresh coordinator: got %v, want ErrNotPaused", err)
	}
	want := coord.Pause{By: "ops@host", Reason: "investigating", Since: time.Unix(1700000000, 0).UTC()}
	if err := a.SetPause(ctx, &want); err != nil {
		t.Fatal(err)
	}
	got, err := b.Pause(ctx)
	if err != nil || got != want {
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
