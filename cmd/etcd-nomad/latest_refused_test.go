package main

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// newFirstDeltaAuthenticFixture is the restore fixture under a KEK, in
// which the snapshot and its first delta authenticate and the later
// deltas do not (written without a MAC).
func newFirstDeltaAuthenticFixture(t *testing.T) *restoreFixture {
	t.Helper()
	f := newRestoreFixture(t) // written without a KEK: no MAC
	setNewKEK(t)
	store, enc := f.storeAndEncryption(t)
	if _, err := snapshot.Adopt(context.Background(), store, enc, []snapshot.Meta{f.snap, f.chain[0]}); err != nil {
		t.Fatal(err)
	}
	return f
}

// "latest" is the newest snapshot that authenticates; when the store holds
// a newer object that does not (here: the last deltas of its chain,
// written without a MAC), 'snapshot verify latest' (and restore, which
// resolves it the same way) and 'recover -from snapshot:latest' say so,
// naming it, rather than pass over it silently (review data11 F8).
func TestLatestWarnsOfANewerRefusedObject(t *testing.T) {
	f := newFirstDeltaAuthenticFixture(t)
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

// 'snapshot restore' and 'recover -from snapshot:' choose the same way
// (chooseRestore): deltas of the snapshot that do not authenticate and
// hold revisions past the chain end it reaches (here the last two of
// its chain, written without a MAC; a store writer can append one to any
// chain) make 'snapshot restore' refuse, naming them and what takes them,
// with nothing restored or recorded, as 'recover' does (review data11
// F5); -accept-data-loss restores the chain that authenticates, warning
// of what it drops. Red before (branch mac7, before the two commands took
// one path): 'snapshot restore latest' restored to the first delta's end
// and said nothing of the two after it.
func TestSnapshotRestoreRefusesDeltasPastTheChainEndAsRecoverDoes(t *testing.T) {
	f := newFirstDeltaAuthenticFixture(t)
	left := f.chain[1:]
	ui := cli.NewMockUi()
	code := (&snapshotRestoreCommand{ui: ui}).Run([]string{"-config", f.config, "-member", "m0", "latest"})
	errs := ui.ErrorWriter.String()
	t.Logf("snapshot restore latest: exit %d\n%s%s", code, ui.OutputWriter, errs)
	if code == 0 || !strings.Contains(errs, "-accept-data-loss") || !strings.Contains(errs, "-accept-unauthenticated-deltas") {
		t.Fatalf("snapshot restore latest beside deltas past its chain end that do not authenticate: exit %d; want a refusal naming the flags", code)
	}
	for _, d := range left {
		if !strings.Contains(errs, d.Name) {
			t.Errorf("the refusal does not name %s", d.Name)
		}
	}
	f.unchanged(t)

	ui = cli.NewMockUi()
	code = (&snapshotRestoreCommand{ui: ui}).Run([]string{"-config", f.config, "-member", "m0", "-accept-data-loss", "latest"})
	t.Logf("snapshot restore -accept-data-loss latest: exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
	if code != 0 || !strings.Contains(ui.ErrorWriter.String(), left[len(left)-1].Name) {
		t.Fatalf("snapshot restore -accept-data-loss: exit %d; want the restore, warning of %s", code, left[len(left)-1].Name)
	}
	if got, err := f.co.Record(context.Background()); err != nil || got.Epoch != f.rec.Epoch+1 {
		t.Fatalf("record after snapshot restore -accept-data-loss: %+v (%v), want epoch %d", got, err, f.rec.Epoch+1)
	}
}
