package task

import (
	"context"
	"testing"
	"time"
)

// An empty member probes the summary's members before any recovery; the
// leader wrote the summary only when its view changed since its own last
// write, so after Consul lost the key (or restored an older one) an idle
// leader never wrote it again and the guard stayed off (data review,
// session 11). An unchanged view is written again after summaryBeat (the
// leader's heartbeat).
func TestALostSummaryIsWrittenAgainWithinTheRefresh(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0")
	m := k.member("m0", nil)
	clk := &fakeClock{t: time.Now()}
	m.opts.Clock = clk
	s := Summary{Cluster: "kit", ClusterID: "abc", Epoch: 1, Leader: "m0", Voters: 3, Healthy: 3,
		Members: []SummaryMember{{Name: "m0", ID: "1", Healthy: true, ClientURLs: []string{"http://10.0.0.1:2379"}},
			{Name: "m1", ID: "2", Healthy: true, ClientURLs: []string{"http://10.0.0.2:2379"}}}}
	m.writeSummary(ctx, k.co, s)
	if _, err := k.co.Get(ctx, "summary"); err != nil {
		t.Fatalf("first write: %v", err)
	}
	if err := k.co.Delete(ctx, "summary"); err != nil { // Consul lost it
		t.Fatal(err)
	}
	clk.advance(summaryBeat(m.opts.Cluster.RecoveryGrace) / 2)
	m.writeSummary(ctx, k.co, s) // unchanged, within the refresh: no write
	if _, err := k.co.Get(ctx, "summary"); err == nil {
		t.Fatalf("an unchanged view was written again before summaryBeat: every loop would write")
	}
	clk.advance(summaryBeat(m.opts.Cluster.RecoveryGrace) / 2)
	m.writeSummary(ctx, k.co, s)
	if _, err := k.co.Get(ctx, "summary"); err != nil {
		t.Fatalf("summaryBeat after Consul lost the summary, the leader's unchanged view is still not written (%v): an empty member has no members to probe", err)
	}
}

// The beat follows the recovery grace (a quarter of it, as the simulation
// models a 5 s beat beside a 20 s grace), so an idle leader under the
// default 5 min grace writes twice a minute instead of twelve times
// (bench h.idle-api), and never less often than summaryBeatMax: a member
// about to recover must see a leader's rewrite well within its grace.
func TestSummaryBeatStaysWellWithinTheRecoveryGrace(t *testing.T) {
	for grace, want := range map[time.Duration]time.Duration{
		0: 5 * time.Second, 8 * time.Second: 5 * time.Second, 20 * time.Second: 5 * time.Second,
		time.Minute: 15 * time.Second, 5 * time.Minute: 30 * time.Second, time.Hour: 30 * time.Second,
	} {
		got := summaryBeat(grace)
		if got != want {
			t.Errorf("recovery grace %s: beat %s, want %s", grace, got, want)
		}
		if grace >= 20*time.Second && 4*got > grace {
			t.Errorf("recovery grace %s: beat %s is more than a quarter of it", grace, got)
		}
	}
}
