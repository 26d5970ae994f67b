package task

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// The probes before a recovery that the simulation's collected
// allocations (sim Config.CollectRunning: Nomad makes allocations terminal
// while their processes still serve, behind partitions) showed short.
// Each member here is a plain embedded etcd the provider does not list.

// plainVoter starts a one-voter cluster (it leads itself) and returns its
// client URL, its cluster id and a stop.
func plainVoter(t *testing.T) (string, uint64, func()) {
	ports := clustertest.FreePorts(t, 2)
	u := func(p int) url.URL { x, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", p)); return *x }
	peer, client := u(ports[0]), u(ports[1])
	e, stop := startPlainEtcd(t, filepath.Join(t.TempDir(), "a"), "a", peer, client, "a="+peer.String(), embed.ClusterStateFlagNew)
	return client.String(), uint64(e.Server.Cluster().ID()), stop
}

// Sim seeds 71 and 172 with CollectRunning: a seeder (or a recovering
// member) that Nomad collected right after it started serves alone; its
// record is not confirmed, or Consul restored an older one, and no summary
// names it. The store's writers do: the newest snapshot's taker and the
// recorder of its chain's newest segment. They are asked with a record
// too (before, the taker only without one, and no recorder at all).
func TestTheStoresWritersAreProbedUnderARecord(t *testing.T) {
	ctx := context.Background()
	ca, clusterID, _ := plainVoter(t)
	k := newKit(t, "m3")
	store, err := file.New(filepath.Join(k.dir, "snapshots"), k.cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("%x", clusterID)
	// The full snapshot was taken from a member gone since; the newest
	// delta segment names the leader that serves now.
	at := time.Now()
	full := snapshot.Meta{Name: snapshot.ObjectName("kit", 2, 10, at, false), Cluster: "kit", ClusterID: id, Epoch: 2, Revision: 10, Endpoint: "http://127.0.0.1:1", Created: at}
	d1 := snapshot.Meta{Name: snapshot.DeltaName("kit", 2, 20, at, false), Cluster: "kit", ClusterID: id, Epoch: 2, Kind: snapshot.KindDelta, Base: full.Name, FirstRevision: 11, Revision: 20, Endpoint: "http://127.0.0.1:1", Created: at}
	d2 := snapshot.Meta{Name: snapshot.DeltaName("kit", 2, 30, at, false), Cluster: "kit", ClusterID: id, Epoch: 2, Kind: snapshot.KindDelta, Base: full.Name, FirstRevision: 21, Revision: 30, Endpoint: ca, Created: at}
	for _, m := range []snapshot.Meta{full, d1, d2} {
		if _, err := store.Put(ctx, m.Name, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
		if err := store.PutMeta(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	m3 := k.memberWith("m3", nil, &backup.Snapshots{Store: store})
	// An older record (another cluster id) and no summary.
	o := planner.Observation{ClusterName: "kit", Self: planner.Self{Name: "m3"}, Local: planner.Local{Empty: true}, HoldsLock: true, NewToken: "n",
		Record:    &planner.Record{ClusterID: 7, Token: "old", Epoch: 1, Seeder: "m0"},
		Instances: []planner.Instance{{Name: "m3"}}, RecoveryGrace: time.Second, QuorumLostFor: time.Minute}
	now := time.Now()
	m3.observeLatestSnapshot(ctx, &o, now)
	m3.observeKnownHealthy(ctx, &o, now)
	if len(o.KnownHealthy) != 1 || !strings.Contains(o.KnownHealthy[0], "recorder of "+d2.Name) {
		t.Fatalf("known healthy %q, want the recorder of the newest segment (the taker is gone)", o.KnownHealthy)
	}
	if d := planner.Plan(o); d.Kind != planner.Wait || !strings.Contains(d.Reason, "last known membership") {
		t.Fatalf("beside the recorder that serves: %s (%s), want a wait", d.Kind, d.Reason)
	}
}

// Sim seed 1051 with CollectRunning: a partition split the majority Nomad
// collected, so the voter this member reaches has no leader; when the
// partition heals the two serve again. Such a voter, unlisted, blocks a
// recovery (UnlistedVoters); a listed one is an ordinary survivor whose
// data the planner sees through its /status. Before, only a voter with a
// leader was named.
func TestALeaderlessVoterTheProviderForgotIsNamed(t *testing.T) {
	ctx := context.Background()
	ports := clustertest.FreePorts(t, 4)
	u := func(p int) url.URL { x, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", p)); return *x }
	pa, ca, pb, cb := u(ports[0]), u(ports[1]), u(ports[2]), u(ports[3])
	initial := "a=" + pa.String() + ",b=" + pb.String()
	dir := t.TempDir()
	stopped := make(chan func(), 1)
	go func() {
		_, stop := startPlainEtcd(t, filepath.Join(dir, "a"), "a", pa, ca, initial, embed.ClusterStateFlagNew)
		stopped <- stop
	}()
	b, _ := startPlainEtcd(t, filepath.Join(dir, "b"), "b", pb, cb, initial, embed.ClusterStateFlagNew)
	stopA := <-stopped
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
	k := newKit(t, "m3")
	sum, _ := json.Marshal(Summary{Cluster: "kit", ClusterID: fmt.Sprintf("%x", clusterID), Epoch: 1, Leader: "a",
		Members: []SummaryMember{{Name: "a", ID: "1", ClientURLs: []string{ca.String()}}, {Name: "b", ID: "2", ClientURLs: []string{cb.String()}}}})
	if err := k.co.Put(ctx, "summary", sum); err != nil {
		t.Fatal(err)
	}
	m3 := k.member("m3", nil)
	probe := func() planner.Observation {
		o := planner.Observation{ClusterName: "kit", Self: planner.Self{Name: "m3"}, Local: planner.Local{Empty: true}, HoldsLock: true, NewToken: "n",
			Record:    &planner.Record{ClusterID: clusterID, Token: "t", Epoch: 1, Seeder: "a"},
			Instances: []planner.Instance{{Name: "m3"}}, RecoveryGrace: time.Second, QuorumLostFor: time.Minute,
			LatestSnapshot: &planner.SnapshotInfo{Name: "s1", Revision: 10, Epoch: 1}}
		m3.observeKnownHealthy(ctx, &o, time.Now())
		return o
	}
	o := probe()
	if len(o.KnownHealthy) != 0 || len(o.UnlistedVoters) != 1 || !strings.HasPrefix(o.UnlistedVoters[0], "b (") {
		t.Fatalf("known healthy %q, unlisted voters %q: want b alone, as an unlisted voter", o.KnownHealthy, o.UnlistedVoters)
	}
	if d := planner.Plan(o); d.Kind != planner.Wait || !strings.Contains(d.Reason, "without a leader") {
		t.Fatalf("beside b: %s (%s), want a wait naming it", d.Kind, d.Reason)
	}
	m3.known.listed = map[string]bool{cb.String(): true} // the provider lists b after all
	m3.known.seen = nil
	if o := probe(); len(o.UnlistedVoters) != 0 {
		t.Fatalf("b listed: unlisted voters %q, want none (an ordinary survivor)", o.UnlistedVoters)
	}
}

// Sim seeds 17, 143 and 423 with CollectRunning: one probe found the
// majority Nomad collected, and a second later a partition hid it; a
// takeover went ahead beside it. A member that answered stays named for
// the recovery grace after its last answer, and is asked again although
// the summary that named it is gone (Consul may restore an older one).
func TestAMemberThatAnsweredStaysNamedForTheGrace(t *testing.T) {
	ctx := context.Background()
	ca, clusterID, stop := plainVoter(t)
	k := newKit(t, "m3")
	sum, _ := json.Marshal(Summary{Cluster: "kit", ClusterID: fmt.Sprintf("%x", clusterID), Epoch: 1, Leader: "a",
		Members: []SummaryMember{{Name: "a", ID: "1", ClientURLs: []string{ca}}}})
	if err := k.co.Put(ctx, "summary", sum); err != nil {
		t.Fatal(err)
	}
	m3 := k.member("m3", nil)
	const grace = 20 * time.Second
	probe := func(at time.Time) planner.Observation {
		o := planner.Observation{ClusterName: "kit", Self: planner.Self{Name: "m3"}, Local: planner.Local{Empty: true},
			Record: &planner.Record{ClusterID: clusterID, Token: "t", Epoch: 1, Seeder: "a"}, RecoveryGrace: grace}
		m3.observeKnownHealthy(ctx, &o, at)
		return o
	}
	t0 := time.Now()
	if o := probe(t0); len(o.KnownHealthy) != 1 || !strings.HasPrefix(o.KnownHealthy[0], "a (http") {
		t.Fatalf("first probe: known healthy %q, want a", o.KnownHealthy)
	}
	if err := k.co.Delete(ctx, "summary"); err != nil {
		t.Fatal(err)
	}
	if o := probe(t0.Add(time.Second)); len(o.KnownHealthy) != 1 || !strings.HasPrefix(o.KnownHealthy[0], "a (http") {
		t.Fatalf("the summary gone: known healthy %q, want a, asked again", o.KnownHealthy)
	}
	stop() // a partition hides it
	if o := probe(t0.Add(5 * time.Second)); len(o.KnownHealthy) != 1 || !strings.Contains(o.KnownHealthy[0], "answered 4s ago") {
		t.Fatalf("a hidden within the grace: known healthy %q, want a, answered 4s ago", o.KnownHealthy)
	}
	if o := probe(t0.Add(time.Second + grace)); len(o.KnownHealthy) != 0 {
		t.Fatalf("a hidden for the grace: known healthy %q, want none", o.KnownHealthy)
	}
}

// Sim seeds 423, 458 and 591 with CollectRunning: a partition longer than
// the recovery grace hid a collected majority from the member about to
// recover, while its leader still wrote the summary to Consul. A leader
// now writes the summary every summaryBeat, changed or not, and a probe
// that finds it rewritten since the last one names that leader.
func TestARewrittenSummaryNamesItsLeader(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0", "m3")
	m0 := k.member("m0", nil)
	clk := &fakeClock{t: time.Now()}
	m0.opts.Clock = clk
	s := Summary{Cluster: "kit", ClusterID: "abc", Epoch: 1, Leader: "m0", Voters: 3,
		Members: []SummaryMember{{Name: "m0", ID: "1", ClientURLs: []string{"http://127.0.0.1:1"}}}}
	m0.writeSummary(ctx, k.co, s)
	m3 := k.member("m3", nil)
	probe := func() planner.Observation {
		o := planner.Observation{ClusterName: "kit", Self: planner.Self{Name: "m3"}, Local: planner.Local{Empty: true},
			Record: &planner.Record{ClusterID: 0xabc, Token: "t", Epoch: 1, Seeder: "m0"}, RecoveryGrace: 20 * time.Second}
		m3.observeKnownHealthy(ctx, &o, time.Now())
		return o
	}
	if o := probe(); len(o.KnownHealthy) != 0 {
		t.Fatalf("first read: known healthy %q, want none (nothing to compare with)", o.KnownHealthy)
	}
	before, _ := k.co.Get(ctx, "summary")
	clk.advance(summaryBeat(m0.opts.Cluster.RecoveryGrace))
	m0.writeSummary(ctx, k.co, s) // unchanged: the leader's heartbeat
	if after, _ := k.co.Get(ctx, "summary"); bytes.Equal(before, after) {
		t.Fatalf("the unchanged summary was not written again after summaryBeat: %s", after)
	}
	o := probe()
	if len(o.KnownHealthy) != 1 || !strings.Contains(o.KnownHealthy[0], "m0 (leader of cluster abc") {
		t.Fatalf("after a rewrite: known healthy %q, want its leader m0", o.KnownHealthy)
	}
}

// Sim seed 466 with CollectRunning: a seeder started its cluster and Nomad
// collected it before it could confirm the record; its observation fails
// on the provider ever since, so it wrote no summary (the record named no
// cluster id yet), and a takeover started a second cluster beside it. A
// leader whose observation fails writes the summary for its own
// unconfirmed seed too.
func TestAnUnconfirmedSeederWritesItsSummaryUnobserved(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0")
	m0 := k.member("m0", nil)
	k.seed(m0)
	if err := k.co.Delete(ctx, "summary"); err != nil {
		t.Fatal(err)
	}
	m0.mu.Lock()
	r := *m0.record
	r.ClusterID = 0 // as before its confirmation
	m0.record = &r
	m0.mu.Unlock()
	waitUntil(t, 10*time.Second, "m0 leads", func() (bool, string) { return m0.etcdServerLeader() != 0, "no leader yet" })
	m0.publishSummaryUnobserved(ctx)
	b, err := k.co.Get(ctx, "summary")
	if err != nil {
		t.Fatalf("the unconfirmed seeder that leads wrote no summary: %v", err)
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil || s.Leader != "m0" || len(s.Members) != 1 || len(s.Members[0].ClientURLs) == 0 {
		t.Fatalf("summary %s (%v), want m0 leading with its client URL", b, err)
	}
	// Another seeder's record: not this member's to speak for.
	if err := k.co.Delete(ctx, "summary"); err != nil {
		t.Fatal(err)
	}
	m0.mu.Lock()
	r.Seeder = "m9"
	m0.record = &r
	m0.mu.Unlock()
	m0.summary.last = nil
	m0.publishSummaryUnobserved(ctx)
	if _, err := k.co.Get(ctx, "summary"); err == nil {
		t.Fatal("a summary was written under another seeder's unconfirmed record")
	}
}

// The clock behind a restore with no record (planner.seedFromSnapshot
// waits RecoveryGrace): how long the coordinator has held no record.
func TestRecordMissingForIsTimed(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m3")
	m3 := k.member("m3", nil)
	t0 := time.Now()
	for _, c := range []struct {
		at   time.Duration
		rec  *planner.Record
		want time.Duration
	}{{0, nil, 0}, {5 * time.Second, nil, 5 * time.Second}, {6 * time.Second, &planner.Record{ClusterID: 1, Token: "t", Epoch: 1}, 0}, {7 * time.Second, nil, 0}} {
		o := planner.Observation{Self: planner.Self{Name: "m3"}, Local: planner.Local{Empty: true}, Record: c.rec}
		m3.observeQuorumLoss(ctx, &o, t0.Add(c.at))
		if o.RecordMissingFor != c.want {
			t.Fatalf("at %s (record %v): RecordMissingFor %s, want %s", c.at, c.rec != nil, o.RecordMissingFor, c.want)
		}
	}
}

// Sim seed 682 with CollectRunning: the member whose recovery found a
// delta segment damaged saw the chain end before it, below a survivor's
// data, and waited for that survivor to recover from its data; the
// survivor, seeing the whole chain, waited for that member to restore the
// snapshot. Neither moved, for good. The member now names the damaged
// segment in its /status, and its peers leave it out of the chain they
// observe too.
func TestAPeersDamagedSegmentIsLeftOut(t *testing.T) {
	f := newChainFixture(t)
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(f.dir, f.second.Name))
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(filepath.Join(f.dir, f.second.Name), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	var o planner.Observation
	f.m.observeLatestSnapshot(ctx, &o, time.Now())
	d := planner.Decision{Kind: planner.RecoverQuorum, Name: "m0", From: planner.FromSnapshot, Snapshot: f.snap.Name,
		Record: &planner.Record{Token: coord.NewToken(), Epoch: 2, Seeder: "m0", Source: planner.SnapshotSource(f.snap.Name)}}
	f.m.lockForTest(t)
	err = f.m.act(ctx, o, d)
	f.m.releaseLock(ctx)
	var short *datadir.ChainShortError
	if !errors.As(err, &short) || short.Damaged != f.second.Name {
		t.Fatalf("recovery over a damaged segment: %v, want refused naming %s", err, f.second.Name)
	}
	if err := f.m.serveStatus(); err != nil {
		t.Fatal(err)
	}
	insts, err := f.k.prov.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A peer that never read the damaged segment.
	k1 := newKit(t, "m1")
	m1 := k1.memberWith("m1", nil, &backup.Snapshots{Store: f.store})
	var before planner.Observation
	m1.observeLatestSnapshot(ctx, &before, time.Now())
	if before.LatestSnapshot == nil || before.LatestSnapshot.Revision != f.second.Revision {
		t.Fatalf("the peer observes %+v, want the whole chain to %d (it read no segment)", before.LatestSnapshot, f.second.Revision)
	}
	if peers, unreachable := m1.peerStatuses(ctx, insts); len(peers) != 1 || unreachable != 0 {
		t.Fatalf("m0's /status: %+v, %d unreachable", peers, unreachable)
	}
	var after planner.Observation
	m1.observeLatestSnapshot(ctx, &after, time.Now())
	if after.LatestSnapshot == nil || after.LatestSnapshot.Revision != f.first.Revision {
		t.Fatalf("the peer observes %+v after m0's /status, want the chain to end at %d, before the damaged %s", after.LatestSnapshot, f.first.Revision, f.second.Name)
	}
	// A peer's mark lasts while a peer names it (data review of collect,
	// session 13, finding 3: it never expired, so one false mark ended
	// the chain for good). m0 forgets it (an object re-uploaded, its
	// marks found stale): the whole chain counts again.
	f.m.mu.Lock()
	f.m.status.DamagedDeltas = nil
	f.m.mu.Unlock()
	if peers, unreachable := m1.peerStatuses(ctx, insts); len(peers) != 1 || unreachable != 0 {
		t.Fatalf("m0's /status: %+v, %d unreachable", peers, unreachable)
	}
	var forgot planner.Observation
	m1.observeLatestSnapshot(ctx, &forgot, time.Now())
	if forgot.LatestSnapshot == nil || forgot.LatestSnapshot.Revision != f.second.Revision {
		t.Fatalf("no peer names %s any more: the peer observes %+v, want the whole chain to %d", f.second.Name, forgot.LatestSnapshot, f.second.Revision)
	}
}

// Sim seed 1004733 with CollectRunning: Consul lost its state, and the
// leader of cluster 465 read no record; Nomad collected it right after,
// so its observation failed on the provider from then on and it wrote no
// summary (it knew no record). Consul restored an older record and
// summary, and nothing a replacement read named the cluster it served.
// A leader whose last record read was none writes the summary for its own
// data's confirmed cluster.
func TestALeaderWithoutARecordWritesItsSummaryUnobserved(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0")
	m0 := k.member("m0", nil)
	k.seed(m0)
	waitUntil(t, 10*time.Second, "m0 leads, its metadata confirmed", func() (bool, string) {
		meta, err := m0.dir.ReadMeta()
		return m0.etcdServerLeader() != 0 && err == nil && meta.ClusterID != 0, fmt.Sprintf("leader %x, meta %+v (%v)", m0.etcdServerLeader(), meta, err)
	})
	if err := k.co.Delete(ctx, "summary"); err != nil && !errors.Is(err, coord.ErrNotStored) {
		t.Fatal(err)
	}
	m0.mu.Lock()
	m0.record = nil // Consul lost its state
	m0.mu.Unlock()
	m0.summary.last = nil
	m0.publishSummaryUnobserved(ctx)
	b, err := k.co.Get(ctx, "summary")
	if err != nil {
		t.Fatalf("the leader without a record wrote no summary: %v", err)
	}
	meta, _ := m0.dir.ReadMeta()
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil || s.Leader != "m0" || s.ClusterID != fmt.Sprintf("%x", meta.ClusterID) || s.Epoch != meta.Epoch || len(s.Members) != 1 {
		t.Fatalf("summary %s (%v), want m0 leading its data's cluster %x of epoch %d", b, err, meta.ClusterID, meta.Epoch)
	}
}
