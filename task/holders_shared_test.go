package task

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Review rev18f F3 (sim seed 36353 driven to step 296): m0-1 remembered
// m0-0 and m1-0, holders of epoch 1 data that Nomad collected while they
// ran, only in its process; it crashed behind the partition that cut them
// off, restarted knowing nothing of them and seeded a second epoch 1. A
// member's /status now shares the holders it remembers with the age of
// their last listing, and a peer takes them as a word: it probes them
// and, without a record, names a silent one until the recovery grace has
// passed since that ORIGINAL listing (passing the word on never extends
// it).
func TestARememberedHolderIsSharedThroughStatus(t *testing.T) {
	k := newKit(t, "m3", "m4")
	const grace = 20 * time.Second
	k.cl.RecoveryGrace = grace
	m3, m4 := k.member("m3", nil), k.member("m4", nil)
	closed := fmt.Sprintf("http://127.0.0.1:%d", clustertest.FreePorts(t, 1)[0]) // nothing answers there
	noRecord := func(name string) planner.Observation {
		return planner.Observation{ClusterName: "kit", Self: planner.Self{Name: name}, Local: planner.Local{Empty: true}, HoldsLock: true, NewToken: "n",
			Instances: []planner.Instance{{Name: name}}, RecoveryGrace: grace}
	}
	// m3 saw b listed with data of cluster 17 at t0; the provider drops it.
	t0 := time.Now()
	m3.known.listed = map[string]bool{"b": true}
	m3.known.listedHolders = []listedHolder{{name: "b", clientURL: closed, clusterID: 0x17, token: "tok19", epoch: 1}}
	o := noRecord("m3")
	m3.rememberListedHolders(&o, t0)
	m3.known.listed, m3.known.listedHolders = map[string]bool{}, nil
	o = noRecord("m3")
	m3.rememberListedHolders(&o, t0.Add(5*time.Second))
	// m3's /status, 8 s after b's last listing, over the wire.
	shared := m3.sharedHolders(m3.known.held, t0.Add(8*time.Second))
	raw, err := json.Marshal(status.Member{Name: "m3", Holders: shared})
	if err != nil {
		t.Fatal(err)
	}
	var st status.Member
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0] != (status.Holder{Name: "b", ClientURL: closed, ClusterID: 0x17, Epoch: 1, AgoMillis: 8000}) {
		t.Fatalf("m3's /status holders %+v (%s), want b of cluster 17, listed 8s ago", st.Holders, raw)
	}
	// m4 (restarted, or a fresh replacement: it never saw b) reads it; its
	// clock differs from m3's.
	t1 := t0.Add(time.Hour)
	m4.known.listed = map[string]bool{}
	m4.known.peersHolders = st.Holders
	o = noRecord("m4")
	m4.rememberListedHolders(&o, t1)
	if e, ok := m4.known.holders["b"]; !ok || !e.at.Equal(t1.Add(-8*time.Second)) {
		t.Fatalf("m4's holders %+v, want b, listed 8s ago", m4.known.holders)
	}
	m4.observeKnownHealthy(context.Background(), &o, t1)
	if len(o.UnlistedVoters) != 1 || !strings.Contains(o.UnlistedVoters[0], "b (held data of epoch 1, cluster 17") {
		t.Fatalf("m4 beside the silent b, no record: unlisted voters %q, want b", o.UnlistedVoters)
	}
	if d := planner.Plan(o); d.Kind != planner.Wait {
		t.Fatalf("m4 beside b: %s (%s), want a wait", d.Kind, d.Reason)
	}
	// Passed on, the word keeps its age: m4 shares b as listed 13 s ago
	// 5 s later, and m3 taking it back does not refresh its own.
	if h := m4.sharedHolders(m4.known.held, t1.Add(5*time.Second)); len(h) != 1 || h[0].AgoMillis != 13000 {
		t.Fatalf("m4's /status holders %+v, want b listed 13s ago", h)
	}
	m3.known.peersHolders = m4.sharedHolders(m4.known.held, t1.Add(5*time.Second))
	o = noRecord("m3")
	m3.rememberListedHolders(&o, t0.Add(13*time.Second))
	if e := m3.known.holders["b"]; !e.at.Equal(t0) {
		t.Fatalf("m3's b after m4's word: listed at %v, want t0", e.at.Sub(t0))
	}
	// The grace after b's ORIGINAL listing: m4 forgets it and seeds,
	// though m3 still names it (a stale copy) as listed 20 s ago: no
	// longer taken.
	at := t1.Add(grace - 8*time.Second)
	m4.known.peersHolders = []status.Holder{{Name: "b", ClientURL: closed, ClusterID: 0x17, Epoch: 1, AgoMillis: grace.Milliseconds()}}
	o = noRecord("m4")
	m4.rememberListedHolders(&o, at)
	m4.observeKnownHealthy(context.Background(), &o, at)
	if len(o.UnlistedVoters) != 0 || len(m4.sharedHolders(m4.known.held, at)) != 0 {
		t.Fatalf("the grace after b's listing: unlisted voters %q, holders %+v, want none named or shared", o.UnlistedVoters, m4.known.holders)
	}
	if d := planner.Plan(o); d.Kind != planner.Seed {
		t.Fatalf("b lapsed: %s (%s), want a seed", d.Kind, d.Reason)
	}
	// Not taken: a holder m4's provider lists (its own /status answers
	// for it), and under a record a holder of another cluster.
	for _, tc := range []struct {
		name   string
		listed bool
		rec    *planner.Record
	}{
		{"listed", true, nil},
		{"another cluster under a record", false, &planner.Record{ClusterID: 0x9, Token: "x", Epoch: 2}},
	} {
		m4.known.holders = nil
		m4.known.listed = map[string]bool{"b": tc.listed}
		m4.known.peersHolders = []status.Holder{{Name: "b", ClientURL: closed, ClusterID: 0x17, Epoch: 1, AgoMillis: 1000}}
		o := noRecord("m4")
		o.Record = tc.rec
		m4.rememberListedHolders(&o, t1)
		if _, ok := m4.known.holders["b"]; ok {
			t.Errorf("%s: b taken, want it left out", tc.name)
		}
	}
}

// A peer's /status that names a holder as listed a moment ago at every
// observation (planted, or a provider that never drops it while this
// member's does) keeps this member waiting no longer than twice the
// grace after the first listing a word claimed; and a word never moves a
// holder's address, cluster or epoch, only its time.
func TestAPeersWordNeverKeepsAHolderForever(t *testing.T) {
	k := newKit(t, "m4")
	const grace = 20 * time.Second
	k.cl.RecoveryGrace = grace
	m4 := k.member("m4", nil)
	closed := fmt.Sprintf("http://127.0.0.1:%d", clustertest.FreePorts(t, 1)[0])
	noRecord := func() planner.Observation {
		return planner.Observation{ClusterName: "kit", Self: planner.Self{Name: "m4"}, Local: planner.Local{Empty: true}, HoldsLock: true, NewToken: "n",
			Instances: []planner.Instance{{Name: "m4"}}, RecoveryGrace: grace}
	}
	m4.known.listed = map[string]bool{}
	t1 := time.Now()
	for at := t1; at.Before(t1.Add(3 * grace)); at = at.Add(grace / 4) {
		m4.known.peersHolders = []status.Holder{{Name: "b", ClientURL: closed, ClusterID: 0x17, Epoch: 1, AgoMillis: 0}}
		o := noRecord()
		m4.rememberListedHolders(&o, at)
		m4.observeKnownHealthy(context.Background(), &o, at)
		d := planner.Plan(o)
		if wait := at.Before(t1.Add(2 * grace)); wait != (d.Kind == planner.Wait) {
			t.Fatalf("%s after the first word: %s (%s), unlisted voters %q; want a wait only within twice the grace", at.Sub(t1), d.Kind, d.Reason, o.UnlistedVoters)
		}
	}
	// Once no peer names it, it goes; a word after that is taken anew.
	m4.known.peersHolders = nil
	o := noRecord()
	m4.rememberListedHolders(&o, t1.Add(3*grace))
	if len(m4.known.holders) != 0 {
		t.Fatalf("no peer names b: holders %+v, want none", m4.known.holders)
	}
	// A holder m4 listed keeps its address under a word naming another.
	m4.known.holders = map[string]knownHolder{"b": {k: knownMember{name: "b", clientURLs: []string{closed}}, clusterID: 0x17, epoch: 1, at: t1}}
	m4.known.peersHolders = []status.Holder{{Name: "b", ClientURL: "http://elsewhere:2379", ClusterID: 0x99, Epoch: 7, AgoMillis: 0}}
	o = noRecord()
	m4.rememberListedHolders(&o, t1.Add(time.Second))
	if e := m4.known.holders["b"]; e.k.clientURLs[0] != closed || e.clusterID != 0x17 || e.epoch != 1 || !e.at.Equal(t1.Add(time.Second)) {
		t.Fatalf("b after a word naming another address: %+v, want its own address, cluster and epoch, the word's time", e)
	}
}
