package task

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// Sim seed 5 with CollectRunning: Nomad collected the allocations of a
// serving majority (their hosts cut off from its servers, not from their
// peers) and placed replacements, which hold no data and so no membership
// of their own. An empty replacement with the record of that cluster, a
// snapshot in the store and no instance but itself listed must not
// recover beside it: it probes the members of the leader's summary (with
// their client URLs) for the record's cluster id. Red before: it decided
// to recover from the snapshot (the probe needed local data).
func TestEmptyMemberFindsTheSummarysHealthyMajority(t *testing.T) {
	if testing.Short() {
		t.Skip("three embedded members")
	}
	ctx := context.Background()
	k := newKit(t, "m0", "m1", "m2")
	ms, cli := startLoops(t, k)
	put(t, cli, "k", "v")
	rec, err := k.co.Record(ctx)
	if err != nil || rec.ClusterID == 0 {
		t.Fatalf("record %+v: %v", rec, err)
	}
	store, err := file.New(filepath.Join(k.dir, "snapshots"), k.cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Save(ctx, snapshot.From{Endpoint: ms["m0"].clientURL(ms["m0"].self), SpoolDir: k.dir}, store,
		snapshot.Source{Cluster: k.cl.Name, ClusterID: strconv.FormatUint(rec.ClusterID, 16), Epoch: rec.Epoch}, snapshot.Encryption{}, nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the leader's summary names every member's client URLs", func() (bool, string) {
		b, err := k.co.Get(ctx, "summary")
		if err != nil {
			return false, err.Error()
		}
		var s Summary
		if err := json.Unmarshal(b, &s); err != nil {
			return false, err.Error()
		}
		n := 0
		for _, sm := range s.Members {
			if len(sm.ClientURLs) > 0 {
				n++
			}
		}
		return n == 3, string(b)
	})
	ports := clustertest.FreePorts(t, 3)
	m3s := config.StaticMember{Name: "m3", Address: "127.0.0.1", ClientPort: ports[0], PeerPort: ports[1], StatusPort: ports[2]}
	k.cl.Provider.Static = append(k.cl.Provider.Static, m3s)
	k.prov.Set([]config.StaticMember{m3s}) // Nomad lists the replacement only
	m3 := k.memberWith("m3", nil, &backup.Snapshots{Store: store})
	m3.lockForTest(t)
	decide := func() planner.Decision {
		t.Helper()
		var d planner.Decision
		for range 3 { // past RecoveryGrace
			o, err := m3.observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !o.Local.Empty || o.Record == nil || o.MembersKnown {
				t.Fatalf("m3 observes data %v, record %v, members known %v: not the case under test", !o.Local.Empty, o.Record, o.MembersKnown)
			}
			d = planner.Plan(o)
			time.Sleep(300 * time.Millisecond)
		}
		return d
	}
	d := decide()
	if d.Kind != planner.Wait || !strings.Contains(d.Reason, "last known membership") {
		t.Fatalf("empty m3 beside the serving m0..m2: %s (%s), want a wait naming them", d.Kind, d.Reason)
	}
	named := 0
	for _, name := range []string{"m0", "m1", "m2"} {
		if strings.Contains(d.Reason, name+" (") {
			named++
		}
	}
	if named < 2 {
		t.Errorf("the wait names %d of m0..m2, want a majority: %s", named, d.Reason)
	}
	// The same member without what the probe found recovers: the probe
	// is what holds it back. (Without the summary it still finds them:
	// it asks again the members that answered, and the newest
	// snapshot's taker.)
	if err := k.co.Delete(ctx, "summary"); err != nil {
		t.Fatal(err)
	}
	o, err := m3.observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.KnownHealthy) < 2 {
		t.Fatalf("without the summary m3 forgot the majority that answered it: known healthy %q", o.KnownHealthy)
	}
	o.KnownHealthy = nil
	if d := planner.Plan(o); d.Kind != planner.RecoverQuorum {
		t.Fatalf("without the probe's answers: %s (%s), want the recovery the probe prevents", d.Kind, d.Reason)
	} else {
		t.Log(fmt.Sprintf("without the probe's answers m3 would %s: %s", d.Kind, d.Reason))
	}
	// Consul lost its state, the record and the summary with it: the
	// newest snapshot's metadata names the member it was taken from (m0),
	// which answers for the snapshot's cluster; no restore beside it.
	o = planner.Observation{ClusterName: k.cl.Name, Self: planner.Self{Name: "m3"}, Local: planner.Local{Empty: true},
		Instances: []planner.Instance{{Name: "m3"}}, HoldsLock: true, NewToken: "n", RecoveryGrace: k.cl.RecoveryGrace}
	m3.known.seen = nil // what it saw under the record
	m3.observeQuorumLoss(ctx, &o, time.Now())
	if o.LatestSnapshot == nil || len(o.KnownHealthy) == 0 || !strings.Contains(o.KnownHealthy[0], "taker of") {
		t.Fatalf("no record: snapshot %v, known healthy %q, want the snapshot's taker", o.LatestSnapshot, o.KnownHealthy)
	}
	if d := planner.Plan(o); d.Kind != planner.Wait || !strings.Contains(d.Reason, "last known membership") {
		t.Fatalf("no record: %s (%s), want a wait naming the snapshot's taker", d.Kind, d.Reason)
	}
	o.KnownHealthy, o.RecordMissingFor = nil, o.RecoveryGrace // past the grace a restore with no record waits
	if d := planner.Plan(o); d.Kind != planner.RecoverQuorum {
		t.Fatalf("no record, no probe: %s (%s), want the restore the probe prevents", d.Kind, d.Reason)
	}
}
