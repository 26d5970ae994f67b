package consul

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/etcd-nomad/etcd-nomad/coord"
)

// tap counts the requests a client sends and can cut it off: failing every
// request, or holding blocking queries (those with an index) unanswered, as
// an agent cut off from its servers does.
type tap struct {
	next http.RoundTripper

	mu       sync.Mutex
	plain    int // requests without an index
	blocking int
	fail     bool
	hold     bool
}

func (t *tap) RoundTrip(r *http.Request) (*http.Response, error) {
	blocking := r.URL.Query().Get("index") != ""
	t.mu.Lock()
	if blocking {
		t.blocking++
	} else {
		t.plain++
	}
	fail, hold := t.fail, t.hold
	t.mu.Unlock()
	switch {
	case fail:
		return nil, errors.New("tap: cut off")
	case hold && blocking:
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return t.next.RoundTrip(r)
}

func (t *tap) set(fail, hold bool) {
	t.mu.Lock()
	t.fail, t.hold = fail, hold
	t.mu.Unlock()
}

func (t *tap) plainRequests() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.plain
}

// tappedCoord is newCoord with its requests through a tap.
func tappedCoord(t *testing.T, addr, prefix string) (*Coordinator, *tap) {
	t.Helper()
	cfg := api.DefaultConfig()
	cfg.Address = strings.TrimPrefix(addr, "http://")
	tp := &tap{next: http.DefaultTransport}
	cfg.HttpClient = &http.Client{Transport: tp}
	cli, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Client: cli, Prefix: prefix, SessionTTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c, tp
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
	}
}

// TestWatchedReadsCostNoRequest: once the watch is current, reads of the
// record, the pause and stored values are answered without a request, and
// a change another member writes is seen as it lands (bench h.idle-api:
// 126 requests a minute per idle member before).
func TestWatchedReadsCostNoRequest(t *testing.T) {
	addr := consulAgent(t)
	c, tp := tappedCoord(t, addr, "watch-cost")
	other := newCoord(t, addr, "watch-cost")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A long wait: the watch answers on changes, and a loaded machine
	// never makes it miss its deadline while reads are counted.
	w := c.watch(ctx, 30*time.Second, 5*time.Second)
	waitFor(t, 10*time.Second, "watch current", w.Current)

	before := tp.plainRequests()
	for range 50 {
		if _, err := w.Record(ctx); !errors.Is(err, coord.ErrNoRecord) {
			t.Fatalf("record: %v, want ErrNoRecord", err)
		}
		if _, err := w.Pause(ctx); !errors.Is(err, coord.ErrNotPaused) {
			t.Fatalf("pause: %v, want ErrNotPaused", err)
		}
		if _, err := w.Load(ctx, "ca"); !errors.Is(err, coord.ErrNotStored) {
			t.Fatalf("load: %v, want ErrNotStored", err)
		}
	}
	if n := tp.plainRequests() - before; n != 0 {
		t.Fatalf("150 watched reads sent %d requests, want 0", n)
	}

	l, err := other.Lock(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	written, err := other.CreateRecord(ctx, l, coord.Record{Token: "t1", Epoch: 1, Seeder: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.SetPause(ctx, &coord.Pause{By: "op", Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.LoadOrStore(ctx, "ca", []byte("held")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the other member's writes seen", func() bool {
		r, err := w.Record(ctx)
		_, perr := w.Pause(ctx)
		b, lerr := w.Load(ctx, "ca")
		return err == nil && r.Token == "t1" && r.Index == written.Index && perr == nil && lerr == nil && string(b) == "held"
	})
	// A watched LoadOrStore of a stored key returns it and writes nothing.
	before = tp.plainRequests()
	if b, err := w.LoadOrStore(ctx, "ca", []byte("mine")); err != nil || string(b) != "held" {
		t.Fatalf("load or store: %q, %v; want the stored value", b, err)
	}
	if n := tp.plainRequests() - before; n != 0 {
		t.Fatalf("a watched load-or-store of a stored key sent %d requests", n)
	}
	// The record's index is the stored one: a compare-and-set from a
	// watched read lands.
	r, _ := w.Record(ctx)
	r.Epoch = 2
	if _, err := other.UpdateRecord(ctx, l, r); err != nil {
		t.Fatalf("update from a watched read: %v", err)
	}
}

// TestWatchedReadsFallBackWhenCutOff: a watch whose queries fail, or go
// unanswered past their wait time, no longer answers: reads go to Consul
// and fail as a consistent read does, never returning the old copy.
func TestWatchedReadsFallBackWhenCutOff(t *testing.T) {
	addr := consulAgent(t)
	for _, cut := range []struct {
		name       string
		fail, hold bool
	}{{"failing", true, false}, {"unanswered", false, true}} {
		t.Run(cut.name, func(t *testing.T) {
			prefix := "watch-cut-" + cut.name
			c, tp := tappedCoord(t, addr, prefix)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			l, err := c.Lock(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Unlock(context.Background())
			if _, err := c.CreateRecord(ctx, l, coord.Record{Token: "t1", Epoch: 1, Seeder: "a"}); err != nil {
				t.Fatal(err)
			}
			w := c.watch(ctx, time.Second, 500*time.Millisecond)
			waitFor(t, 10*time.Second, "record watched", func() bool {
				r, err := w.Record(ctx)
				return w.Current() && err == nil && r.Token == "t1"
			})
			tp.set(cut.fail, cut.hold)
			waitFor(t, 10*time.Second, "watch no longer current", func() bool { return !w.Current() })
			tp.set(true, false)
			if r, err := w.Record(ctx); err == nil {
				t.Fatalf("a cut-off watch answered with record %+v", r)
			}
			tp.set(false, false)
			waitFor(t, 10*time.Second, "watch current again", w.Current)
		})
	}
}
