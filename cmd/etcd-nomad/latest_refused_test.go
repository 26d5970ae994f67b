package main

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// "latest" is the newest snapshot that authenticates; when the store holds
// a newer object that does not (here: the last deltas of its chain,
// written without a MAC), 'snapshot verify latest' (and restore, which
// resolves it the same way) and 'recover -from snapshot:latest' say so,
// naming it, rather than pass over it silently (review data11 F8).
func TestLatestWarnsOfANewerRefusedObject(t *testing.T) {
	f := newRestoreFixture(t) // written without a KEK: no MAC
	setNewKEK(t)
	store, enc := f.storeAndEncryption(t)
	// The snapshot and its first delta authenticate; the later ones do not.
	if _, err := snapshot.Adopt(context.Background(), store, enc, []snapshot.Meta{f.snap, f.chain[0]}); err != nil {
		t.Fatal(err)
	}
	newest := f.chain[len(f.chain)-1].Name
	ui := cli.NewMockUi()
	(&snapshotVerifyCommand{ui: ui}).Run([]string{"-config", f.config, "latest"})
	if errs := ui.ErrorWriter.String(); !strings.Contains(errs, newest) {
		t.Fatalf("snapshot verify latest passed over %s silently: %s%s", newest, ui.OutputWriter, errs)
	}
	ui = cli.NewMockUi()
	code := (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "snapshot:latest", "-member", "m0"})
	if errs := ui.ErrorWriter.String(); code == 0 || !strings.Contains(errs, newest) {
		t.Fatalf("recover -from snapshot:latest: exit %d, passing over %s: %s%s", code, newest, ui.OutputWriter, errs)
	}
	f.unchanged(t)
}
