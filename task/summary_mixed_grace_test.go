package task

import (
	"context"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Review rev18a F1: the summary beat follows the writer's recovery grace,
// and members run different graces while a job update rolls. A leader
// still on the default 5 min grace (beat 30 s) beside a member already on
// 20 s (valid: above MinRecoveryGrace): the member, cut off from it, named
// the rewrite's leader for its own 20 s only, and was without a name in
// 10 s of every 30 s once its quorum had been lost for its grace: a
// recovery beside a serving leader. The summary says the writer's beat
// and the reader keeps the name for the writer's grace.
func TestASlowerBeatingLeaderStaysNamedBesideAShorterGrace(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0", "m3")
	m0 := k.member("m0", nil)
	m0.opts.Cluster.RecoveryGrace = 5 * time.Minute // the old config
	clk := &fakeClock{t: time.Now()}
	m0.opts.Clock = clk
	s := Summary{Cluster: "kit", ClusterID: "abc", Epoch: 1, Leader: "m0", Voters: 3,
		Members: []SummaryMember{{Name: "m0", ID: "1"}}} // no URL: named by its rewrites alone
	m3 := k.member("m3", nil)
	grace := 20 * time.Second // the new config
	start := clk.Now()
	var unnamed []time.Duration
	for sec := 0; sec <= 90; sec++ {
		m0.writeSummary(ctx, k.co, s) // the leader's 1 s loop
		o := planner.Observation{ClusterName: "kit", Self: planner.Self{Name: "m3"}, Local: planner.Local{Empty: true},
			Record: &planner.Record{ClusterID: 0xabc, Token: "t", Epoch: 1, Seeder: "m0"}, RecoveryGrace: grace}
		m3.observeKnownHealthy(ctx, &o, clk.Now())
		if lost := clk.Now().Sub(start); lost >= grace && len(o.KnownHealthy) == 0 {
			unnamed = append(unnamed, lost)
		}
		clk.advance(time.Second)
	}
	if len(unnamed) > 0 {
		t.Fatalf("a leader with grace 5m beside a member with grace %s: the serving leader is not named at quorum lost for %v: a recovery starts beside it", grace, unnamed)
	}
}

// heldFor keeps a reader's own grace whenever the writer beats as fast
// as the reader would (one config everywhere: nothing changes), honours
// a slower writer's grace, and bounds what a planted beat can hold.
func TestHeldForFollowsTheSlowerWriter(t *testing.T) {
	for _, c := range []struct{ grace, beat, want time.Duration }{
		{20 * time.Second, 5 * time.Second, 20 * time.Second},
		{5 * time.Second, 0, 5 * time.Second}, // a writer that did not say: 5 s
		{5 * time.Minute, 30 * time.Second, 5 * time.Minute},
		{20 * time.Second, 30 * time.Second, 2 * time.Minute},
		{time.Minute, 30 * time.Second, 2 * time.Minute},
		{20 * time.Second, 100 * time.Hour, 2 * time.Minute}, // planted: capped
		{20 * time.Second, -time.Second, 20 * time.Second},
	} {
		if got := heldFor(c.grace, c.beat); got != c.want {
			t.Errorf("grace %s, writer's beat %s: held %s, want %s", c.grace, c.beat, got, c.want)
		}
	}
}

// notOverdue never holds with one config everywhere, and lets a slower
// writer's summary lapse two of its beats after it was first read.
func TestNotOverdueOnlyForASlowerWriter(t *testing.T) {
	for _, c := range []struct {
		grace, beat, unchanged time.Duration
		want                   bool
	}{
		{20 * time.Second, 5 * time.Second, 0, false},
		{5 * time.Minute, 30 * time.Second, 0, false},
		{20 * time.Second, 0, 0, false},
		{20 * time.Second, 30 * time.Second, 64 * time.Second, true},
		{20 * time.Second, 30 * time.Second, 65 * time.Second, false},
		{20 * time.Second, 100 * time.Hour, 65 * time.Second, false}, // planted: capped
	} {
		if got := notOverdue(c.grace, c.beat, c.unchanged); got != c.want {
			t.Errorf("grace %s, writer's beat %s, unchanged for %s: %v, want %v", c.grace, c.beat, c.unchanged, got, c.want)
		}
	}
}
