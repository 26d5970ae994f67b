package main

import (
	"context"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/status"
)

// TestRecoverFromMemberRecordsTheSnapshotBeyondTheLineageItAccepted
// (review rev18c N4, rev17a F2): 'recover -from MEMBER -accept-data-loss'
// beside a snapshot outside the record's lineage that reaches past the
// member's data warned and went ahead, but the record did not carry what
// it accepted: under the new record the seeder's lineage takes that
// snapshot as its newest, and it waited for an operator again. The
// record now names the snapshot's epoch up to the reach the command saw.
func TestRecoverFromMemberRecordsTheSnapshotBeyondTheLineageItAccepted(t *testing.T) {
	ctx := context.Background()
	f := newRestoreFixture(t)
	end := f.chain[len(f.chain)-1].Revision
	f.status.Store(&status.Member{Name: "m0", Cluster: "unit", Token: "token-of-epoch-1", Epoch: 1, MemberID: 7, ClusterID: f.rec.ClusterID, Revision: end})
	far := f.putBack(t, end+500)
	ui := cli.NewMockUi()
	if code := (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "m0", "-accept-data-loss"}); code != 0 {
		t.Fatalf("recover -from m0 -accept-data-loss: exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
	}
	rec, err := f.co.Record(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rec.Accepted {
		if a.Token == "" && a.Epoch == far.Epoch && a.Revision >= far.Revision {
			return
		}
	}
	t.Fatalf("the record accepts %+v, not %s (epoch %d, revision %d), which the command showed", rec.Accepted, far.Name, far.Epoch, far.Revision)
}
