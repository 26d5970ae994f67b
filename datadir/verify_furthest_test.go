package datadir_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// An operator's -accept-data-loss takes a chain up to where it verifies
// furthest (review of the operator model, session 13, F3): VerifyInstall's
// refusal names the first damaged segment, and its End is the furthest
// any way around the damage reached (here past a bridged damaged segment,
// up to a second one nothing bridges), so that verifying again for that
// End keeps the bridged writes.
func TestVerifyInstallRefusalNamesTheFurthestVerifiedEnd(t *testing.T) {
	b, x := bridgedBackup(t)
	s := b.base.Revision
	time.Sleep(1100 * time.Millisecond) // a later name (seconds)
	y := b.storeSegment(t, snapshot.Segment{Events: puts(s+151, s+200)})
	damageFile(t, filepath.Join(b.dir, y.Name))
	src := datadir.Source{Store: b.store, Name: b.base.Name, Want: s + 200}
	_, err := datadir.VerifyInstall(context.Background(), filepath.Join(t.TempDir(), "etcd"), src)
	var short *datadir.ChainShortError
	if !errors.As(err, &short) {
		t.Fatalf("a chain damaged at %d..%d with nothing bridging it: %v, want a ChainShortError", s+151, s+200, err)
	}
	if short.Damaged != x.Name || short.End != s+150 {
		t.Fatalf("refusal: damaged %s, end %d; want the first damaged %s and the furthest verified end %d (around it)", short.Damaged, short.End, x.Name, s+150)
	}
	src.Want = short.End
	got, err := datadir.VerifyInstall(context.Background(), filepath.Join(t.TempDir(), "etcd"), src)
	if err != nil || got.End != s+150 {
		t.Fatalf("verified again for %d: end %d, %v", s+150, got.End, err)
	}
}
