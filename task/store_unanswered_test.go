package task

// Review rev12-data F4: no seed or restore decided while the store's listing does not answer.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/coord/local"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// failingListStore: the store does not answer a listing (S3 503, a
// partition to the store) at the moment it is observed.
type failingListStore struct{ snapshot.Store }

func (failingListStore) List(context.Context) ([]snapshot.Meta, error) {
	return nil, errors.New("503 Slow Down")
}

// TestRev12NoEmptySeedWhileTheStoreDoesNotAnswer: Consul lost its state
// and every member its data; the store holds the cluster's snapshots
// (authentic ones, and refused ones), but its listing fails at this
// observation. LatestSnapshot and RefusedSnapshot are both nil ("none or
// unknown"), and the planner seeds a new empty cluster over the store's
// data: invariant 8 (with no data anywhere, the newest snapshot is
// restored rather than an empty seed) and the refused-object wait both
// rest on a listing that answered.
func TestRev12NoEmptySeedWhileTheStoreDoesNotAnswer(t *testing.T) {
	f := newAuthFixture(t, func(snapshot.Encryption) snapshot.Encryption { return snapshot.Encryption{} })
	ctx := context.Background()
	f.m.halt()
	if err := os.RemoveAll(f.m.dir.Root); err != nil {
		t.Fatal(err)
	}
	co, err := local.New(filepath.Join(f.k.dir, "coord-after-loss"))
	if err != nil {
		t.Fatal(err)
	}
	m := f.k.memberWith("m0", co, &backup.Snapshots{Store: failingListStore{f.store}, Encryption: f.enc})
	m.lockForTest(t)
	defer m.releaseLock(ctx)
	o, err := m.observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := planner.Plan(o)
	if d.Kind == planner.Seed {
		t.Fatalf("%s (%s) while the store, which holds %s, did not answer its listing", d.Kind, d.Reason, f.snap.Name)
	}
}
