package main

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// 'recover -from snapshot:NAME' with an authentic NAME, while the store
// holds a newer object of another chain that does not authenticate (its
// writes may be the cluster's newest): as "latest" names it, the named
// restore refuses, naming it, with nothing recorded, unless
// -accept-data-loss, which restores NAME and warns of it (review
// rev12-data F5). Red before: the named restore went ahead silently.
func TestNamedSnapshotRefusesBesideANewerRefusedObject(t *testing.T) {
	f := newRestoreFixture(t) // written without a KEK: no MAC
	setNewKEK(t)
	store, enc := f.storeAndEncryption(t)
	ctx := context.Background()
	if _, err := snapshot.Adopt(ctx, store, enc, append([]snapshot.Meta{f.snap}, f.chain...)); err != nil {
		t.Fatal(err)
	}
	newer := f.snap
	newer.Name = strings.Replace(f.snap.Name, "-r0", "-r9", 1)
	newer.Revision = f.chain[len(f.chain)-1].Revision + 100
	newer.MAC = ""
	if err := store.PutMeta(ctx, newer); err != nil {
		t.Fatal(err)
	}
	ui := cli.NewMockUi()
	code := (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "snapshot:" + f.snap.Name, "-member", "m0"})
	errs := ui.ErrorWriter.String()
	t.Logf("recover -from snapshot:%s: exit %d\n%s%s", f.snap.Name, code, ui.OutputWriter, errs)
	if code == 0 || !strings.Contains(errs, newer.Name) || !strings.Contains(errs, "-accept-data-loss") {
		t.Fatalf("recover -from snapshot:%s beside %s (revision %d, no MAC): exit %d; want a refusal naming it and -accept-data-loss", f.snap.Name, newer.Name, newer.Revision, code)
	}
	f.unchanged(t)

	ui = cli.NewMockUi()
	code = (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "snapshot:" + f.snap.Name, "-member", "m0", "-accept-data-loss"})
	t.Logf("with -accept-data-loss: exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
	if code != 0 || !strings.Contains(ui.ErrorWriter.String(), newer.Name) {
		t.Fatalf("recover -from snapshot:%s -accept-data-loss: exit %d; want the restore, warning of %s", f.snap.Name, code, newer.Name)
	}
}
