package task

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// TestBackupsResumeAfterAFailedMetadataWrite: afterReady wrote the member
// and cluster ids into the data dir's metadata once and never again. One
// failed write (a full disk for a moment; here a directory where the write
// puts its temporary file) left cluster id 0 there, and since a member
// saves only data of the record's incarnation (snapshotSource) every
// snapshot was refused as "not confirmed yet", silently: backups stopped
// for good. The write is tried again at each loop, and until it succeeds
// /status says why no snapshot is saved (session-13 data review, red
// before: the ids stayed 0).
func TestBackupsResumeAfterAFailedMetadataWrite(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0")
	m, store, _ := k.memberWithMACedStore("m0", backup.Snapshots{RetainCount: 10, Interval: time.Hour})
	cli := k.seedForTest(m)
	put(t, cli, "k", "v")
	m.readRecord(t)
	clusterID := func() uint64 {
		meta, err := m.dir.ReadMeta()
		if err != nil {
			t.Fatal(err)
		}
		return meta.ClusterID
	}
	for deadline := time.Now().Add(10 * time.Second); clusterID() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("control: afterReady never wrote the cluster id")
		}
	}
	// The write after etcd became ready failed: the ids are 0.
	m.mu.Lock()
	m.metaCompletedFor = nil
	m.mu.Unlock()
	meta, err := m.dir.ReadMeta()
	if err != nil {
		t.Fatal(err)
	}
	meta.MemberID, meta.ClusterID = 0, 0
	if err := m.dir.WriteMeta(meta); err != nil {
		t.Fatal(err)
	}
	blocker := filepath.Join(m.dir.Current(), datadir.MetaFile+".tmp")
	if err := os.Mkdir(blocker, 0o700); err != nil {
		t.Fatal(err)
	}
	save := func() {
		t.Helper()
		if !m.backups.Start(m.clientURL(m.self), "scheduled", true) {
			t.Fatal("no save started")
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if !m.backups.Saving() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the save did not end")
			}
		}
	}
	m.retryMeta() // fails: the disk is still "full"
	if id := clusterID(); id != 0 {
		t.Fatalf("control: the metadata was written through the blocked path (cluster id %x)", id)
	}
	save()
	st, _ := m.health(ctx)
	if !strings.Contains(st.SnapshotError, "not confirmed yet") {
		t.Fatalf("no snapshot saved while the cluster id is unwritten, and /status's snapshot_error is %q: want the reason", st.SnapshotError)
	}
	// The disk has room again: the next loop writes the ids, the next
	// save goes through, and /status no longer warns.
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	m.retryMeta()
	if id := clusterID(); id == 0 {
		t.Fatal("the loop after the failed write did not write the cluster id: backups stay stopped")
	}
	save()
	if st, _ := m.health(ctx); st.SnapshotError != "" {
		t.Fatalf("after the ids were written: snapshot_error %q", st.SnapshotError)
	}
	list, err := store.List(ctx)
	if err != nil || len(snapshot.Full(list)) != 1 {
		t.Fatalf("store after the retried write: %d snapshots, %v; want 1", len(list), err)
	}
}
