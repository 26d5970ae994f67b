package task

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// TestSnapshotIsStampedWithTheDataItRunsNotARewrittenRecord (rev12-sec
// F4): a member stamped each snapshot's epoch and cluster id from the
// Consul record it last observed, and MACed them. A Consul key writer
// (no KEK) rewrote the record (epoch 9, cluster id bad) and the member's
// next save MACed a genuine snapshot as of that incarnation: one that
// members' lineage rule then places where the writer chose (above the
// running incarnation, or as another incarnation's). Now the stamp is the
// epoch and cluster id of the member's own data (its etcd-nomad.json,
// what its etcd runs), and while the record names another incarnation
// the save is skipped with the reason.
func TestSnapshotIsStampedWithTheDataItRunsNotARewrittenRecord(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0")
	m, store, _ := k.memberWithMACedStore("m0", backup.Snapshots{RetainCount: 10})
	put(t, k.seedForTest(m), "k", "v")
	m.readRecord(t)
	rec, err := k.co.Record(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.backups.Save(ctx, m.clientURL(m.self), "control"); err != nil {
		t.Fatalf("control save: %v", err)
	}
	list, err := store.List(ctx)
	if err != nil || len(list) != 1 || list[0].Epoch != rec.Epoch || list[0].ClusterID != strconv.FormatUint(rec.ClusterID, 16) {
		t.Fatalf("control: %+v (%v), want one snapshot stamped epoch %d cluster id %x", list, err, rec.Epoch, rec.ClusterID)
	}

	// The Consul key writer's records: the running incarnation's token
	// and cluster id at another epoch; then another cluster id too.
	for _, rw := range []struct {
		epoch     uint64
		clusterID uint64
	}{{9, rec.ClusterID}, {9, 0xbad}} {
		l, err := k.co.Lock(ctx, "attacker")
		if err != nil {
			t.Fatal(err)
		}
		cur, err := k.co.Record(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rewritten := cur
		rewritten.Epoch, rewritten.ClusterID = rw.epoch, rw.clusterID
		if _, err := k.co.UpdateRecord(ctx, l, rewritten); err != nil {
			t.Fatal(err)
		}
		l.Unlock(ctx)
		m.readRecord(t)
		err = m.backups.Save(ctx, m.clientURL(m.self), "after the record was rewritten")
		list, _ = store.List(ctx)
		for _, s := range list {
			if s.Epoch != rec.Epoch || s.ClusterID != strconv.FormatUint(rec.ClusterID, 16) {
				t.Fatalf("record rewritten to epoch %d cluster id %x: the member MACed a genuine snapshot as of that incarnation: %s (epoch %d, cluster id %s)", rw.epoch, rw.clusterID, s.Name, s.Epoch, s.ClusterID)
			}
		}
		if !errors.Is(err, backup.ErrRecordDisagrees) {
			t.Fatalf("record rewritten to epoch %d cluster id %x: save: %v; want it skipped (backup.ErrRecordDisagrees)", rw.epoch, rw.clusterID, err)
		}
		t.Logf("skipped: %v", err)
	}
}
