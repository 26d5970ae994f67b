package datadir_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Data-safety review: 'recover -from snapshot:' verifies with
// VerifyInstall and no Skip, Want the end of snapshot.Chain (as
// cmd/etcd-nomad/recover.go operatorRestore does). A damaged segment X
// that an overlapping segment Y bridges (the automatic path installs
// around it: TestDamagedSegmentBridgedByAnOverlapIsInstalledAround) makes
// the command refuse for good: it never leaves X out, so the operator
// cannot record a recovery from this snapshot although every revision
// of its chain is in the store, verified.
func TestOperatorVerifyGoesAroundABridgedDamagedSegment(t *testing.T) {
	b, x := bridgedBackup(t)
	s := b.base.Revision
	list, err := b.store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	end := b.base.Revision
	if chain, _ := snapshot.Chain(list, b.base); len(chain) > 0 {
		end = chain[len(chain)-1].Revision
	}
	got, err := datadir.VerifyInstall(context.Background(), filepath.Join(t.TempDir(), "etcd"), datadir.Source{Store: b.store, Name: b.base.Name, Want: end})
	if err != nil {
		t.Fatalf("the operator's verification (chain end %d) refuses a chain the store holds whole around damaged %s: %v", end, x.Name, err)
	}
	if got.End < s+150 {
		t.Fatalf("verified to %d, the store holds a verified chain to %d", got.End, s+150)
	}
}

// bridgedBackup stores a snapshot's chain s+1..s+50, x = s+51..s+100 and
// s+51..s+150 (s the snapshot's revision), each named a second after the
// one before, and damages x: the last segment bridges it.
func bridgedBackup(t *testing.T) (*backup, snapshot.Meta) {
	t.Helper()
	b := newBackup(t, 600)
	s := b.base.Revision
	b.storeSegment(t, snapshot.Segment{Events: puts(s+1, s+50)})
	time.Sleep(1100 * time.Millisecond) // a later name (seconds)
	x := b.storeSegment(t, snapshot.Segment{Events: puts(s+51, s+100)})
	time.Sleep(1100 * time.Millisecond)
	b.storeSegment(t, snapshot.Segment{Events: puts(s+51, s+150)})
	damageFile(t, filepath.Join(b.dir, x.Name))
	return b, x
}
