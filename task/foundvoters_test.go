package task

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Sim seed 180 with CollectRunning: Nomad collected a voter while it ran,
// the only copy of the cluster's acknowledged writes; two members found it
// answering their probes and waited. Consul lost its state (the record
// and the summary with it), and a fresh replacement, which never read the
// summary and found no record, no snapshot and no peer data, seeded a
// second epoch 1 at once beside it. A member's /status now names the
// voters it found (FoundVoters); its peers probe them too and name them
// for the recovery grace after their last answer, so the seed waits.
func TestAVoterAPeerFoundBlocksASeed(t *testing.T) {
	ctx := context.Background()
	voter, clusterID, stop := plainVoter(t)
	k := newKit(t, "m0", "m1")
	const grace = 30 * time.Second
	k.cl.RecoveryGrace = grace
	clk := &fakeClock{t: time.Now()}
	sum, _ := json.Marshal(Summary{Cluster: "kit", ClusterID: fmt.Sprintf("%x", clusterID), Epoch: 1, Leader: "a",
		Members: []SummaryMember{{Name: "a", ID: "1", ClientURLs: []string{voter}}}})
	if err := k.co.Put(ctx, "summary", sum); err != nil {
		t.Fatal(err)
	}
	m0 := k.member("m0", nil)
	m0.opts.Clock = clk
	if o, err := m0.observe(ctx); err != nil || len(o.KnownHealthy) != 1 || !strings.HasPrefix(o.KnownHealthy[0], "a (") {
		t.Fatalf("m0 with the summary: known healthy %q (%v), want a", o.KnownHealthy, err)
	}
	if err := m0.serveStatus(); err != nil {
		t.Fatal(err)
	}
	// Consul loses its state: no record, no summary.
	if err := k.co.Delete(ctx, "summary"); err != nil {
		t.Fatal(err)
	}
	m1 := k.member("m1", nil)
	m1.opts.Clock = clk
	observe := func(what string) planner.Observation {
		t.Helper()
		o, err := m1.observe(ctx)
		if err != nil {
			t.Fatalf("%s: m1 observes: %v", what, err)
		}
		o.HoldsLock = true
		return o
	}
	o := observe("a found by m0")
	if len(o.KnownHealthy) != 1 || !strings.HasPrefix(o.KnownHealthy[0], "a (") {
		t.Fatalf("m1 without a record or a summary: known healthy %q, want a (m0's /status names it)", o.KnownHealthy)
	}
	if d := planner.Plan(o); d.Kind != planner.Wait || !strings.Contains(d.Reason, "a (") {
		t.Fatalf("beside the voter m0 found: %s (%s), want a wait naming it", d.Kind, d.Reason)
	}
	stop() // it stops (its Nomad client reconnected): nobody reaches it
	clk.advance(grace / 2)
	if o := observe("a stopped, within the grace"); len(o.KnownHealthy) != 1 || !strings.Contains(o.KnownHealthy[0], "answered 15s ago") {
		t.Fatalf("within the grace of its last answer: known healthy %q, want a, answered 15s ago", o.KnownHealthy)
	}
	clk.advance(grace / 2)
	o = observe("a stopped for the grace")
	if len(o.KnownHealthy) != 0 || len(o.UnlistedVoters) != 0 {
		t.Fatalf("the grace after its last answer: known healthy %q, unlisted %q, want none (no two members keep each other's word alive)", o.KnownHealthy, o.UnlistedVoters)
	}
	if d := planner.Plan(o); d.Kind != planner.Seed {
		t.Fatalf("nothing named any more: %s (%s), want a seed", d.Kind, d.Reason)
	}
}
