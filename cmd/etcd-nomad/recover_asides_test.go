package main

import (
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/status"
)

// Sim seed 121: a restore's seeder set data aside that held revisions
// 541..546, and the operator's next restore was refused (or went ahead
// with -accept-data-loss) naming only the chain's shortfall. 'recover'
// now names, from the members' /status, the set-aside copies that reach
// past the revision the recovery would restore: where the lost writes may
// still be (member, path).
func TestRecoverNamesSetAsideCopiesThatHoldLaterRevisions(t *testing.T) {
	f := newRestoreFixture(t)
	end := f.chain[len(f.chain)-1].Revision
	verified := f.chain[0].Revision // chain[1] is damaged below
	later := status.AsideCopy{Name: "20261127T101010.000000000Z-restored-over", Path: "/data/m0/aside/20261127T101010.000000000Z-restored-over",
		Cluster: "unit", Token: "token-of-epoch-1", Epoch: 1, ClusterID: f.rec.ClusterID, Revision: end + 6, At: "2026-11-27T10:10:10Z"}
	older := later
	older.Name, older.Path, older.Revision = "20261127T090909.000000000Z-foreign", "/data/m0/aside/20261127T090909.000000000Z-foreign", verified
	foreign := later
	foreign.Name, foreign.Path, foreign.Cluster = "20261127T111111.000000000Z-foreign", "/data/m0/aside/20261127T111111.000000000Z-foreign", "other"
	f.status.Store(&status.Member{Name: "m0", Cluster: "unit", Reason: "waiting for an operator", Asides: []status.AsideCopy{foreign, later, older}})
	f.damage(t, f.chain[1].Name)

	code, ui := f.recover(t, f.snap.Name)
	errs := ui.ErrorWriter.String()
	if code == 0 || !strings.Contains(errs, "m0:"+later.String()) || strings.Contains(errs, older.Path) || strings.Contains(errs, foreign.Path) {
		t.Fatalf("recover over a damaged delta: exit %d: %s; want a refusal naming m0:%s only", code, errs, later)
	}
	t.Logf("refused: %s", errs)
	f.unchanged(t)

	// Going ahead with -accept-data-loss, the warning names it too.
	ui = cli.NewMockUi()
	code = (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "snapshot:" + f.snap.Name, "-member", "m0", "-accept-data-loss"})
	if errs := ui.ErrorWriter.String(); code != 0 || !strings.Contains(errs, "m0:"+later.Path) {
		t.Fatalf("recover -accept-data-loss over a damaged delta: exit %d: %s%s; want a warning naming m0:%s", code, ui.OutputWriter, errs, later.Path)
	}
}

// The same for a refusal of the planner's (planner.LossError): a member
// holds data newer than the snapshot, and a copy it set aside reaches
// past the snapshot's chain end.
func TestRecoverLossRefusalNamesSetAsideCopies(t *testing.T) {
	f := newRestoreFixture(t)
	end := f.chain[len(f.chain)-1].Revision
	later := status.AsideCopy{Name: "20261127T101010.000000000Z-foreign", Path: "/data/m0/aside/20261127T101010.000000000Z-foreign",
		Cluster: "unit", Token: "token-of-epoch-1", Epoch: 1, ClusterID: f.rec.ClusterID, Revision: end + 9}
	f.status.Store(&status.Member{Name: "m0", Cluster: "unit", Token: "token-of-epoch-1", Epoch: 1, ClusterID: f.rec.ClusterID, Revision: end + 3,
		Reason: "waiting for an operator", Asides: []status.AsideCopy{later}})
	code, ui := f.recover(t, f.snap.Name)
	if errs := ui.ErrorWriter.String(); code == 0 || !strings.Contains(errs, "hold data newer than snapshot") || !strings.Contains(errs, "m0:"+later.String()) {
		t.Fatalf("recover below a member's data: exit %d: %s; want the refusal naming m0:%s", code, errs, later)
	}
	f.unchanged(t)
}
