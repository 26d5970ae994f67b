package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Sim seed 8920 with CollectRunning: m0 seeded a one-member cluster;
// Consul lost its state at once; m1, empty, saw peer m0 holding data of
// epoch 1 and waited for it. Nomad then collected m0 while it served: the
// provider no longer listed it, and m1 saw "no record and no data
// anywhere" and seeded a second epoch 1 beside it. Nothing named m0: no
// membership of m1's own, no summary, no snapshot. A listed peer whose
// /status answers as a healthy voter is now remembered as a found voter:
// m1 probes it after the provider stops listing it and waits.
func TestAListedVoterIsProbedAfterTheProviderDropsIt(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0", "m1")
	const grace = 30 * time.Second
	k.cl.RecoveryGrace = grace
	static := k.cl.Provider.Static
	m0 := k.member("m0", nil)
	k.seed(m0)
	if err := m0.serveStatus(); err != nil {
		t.Fatal(err)
	}
	// Consul loses its state: no record, no summary.
	if err := os.Remove(filepath.Join(k.cl.Coordination.Dir, "record.json")); err != nil {
		t.Fatal(err)
	}
	if err := k.co.Delete(ctx, "summary"); err != nil && !errors.Is(err, coord.ErrNotStored) {
		t.Fatal(err)
	}
	m1 := k.member("m1", nil)
	clk := &fakeClock{t: time.Now()}
	m1.opts.Clock = clk
	observe := func(what string) (planner.Observation, planner.Decision) {
		t.Helper()
		o, err := m1.observe(ctx)
		if err != nil {
			t.Fatalf("%s: m1 observes: %v", what, err)
		}
		o.HoldsLock = true
		return o, planner.Plan(o)
	}
	if _, d := observe("m0 listed"); d.Kind != planner.Wait || !strings.Contains(d.Reason, "m0") {
		t.Fatalf("beside m0 listed with data: %s (%s), want a wait for m0", d.Kind, d.Reason)
	}
	// Nomad collects m0 while it serves: the provider no longer lists it.
	k.prov.Set(static[1:])
	o, d := observe("m0 collected")
	if len(o.KnownHealthy) != 1 || !strings.HasPrefix(o.KnownHealthy[0], "m0 (") {
		t.Fatalf("m0 unlisted, still serving: known healthy %q, want m0 (its /status answered as a healthy voter)", o.KnownHealthy)
	}
	if d.Kind != planner.Wait || !strings.Contains(d.Reason, "m0 (") {
		t.Fatalf("beside the collected m0: %s (%s), want a wait naming it", d.Kind, d.Reason)
	}
	// m1's /status shares it with its peers (found voters).
	if found := m1.foundVoters(m1.known.found, clk.Now()); len(found) != 1 || found[0].Name != "m0" || !found[0].Leader {
		t.Fatalf("m1's found voters %+v, want m0 with a leader", found)
	}
	m0.halt() // its Nomad client reconnected and stopped it
	clk.advance(grace)
	if o, d := observe("m0 stopped for the grace"); len(o.KnownHealthy)+len(o.UnlistedVoters) != 0 || d.Kind != planner.Seed {
		t.Fatalf("the grace after m0's last answer: known healthy %q, unlisted %q, %s (%s), want a seed", o.KnownHealthy, o.UnlistedVoters, d.Kind, d.Reason)
	}
}

// Under a record, a listed healthy voter is remembered only for a
// cluster this member knows (the record's, or the one started under an
// unconfirmed record's token; the summary's; its data's): a /status that
// names another cluster's id holds nothing back once its peer is gone
// (review rev13b D4). Without a record, any cluster's voter counts, as a
// peer's word: it lapses once this member knows ids and not its own.
func TestAListedVoterIsRememberedOnlyForAClusterThisMemberKnows(t *testing.T) {
	k := newKit(t, "m1")
	m1 := k.member("m1", nil)
	now := time.Now()
	voters := []listedVoter{
		{name: "a", clientURL: "http://127.0.0.1:1", clusterID: 0xa, token: "ta"},
		{name: "b", clientURL: "http://127.0.0.1:2", clusterID: 0xb, token: "tb"},
		{name: "c", clientURL: "http://127.0.0.1:3", clusterID: 0xc, token: "tc"},
	}
	for _, tc := range []struct {
		name  string
		o     planner.Observation
		want  string
		peers bool
	}{
		{"the record's cluster", planner.Observation{Record: &planner.Record{ClusterID: 0xa, Token: "x", Epoch: 2}, Local: planner.Local{Empty: true}}, "a", false},
		{"an unconfirmed record's seed", planner.Observation{Record: &planner.Record{Token: "tb", Epoch: 1, Seeder: "b"}, Local: planner.Local{Empty: true}}, "b", false},
		{"its own data's cluster", planner.Observation{Record: &planner.Record{ClusterID: 0x9, Token: "x", Epoch: 3}, Local: planner.Local{ClusterID: 0xc}}, "c", false},
		{"no record: any, as a word", planner.Observation{Local: planner.Local{Empty: true}}, "a b c", true},
		{"a record of another cluster", planner.Observation{Record: &planner.Record{ClusterID: 0x9, Token: "x", Epoch: 3}, Local: planner.Local{Empty: true}}, "", false},
	} {
		m1.known.seen, m1.known.listedVoters = nil, voters
		m1.rememberListedVoters(&tc.o, now)
		var got []string
		for _, v := range voters {
			if e, ok := m1.known.seen[v.name]; ok {
				got = append(got, v.name)
				if e.probe.peers != tc.peers || !e.healthy || len(e.probe.clusterIDs) != 1 || e.probe.clusterIDs[0] != v.clusterID {
					t.Errorf("%s: %s remembered as %+v, want healthy, cluster %x, a word: %v", tc.name, v.name, e, v.clusterID, tc.peers)
				}
			}
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%s: remembered %q, want %q", tc.name, g, tc.want)
		}
	}
}

// Sim seed 13315 with CollectRunning: Nomad collected a seeder right after
// its start, before its next observation (which then failed on the
// provider); a partition hid it from its peers for longer than the
// recovery grace, and one took the seed over as a second cluster beside
// it. The seeder knew no record (the seed never kept the one it created),
// so it wrote no summary whose beat would have named it. It keeps the
// record its seed re-read before the start.
func TestASeederBeatsItsSummaryBeforeItsFirstObservation(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0")
	m0 := k.member("m0", nil)
	m0.lockForTest(t)
	rec := planner.Record{Token: coord.NewToken(), Epoch: 1, Seeder: "m0"}
	if err := m0.act(ctx, planner.Observation{}, planner.Decision{Kind: planner.Seed, Name: "m0", Record: &rec}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	m0.waitReady(t)
	m0.mu.Lock()
	kept := m0.record
	m0.mu.Unlock()
	if kept == nil || kept.Token != rec.Token {
		t.Fatalf("after the seed: record kept %+v, want the seed's (token %s)", kept, rec.Token)
	}
	// Its observations fail on the provider from now on (collected): the
	// loop writes the summary unobserved. The seed's server needs a moment
	// to elect itself.
	deadline := time.Now().Add(10 * time.Second)
	for {
		m0.publishSummaryUnobserved(ctx)
		b, err := k.co.Get(ctx, "summary")
		if err == nil {
			var s Summary
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			if s.Leader != "m0" || s.ClusterID == "" || s.ClusterID == fmt.Sprintf("%x", 0) {
				t.Fatalf("summary %+v, want m0 leading its seed's cluster", s)
			}
			return
		}
		if !errors.Is(err, coord.ErrNotStored) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no summary 10s after the seed started: the seeder knows no record")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
