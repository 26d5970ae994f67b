package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Review rev13-data 3 (MED): Consul restored an older confirmed record (epoch 1) after
// the cluster ran epoch 2 and snapshotted it, and every epoch-2 copy was
// lost. The epoch-2 snapshot is genuine (MAC verifies) but, to the
// restored record, "of no incarnation of the lineage". Members wait beside
// it (lineageSnapshot turns it into a refused object, refusedAhead). The
// operator's 'recover -from snapshot:latest' picks the older epoch-1
// snapshot with only a warning and records it, without -accept-data-loss,
// although a named restore beside a newer refused object needs it (F5).
func TestLatestBesideANewerForeignSnapshotNeedsAcceptDataLossAndAHigherEpoch(t *testing.T) {
	f := newRestoreFixture(t) // no MAC yet
	ctx := context.Background()
	store, _ := f.storeAndEncryption(t)
	end := f.chain[len(f.chain)-1].Revision
	newer := f.snap
	newer.Name = strings.Replace(f.snap.Name, "-r0", "-r9", 1)
	if newer.Name == f.snap.Name {
		t.Fatalf("cannot derive a name from %s", f.snap.Name)
	}
	raw, err := os.ReadFile(filepath.Join(f.storeDir, f.snap.Name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.storeDir, newer.Name), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	newer.Epoch, newer.ClusterID, newer.Revision = 2, "beef", end+100
	if err := store.PutMeta(ctx, newer); err != nil {
		t.Fatal(err)
	}
	setNewKEK(t)
	store, enc := f.storeAndEncryption(t)
	if _, err := snapshot.Adopt(ctx, store, enc, append([]snapshot.Meta{f.snap, newer}, f.chain...)); err != nil {
		t.Fatal(err)
	}
	ui := cli.NewMockUi()
	code := (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "snapshot:latest", "-member", "m0"})
	t.Logf("exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
	if code == 0 {
		got, _ := f.co.Record(ctx)
		t.Fatalf("recorded %+v from the older snapshot beside genuine epoch-2 snapshot %s (revision %d) without -accept-data-loss", got, newer.Name, newer.Revision)
	}
	// Accepted: recorded as an epoch above the newer snapshot's, never
	// a second incarnation of its epoch.
	ui = cli.NewMockUi()
	code = (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "snapshot:latest", "-member", "m0", "-accept-data-loss"})
	t.Logf("-accept-data-loss: exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
	got, err := f.co.Record(ctx)
	if code != 0 || err != nil {
		t.Fatalf("recover -from snapshot:latest -accept-data-loss: exit %d (%v)", code, err)
	}
	if want := "snapshot:" + f.snap.Name; string(got.Source) != want || got.Epoch <= newer.Epoch {
		t.Fatalf("recorded %s as epoch %d; want %s above the newer snapshot's epoch %d", got.Source, got.Epoch, want, newer.Epoch)
	}
}
