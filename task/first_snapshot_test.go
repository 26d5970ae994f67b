package task

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// A new cluster's first snapshot is saved as soon as the record confirms
// it, not at the leader's next check a minute later: the loop used to check
// the empty store under the seed's own unconfirmed record, the save was
// refused, and the first snapshot came 60 s after the seed (sim seed 220
// lost its quorum at 14 s with nothing saved).
func TestFirstSnapshotFollowsTheSeedsConfirmation(t *testing.T) {
	k := newKit(t, "m0")
	fs, err := file.New(filepath.Join(k.dir, "snapshots"), k.cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	m0 := k.memberWith("m0", nil, &backup.Snapshots{Store: fs, Interval: 30 * time.Minute, RetainCount: 5})
	start := time.Now()
	runLoop(t, m0)
	for deadline := start.Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		list, err := fs.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if full := snapshot.Full(list); len(full) > 0 {
			t.Logf("first snapshot %s %v after the loop started", full[0].Name, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot %v after the loop started (m0: %s; last snapshot error %q)", time.Since(start).Round(time.Second), m0.reason(), m0.backups.SnapshotErr())
		}
	}
}
