package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// TestRecoverFromMemberBesideAPutBackIncarnation (reviews rev13-sec 5 and
// rev13-data 6, LOW): 'recover -from MEMBER' compared the member's data
// with the newest snapshot of the whole store, not of the record's
// lineage, so a put-back snapshot of another incarnation (epoch 7, below
// the member's revision) made it refuse and advise restoring the
// put-back one instead. Now the advice and the comparison take the
// lineage's newest; the put-back one is compared as an object members
// refuse (by its chain's reach, as the automatic path does), and the new
// epoch is above it all the same. Past the member's revision, it asks for
// -accept-data-loss, naming why members refuse it.
func TestRecoverFromMemberBesideAPutBackIncarnation(t *testing.T) {
	ctx := context.Background()
	f := newRestoreFixture(t)
	store, err := file.New(f.storeDir, "unit")
	if err != nil {
		t.Fatal(err)
	}
	end := f.chain[len(f.chain)-1].Revision
	f.status.Store(&status.Member{Name: "m0", Cluster: "unit", Token: "token-of-epoch-1", Epoch: 1, MemberID: 7, ClusterID: f.rec.ClusterID, Revision: end})
	run := func() (int, *cli.MockUi) {
		ui := cli.NewMockUi()
		code := (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "m0"})
		t.Logf("exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
		return code, ui
	}

	// Past the member's data: refused, naming why, not advising it as
	// the store's newest snapshot of the cluster.
	far := f.putBack(t, end+500)
	code, ui := run()
	if code == 0 || !strings.Contains(ui.ErrorWriter.String(), far.Name) || !strings.Contains(ui.ErrorWriter.String(), "no incarnation") || !strings.Contains(ui.ErrorWriter.String(), "-accept-data-loss") {
		t.Fatalf("recover -from m0 (revision %d) beside the put-back %s reaching %d: exit %d; want a refusal naming it as of no incarnation of the record and -accept-data-loss", end, far.Name, far.Revision, code)
	}
	f.unchanged(t)
	if err := store.Delete(ctx, far.Name); err != nil {
		t.Fatal(err)
	}

	// Below the member's data: the recovery goes ahead, above its epoch.
	near := f.putBack(t, end-1)
	code, ui = run()
	if code != 0 {
		t.Fatalf("recover -from m0 (revision %d) beside the put-back %s (epoch 7, revision %d): exit %d", end, near.Name, near.Revision, code)
	}
	if strings.Contains(ui.ErrorWriter.String(), "snapshot:"+near.Name) {
		t.Errorf("the put-back %s is advised: %s", near.Name, ui.ErrorWriter)
	}
	rec, err := f.co.Record(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Epoch <= near.Epoch {
		t.Fatalf("recorded epoch %d, not above the put-back snapshot's %d", rec.Epoch, near.Epoch)
	}
}

// TestRecoverFromMemberWithTheStoreDownSaysTheEpochIsNotRaised (reviews
// rev13-data 6, rev13-sec 5, LOW): with the store's listing failing,
// 'recover -from MEMBER -accept-data-loss' records a recovery compared
// with no snapshot, and its epoch is raised above none: the output says
// so (a snapshot of a higher epoch stays the newest by epoch).
func TestRecoverFromMemberWithTheStoreDownSaysTheEpochIsNotRaised(t *testing.T) {
	f := newRestoreFixture(t)
	end := f.chain[len(f.chain)-1].Revision
	f.status.Store(&status.Member{Name: "m0", Cluster: "unit", Token: "token-of-epoch-1", Epoch: 1, MemberID: 7, ClusterID: f.rec.ClusterID, Revision: end})
	// The store's directory replaced by a file fails the listing (a
	// metadata file that does not parse no longer does: it is skipped).
	if err := os.Rename(f.storeDir, f.storeDir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.storeDir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	ui := cli.NewMockUi()
	code := (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "m0"})
	t.Logf("exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
	if code == 0 || !strings.Contains(ui.ErrorWriter.String(), "-accept-data-loss") {
		t.Fatalf("recover -from m0 with the store's listing failing: exit %d, want a refusal asking for -accept-data-loss", code)
	}
	ui = cli.NewMockUi()
	code = (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "m0", "-accept-data-loss"})
	t.Logf("exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
	if code != 0 || !strings.Contains(ui.ErrorWriter.String(), "new epoch is not raised above") {
		t.Fatalf("recover -from m0 -accept-data-loss with the store's listing failing: exit %d, without saying the epoch is raised above no snapshot", code)
	}
}
