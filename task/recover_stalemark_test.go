package task

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// Data-safety review: a member's in-memory mark of a damaged
// delta (m.damagedDeltas, never cleared while the process runs) is
// applied to an operator's restore too. The operator's command read and
// verified the whole chain (the segment is sound now: re-uploaded, or the
// earlier read was what was damaged) and recorded SourceRevision at its
// end; the seeder leaves the marked segment out, stops short, and refuses
// on every loop until its process restarts. Safe (nothing is recorded or
// moved), but the operator's recovery never completes on this seeder and
// the refusal names no damaged segment.
func TestOperatorRestoreIsNotStoppedByAStaleDamagedMark(t *testing.T) {
	k := newKit(t, "m0")
	dir := filepath.Join(k.dir, "snapshots")
	store, err := file.New(dir, k.cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	m := k.memberWith("m0", k.co, &Snapshots{Store: store})
	cli := k.seedForTest(m)
	put(t, cli, "saved", "in-snapshot")
	rec, _ := k.co.Record(context.Background())
	ctx := context.Background()
	snap, err := snapshot.Save(ctx, snapshot.From{Endpoint: m.clientURL(m.self), SpoolDir: k.dir}, store, snapshot.Source{Cluster: k.cl.Name, ClusterID: strconv.FormatUint(rec.ClusterID, 16), Epoch: 1}, snapshot.Encryption{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := storeDelta(t, store, snap, snap.Revision+1, 10)
	second := storeDelta(t, store, snap, first.Revision+1, 10)
	// An earlier automatic attempt found the second segment damaged.
	m.damagedDeltas = map[string]bool{second.Name: true}

	op := planner.Record{Token: newToken(), Epoch: 2, Seeder: "m0", Source: planner.SnapshotSource(snap.Name),
		LastConfirmedToken: rec.Token, LastConfirmedEpoch: 1, Operator: true, SourceRevision: second.Revision}
	l, err := k.co.Lock(ctx, "operator")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.co.UpdateRecord(ctx, l, StoredRecord(op, rec.Index)); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	d := planner.Decision{Kind: planner.RecoverQuorum, Name: "m0", From: planner.FromSnapshot, Target: snap.Name, Record: &op}
	for try := 1; try <= 2; try++ {
		m.lockForTest(t)
		err = m.act(ctx, planner.Observation{}, d)
		m.releaseLock(ctx)
		if err == nil {
			return
		}
		t.Logf("try %d: %v", try, err)
	}
	t.Fatalf("the operator's restore, verified whole by its command, is refused on every try by this seeder: %v", err)
}
