package task

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// fakeClock is a Clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestSinceCountsFromTheFirstSightAndForgetsWhenItStops(t *testing.T) {
	s := heldSince{}
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	a, b := condition{condAbsent, 1}, condition{condAbsent, 2}
	if d := s.hold(a, true, t0); d != 0 {
		t.Fatalf("first sight: %s, want 0", d)
	}
	s.hold(b, true, t0.Add(time.Second))
	if d := s.hold(a, true, t0.Add(5*time.Second)); d != 5*time.Second {
		t.Fatalf("after 5s: %s, want 5s", d)
	}
	if d := s.hold(a, false, t0.Add(6*time.Second)); d != 0 {
		t.Fatalf("no longer holds: %s, want 0", d)
	}
	if d := s.hold(a, true, t0.Add(7*time.Second)); d != 0 {
		t.Fatalf("holds again: %s, want 0 (a new count)", d)
	}
	s.keepOnly(condAbsent, map[uint64]bool{1: true})
	if d := s.hold(b, true, t0.Add(8*time.Second)); d != 0 {
		t.Fatalf("a member no longer listed was kept: %s, want 0", d)
	}
	if d := s.hold(a, true, t0.Add(9*time.Second)); d != 2*time.Second {
		t.Fatalf("a listed member was forgotten: %s, want 2s", d)
	}
}

// The durations the planner gets (a member absent, unhealthy) are measured
// on the member's clock: a member listed but never started is absent and
// silent for as long as the injected clock moves, and the running member
// is neither.
func TestObservedDurationsFollowTheInjectedClock(t *testing.T) {
	k := newKit(t, "m0")
	m := k.member("m0", nil)
	clock := &fakeClock{t: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	m.opts.Clock = clock
	cli := k.seedForTest(m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.MemberAddAsLearner(ctx, []string{"http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	ghost := resp.Member.ID
	find := func(o planner.Observation, id uint64) planner.Member {
		t.Helper()
		if !o.MembersKnown {
			t.Fatal("member list unknown")
		}
		for _, mem := range o.Members {
			if mem.ID == id {
				return mem
			}
		}
		t.Fatalf("member %x not in the list %+v", id, o.Members)
		return planner.Member{}
	}
	o, err := m.observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := find(o, ghost); g.AbsentFor != 0 || g.UnhealthyFor != 0 {
		t.Fatalf("first sight: absent %s, unhealthy %s, want 0", g.AbsentFor, g.UnhealthyFor)
	}
	clock.advance(7 * time.Second)
	if o, err = m.observe(ctx); err != nil {
		t.Fatal(err)
	}
	if g := find(o, ghost); g.AbsentFor != 7*time.Second || g.UnhealthyFor != 7*time.Second {
		t.Fatalf("after 7s on the clock: absent %s, unhealthy %s, want 7s", g.AbsentFor, g.UnhealthyFor)
	}
	if self := find(o, o.SelfID); self.AbsentFor != 0 || self.UnhealthyFor != 0 || !self.Healthy {
		t.Fatalf("the running member: %+v, want present and healthy", self)
	}
}
