package main

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Review rev13-data 2 (MED): 'recover -from MEMBER' while the store holds a newer chain
// members refuse (no MAC, or an Adopt stopped part way: deltas signed,
// snapshot not). The automatic path waits beside it (refusedAhead), a
// named restore refuses without -accept-data-loss (rev12 F5); the member
// path compares only what authenticates (storeLatest) and goes ahead.
func TestRecoverFromMemberRefusesBesideANewerRefusedChain(t *testing.T) {
	for _, partial := range []bool{false, true} {
		name := "unsigned"
		if partial {
			name = "adopt-partway"
		}
		t.Run(name, func(t *testing.T) {
			f := newRestoreFixture(t) // written without a KEK: no MAC
			setNewKEK(t)
			if partial {
				store, enc := f.storeAndEncryption(t)
				// Adopt signs the deltas first; stopped before the snapshot.
				if _, err := snapshot.Adopt(context.Background(), store, enc, f.chain); err != nil {
					t.Fatal(err)
				}
			}
			end := f.chain[len(f.chain)-1].Revision
			f.status.Store(&status.Member{Name: "m0", Cluster: "unit", Token: "token-of-epoch-1", Epoch: 1, MemberID: 7, ClusterID: f.rec.ClusterID, Revision: f.snap.Revision})
			ui := cli.NewMockUi()
			code := (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "m0"})
			t.Logf("exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
			if code == 0 || !strings.Contains(ui.ErrorWriter.String(), "-accept-data-loss") {
				t.Fatalf("recover -from m0 (revision %d) beside a refused chain reaching revision %d: exit %d, recorded without -accept-data-loss", f.snap.Revision, end, code)
			}
		})
	}
}
