package task

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
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
// forged answer. A peer's found voter is asked only for cluster ids this
// member knows of its own cluster (its data's, the record's, the
// summary's, the store's writers', its peers' data): a forged /status can
// then hold recoveries back only while it answers, as claiming to be a
// healthy voter itself already does.
func TestAPeersFoundVoterOfAnotherClusterIsNotTaken(t *testing.T) {
	ctx := context.Background()
	other, otherID, _ := plainVoter(t)
	k := newKit(t, "m0", "m1")
	k.cl.RecoveryGrace = time.Minute
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
	m1.readRecord(t)
	o, err := m1.observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.KnownHealthy)+len(o.UnlistedVoters) != 0 {
		t.Fatalf("m1 (record of cluster abc) named %q %q: a forged /status made it wait on cluster %x's voter", o.KnownHealthy, o.UnlistedVoters, otherID)
	}
	// The same word for a cluster id m1 knows is taken: the record names
	// that cluster now.
	rec.ClusterID = otherID
	if _, err := k.co.UpdateRecord(ctx, l, rec); err != nil {
		t.Fatal(err)
	}
	m1.readRecord(t)
	if o, err = m1.observe(ctx); err != nil || len(o.KnownHealthy) != 1 || !strings.HasPrefix(o.KnownHealthy[0], "x (") {
		t.Fatalf("a peer's found voter of the record's cluster: known healthy %q (%v), want x", o.KnownHealthy, err)
	}
}
