package task

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// serveFakeStatus answers GET /status on addr with st until the test ends.
func serveFakeStatus(t *testing.T, addr string, st status.Member) func() {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(st)
	})}
	go func() { _ = srv.Serve(l) }()
	stop := func() { _ = srv.Close() }
	t.Cleanup(stop)
	return stop
}

// Sim seed 36353 (the member's first snapshot save failing): m1-0 and
// m0-0, the two voters of cluster 17, were split by a partition; Consul
// lost its state and Nomad collected both while they ran, without a
// quorum. Neither ever answered as a healthy voter after the record was
// gone, and no summary or snapshot named them. m0-1, empty, had waited
// for m1-0's data ("peer m1-0 holds data of epoch 1"); once the provider
// dropped m1-0 it saw "no record and no data anywhere" and seeded a
// second epoch 1 beside it, and the partition healed. A listed peer
// whose /status names data is now remembered until the recovery grace
// has passed since the provider last listed it, and probed once it is
// no longer listed: a voter without a leader is named (UnlistedVoters)
// and the seed waits.
func TestADataHolderIsProbedAfterTheProviderDropsIt(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "b", "m3")
	const grace = 20 * time.Second
	k.cl.RecoveryGrace = grace
	static := k.cl.Provider.Static
	sb := static[0]
	u := func(p int) url.URL { x, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", p)); return *x }
	ports := clustertest.FreePorts(t, 2)
	pa, ca, pb, cb := u(ports[0]), u(ports[1]), u(sb.PeerPort), u(sb.ClientPort)
	initial := "a=" + pa.String() + ",b=" + pb.String()
	dir := t.TempDir()
	started := make(chan func(), 1)
	go func() {
		_, stop := startPlainEtcd(t, filepath.Join(dir, "a"), "a", pa, ca, initial, embed.ClusterStateFlagNew)
		started <- stop
	}()
	b, stopB := startPlainEtcd(t, filepath.Join(dir, "b"), "b", pb, cb, initial, embed.ClusterStateFlagNew)
	stopA := <-started
	clusterID := uint64(b.Server.Cluster().ID())
	stopA() // the partition: b is a voter without a leader
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cb.String()}, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	waitUntil(t, 20*time.Second, "b names no leader", func() (bool, string) {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		st, err := cli.Status(sctx, cb.String())
		if err != nil {
			return false, err.Error()
		}
		return st.Leader == 0, fmt.Sprintf("%+v", st)
	})
	// b's /status: running, a voter, not healthy (no quorum).
	serveFakeStatus(t, fmt.Sprintf("127.0.0.1:%d", sb.StatusPort), status.Member{Name: "b", Cluster: "kit", ClusterID: clusterID,
		MemberID: uint64(b.Server.MemberID()), Token: "tok19", Epoch: 1, Running: true, Revision: 3})
	// No record, no summary, no snapshot store: Consul lost its state.
	m3 := k.member("m3", nil)
	clk := &fakeClock{t: time.Now()}
	m3.opts.Clock = clk
	observe := func(what string) (planner.Observation, planner.Decision) {
		t.Helper()
		o, err := m3.observe(ctx)
		if err != nil {
			t.Fatalf("%s: m3 observes: %v", what, err)
		}
		o.HoldsLock = true
		return o, planner.Plan(o)
	}
	if _, d := observe("b listed"); d.Kind != planner.Wait || !strings.Contains(d.Reason, "peer b holds data") {
		t.Fatalf("beside b listed with data: %s (%s), want a wait for b", d.Kind, d.Reason)
	}
	// Nomad collects b while it runs: the provider no longer lists it.
	k.prov.Set(static[1:])
	clk.advance(time.Second)
	o, d := observe("b collected")
	if len(o.UnlistedVoters) != 1 || !strings.HasPrefix(o.UnlistedVoters[0], "b (http") {
		t.Fatalf("b unlisted, a voter without a leader: known healthy %q, unlisted voters %q, want b", o.KnownHealthy, o.UnlistedVoters)
	}
	if d.Kind != planner.Wait || !strings.Contains(d.Reason, "without a leader") {
		t.Fatalf("beside the collected b: %s (%s), want a wait naming it", d.Kind, d.Reason)
	}
	// m3's /status shares what it found with its peers.
	if found := m3.foundVoters(m3.known.found, clk.Now()); len(found) != 1 || found[0].Name != "b" || found[0].Leader {
		t.Fatalf("m3's found voters %+v, want b without a leader", found)
	}
	stopB() // its Nomad client reconnected and stopped it
	clk.advance(grace)
	if o, d := observe("b stopped for the grace"); len(o.KnownHealthy)+len(o.UnlistedVoters) != 0 || d.Kind != planner.Seed {
		t.Fatalf("the grace after b's last answer: known healthy %q, unlisted %q, %s (%s), want a seed", o.KnownHealthy, o.UnlistedVoters, d.Kind, d.Reason)
	}
}

// A data holder is kept while the provider lists it, answering or not,
// and for the recovery grace after: without a record, one that does not
// answer once unlisted is named (it may run behind a partition, its peers
// with it) until that grace has passed; under a record it is only
// probed. A listed peer whose /status names no data, or under a record
// another cluster's, is forgotten.
func TestADataHolderIsKeptForTheGraceAfterItsLastListing(t *testing.T) {
	k := newKit(t, "m3")
	const grace = 20 * time.Second
	k.cl.RecoveryGrace = grace
	m3 := k.member("m3", nil)
	t0 := time.Now()
	closed := fmt.Sprintf("http://127.0.0.1:%d", clustertest.FreePorts(t, 1)[0]) // nothing answers there
	noRecord := func() planner.Observation {
		return planner.Observation{ClusterName: "kit", Self: planner.Self{Name: "m3"}, Local: planner.Local{Empty: true}, HoldsLock: true, NewToken: "n",
			Instances: []planner.Instance{{Name: "m3"}}, RecoveryGrace: grace}
	}
	m3.known.listed = map[string]bool{"b": true}
	m3.known.listedHolders = []listedHolder{{name: "b", clientURL: closed, clusterID: 0x17, token: "tok19", epoch: 1}}
	o := noRecord()
	m3.rememberListedHolders(&o, t0)
	// Listed and silent for longer than the grace: still kept (the
	// planner counts it unreachable meanwhile).
	m3.known.listedHolders = nil
	o = noRecord()
	m3.rememberListedHolders(&o, t0.Add(30*time.Second))
	if e, ok := m3.known.holders["b"]; !ok || !e.at.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("b listed, silent: holders %+v, want b kept from its last listing", m3.known.holders)
	}
	// The provider drops it; it does not answer.
	m3.known.listed = map[string]bool{}
	at := t0.Add(45 * time.Second)
	o = noRecord()
	m3.rememberListedHolders(&o, at)
	m3.observeKnownHealthy(context.Background(), &o, at)
	if len(o.UnlistedVoters) != 1 || !strings.Contains(o.UnlistedVoters[0], "b (held data of epoch 1, cluster 17") {
		t.Fatalf("b unlisted and silent, 15s after its last listing, no record: unlisted voters %q, want b", o.UnlistedVoters)
	}
	if d := planner.Plan(o); d.Kind != planner.Wait {
		t.Fatalf("beside b: %s (%s), want a wait", d.Kind, d.Reason)
	}
	rec := noRecord()
	rec.Record = &planner.Record{ClusterID: 0x17, Token: "tok19", Epoch: 1, Seeder: "b"}
	m3.observeKnownHealthy(context.Background(), &rec, at)
	if len(rec.UnlistedVoters) != 0 {
		t.Fatalf("under a record: unlisted voters %q, want none (a silent holder is only probed)", rec.UnlistedVoters)
	}
	at = t0.Add(30*time.Second + grace)
	o = noRecord()
	m3.rememberListedHolders(&o, at)
	m3.observeKnownHealthy(context.Background(), &o, at)
	if len(o.UnlistedVoters) != 0 || len(m3.known.holders) != 0 {
		t.Fatalf("the grace after b's last listing: unlisted voters %q, holders %+v, want none", o.UnlistedVoters, m3.known.holders)
	}
	if d := planner.Plan(o); d.Kind != planner.Seed {
		t.Fatalf("b lapsed: %s (%s), want a seed", d.Kind, d.Reason)
	}
	// Forgotten at once: a listed peer that names no data, and under a
	// record one of another cluster.
	for _, tc := range []struct {
		name   string
		rec    *planner.Record
		empty  bool
		holder listedHolder
	}{
		{"no data", nil, true, listedHolder{}},
		{"another cluster under a record", &planner.Record{ClusterID: 0x9, Token: "x", Epoch: 2}, false, listedHolder{name: "b", clientURL: closed, clusterID: 0x17, token: "tok19", epoch: 1}},
	} {
		m3.known.holders = map[string]knownHolder{"b": {k: knownMember{name: "b", clientURLs: []string{closed}}, clusterID: 0x17, epoch: 1, at: t0}}
		m3.known.listed = map[string]bool{"b": true}
		m3.known.listedHolders, m3.known.listedEmpty = nil, nil
		if tc.empty {
			m3.known.listedEmpty = []string{"b"}
		} else {
			m3.known.listedHolders = []listedHolder{tc.holder}
		}
		o := noRecord()
		o.Record = tc.rec
		m3.rememberListedHolders(&o, t0.Add(time.Second))
		if _, ok := m3.known.holders["b"]; ok {
			t.Errorf("%s: b kept, want it forgotten", tc.name)
		}
	}
}
