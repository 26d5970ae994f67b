package task

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// TestDeltasAreStampedWithTheDataItRunsNotARewrittenRecord: full
// snapshots are stamped from the member's own data (snapshotSource), but
// the delta recorder took its base (and so its stamp) from the Consul record:
// a Consul key writer (no KEK) rewrites the record's cluster id to that of
// a genuine snapshot of another incarnation of the same epoch (put back in
// the store) and holds the lock; the leader's next recorder MACs the
// running cluster's writes as deltas of that foreign snapshot. It starts
// only while the base's stamp is what the member's data runs and the
// record names (session-13 security review, red before).
func TestDeltasAreStampedWithTheDataItRunsNotARewrittenRecord(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0")
	m, store, enc := k.memberWithMACedStore("m0", backup.Snapshots{RetainCount: 10, DeltaEvery: time.Second})
	cli := k.seedForTest(m)
	put(t, cli, "k", "v")
	m.readRecord(t)
	rec, err := k.co.Record(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A genuine snapshot of another incarnation of the same epoch (same
	// job name and KEK, cluster id bad), put back by a store writer.
	foreign, err := snapshot.Save(ctx, snapshot.From{Endpoint: m.clientURL(m.self), SpoolDir: k.dir}, store,
		snapshot.Source{Cluster: k.cl.Name, ClusterID: "bad", Epoch: rec.Epoch}, enc, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if err := m.backups.Save(ctx, m.clientURL(m.self), "own"); err != nil {
		t.Fatal(err)
	}
	// The Consul key writer rewrites the record's cluster id and keeps the
	// lock (so no member corrects it).
	l, err := k.co.Lock(ctx, "attacker")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	rw := rec
	rw.ClusterID = 0xbad
	if _, err := k.co.UpdateRecord(ctx, l, rw); err != nil {
		t.Fatal(err)
	}
	m.readRecord(t)
	// Control: a full save is refused (F4 fix).
	if err := m.backups.Save(ctx, m.clientURL(m.self), "after rewrite"); err == nil {
		t.Fatal("control: full save went ahead under the rewritten record")
	}
	if m.backups.WantFull() {
		t.Fatal("control: a full snapshot is wanted first; no recorder would start")
	}
	m.backups.RetryDeltasNow()
	m.backups.SuperviseDeltas(ctx, true)
	if m.backups.Recording() != "" {
		for i := 0; i < 5; i++ {
			put(t, cli, "tenant/"+strconv.Itoa(i), "running cluster's write")
		}
		time.Sleep(2500 * time.Millisecond)
		m.backups.StopDeltas(true)
	}
	all, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := enc.Authentic(all)
	for _, d := range kept {
		if d.Kind == snapshot.KindDelta && d.Base == foreign.Name {
			t.Fatalf("record rewritten to cluster id bad: the member MACed the running cluster's writes as a genuine delta %s of another incarnation's snapshot %s (cluster id %s, epoch %d, revisions to %d)", d.Name, foreign.Name, d.ClusterID, d.Epoch, d.Revision)
		}
	}
}

// TestRunningDeltaRecorderStopsWhenTheRecordNamesAnotherIncarnation: a
// recorder started under a record that agreed with the member's data kept
// running whatever the record became. It is stopped (and logged) at the
// loop that finds them disagreeing, and starts again once they agree
// (red before: it kept running).
func TestRunningDeltaRecorderStopsWhenTheRecordNamesAnotherIncarnation(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0")
	m, _, _ := k.memberWithMACedStore("m0", backup.Snapshots{RetainCount: 10, DeltaEvery: time.Second})
	cli := k.seedForTest(m)
	put(t, cli, "k", "v")
	m.readRecord(t)
	if err := m.backups.Save(ctx, m.clientURL(m.self), "own"); err != nil {
		t.Fatal(err)
	}
	m.backups.RetryDeltasNow()
	m.backups.SuperviseDeltas(ctx, true)
	defer m.backups.StopDeltas(true)
	if m.backups.Recording() == "" {
		t.Fatal("control: no recorder started while the record and the data agree")
	}
	rec, err := k.co.Record(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := k.co.Lock(ctx, "attacker")
	if err != nil {
		t.Fatal(err)
	}
	rw := rec
	rw.ClusterID = 0xbad
	written, err := k.co.UpdateRecord(ctx, l, rw)
	if err != nil {
		t.Fatal(err)
	}
	m.readRecord(t)
	m.backups.SuperviseDeltas(ctx, true)
	if base := m.backups.Recording(); base != "" {
		t.Fatalf("record rewritten to cluster id %x: the recorder on %s kept running", rw.ClusterID, base)
	}
	written.ClusterID = rec.ClusterID
	if _, err := k.co.UpdateRecord(ctx, l, written); err != nil {
		t.Fatal(err)
	}
	l.Unlock(ctx)
	m.readRecord(t)
	m.backups.RetryDeltasNow()
	m.backups.SuperviseDeltas(ctx, true)
	if m.backups.Recording() == "" {
		t.Fatal("the record agrees again: no recorder started")
	}
}
