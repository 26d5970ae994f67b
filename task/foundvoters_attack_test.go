package task

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Review rev13b D4: with TLS off (or one CA shared by several clusters) a
// forged /status at a peer's address named another cluster's serving
// voter, with that cluster's id, among its found voters. The member
// probed it for the id it was given, found it answering with a leader and
// held its own cluster's recovery back — and, probing it again itself at
// every loop, for as long as that other cluster serves, long after the
// forged answer. A peer's found voter for a cluster id this member does
// not know of its own cluster (its data's, the record's, the summary's,
// the store's writers', its peers' data) is still asked (dropping it at
// once dropped a restored cluster's real voter, review rev14b F1), but its
// answers do not refresh the word: it lapses one recovery grace after the
// forged /status last named it, however long the other cluster serves. A
// forged /status holds recoveries back only while it keeps answering, as
// claiming to be a healthy voter itself already does.
func TestAPeersFoundVoterOfAnotherClusterIsNotTaken(t *testing.T) {
	ctx := context.Background()
	other, otherID, _ := plainVoter(t)
	k := newKit(t, "m0", "m1")
	const grace = time.Minute
	k.cl.RecoveryGrace = grace
	// This cluster's record: confirmed, cluster 0xabc, quorum lost.
	l, err := k.co.Lock(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := k.co.CreateRecord(ctx, l, coord.Record{ClusterID: 0xabc, Token: "tok", Epoch: 1, Seeder: "m0"})
	if err != nil {
		t.Fatal(err)
	}
	// m0's address answers a forged /status naming the other cluster's voter.
	forged, _ := json.Marshal(status.Member{Name: "m0", Cluster: "kit", FoundVoters: []status.FoundVoter{
		{Name: "x", ClientURLs: []string{other}, ClusterIDs: []uint64{otherID}, Leader: true}}})
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(k.cl.Provider.Static[0].StatusPort)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(forged) })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	m1 := k.member("m1", nil)
	clk := &fakeClock{t: time.Now()}
	m1.opts.Clock = clk
	m1.readRecord(t)
	named := func(when string) bool {
		t.Helper()
		o, err := m1.observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: known healthy %q, unlisted %q", when, o.KnownHealthy, o.UnlistedVoters)
		return slices.ContainsFunc(append(o.KnownHealthy, o.UnlistedVoters...), func(s string) bool { return strings.HasPrefix(s, "x (") })
	}
	// While the forged /status answers, its word holds m1 back (as its
	// own forged health would).
	if !named("the forger answers") {
		t.Fatalf("a peer's found voter of another cluster, named a moment ago, is not waited for")
	}
	_ = srv.Close() // the forger stops answering; the other cluster serves on
	clk.advance(grace / 2)
	if !named("half the grace after the forged word") {
		t.Fatalf("a peer's word half a grace old lapsed early")
	}
	clk.advance(grace / 2)
	if named("the grace after the forged word") {
		t.Fatalf("m1 (record of cluster abc) still waits on cluster %x's voter a grace after the forged word: its own probes kept the word alive", otherID)
	}
	// The same word for a cluster id m1 knows is refreshed by m1's own
	// probes: the record names that cluster now.
	rec.ClusterID = otherID
	if _, err := k.co.UpdateRecord(ctx, l, rec); err != nil {
		t.Fatal(err)
	}
	m1.readRecord(t)
	m1.takeFoundVoters([]status.FoundVoter{{Name: "x", ClientURLs: []string{other}, ClusterIDs: []uint64{otherID}, Leader: true}}, clk.Now())
	for _, step := range []time.Duration{0, grace / 2, grace / 2, grace / 2} {
		clk.advance(step)
		if !named("a voter of the record's cluster") {
			t.Fatalf("a peer's found voter of the record's cluster, answering m1's own probes, lapsed")
		}
	}
}
