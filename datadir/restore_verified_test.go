package datadir_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/datadir"
)

// An install for a revision below a damaged segment succeeds with the
// listing's chain in Installed.Chain (every segment after the snapshot),
// but only the segments that were fetched, verified and replayed in
// Installed.Verified: what an operator's adoption (recover
// -accept-unauthenticated) may sign. Before, recover signed the listing's
// chain, past what was verified (review data11 F7).
func TestInstalledVerifiedIsOnlyTheVerifiedChain(t *testing.T) {
	b := newBackup(t, 600)
	chain := b.fourSegments(t)
	victim := filepath.Join(b.dir, chain[1].Name)
	damageFile(t, victim)
	got, _, err := install(context.Background(), t, t.TempDir(), datadir.Source{Store: b.store, Name: b.base.Name, Want: chain[0].Revision})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Chain) != len(chain) {
		t.Fatalf("listed chain %d segments, want %d", len(got.Chain), len(chain))
	}
	if len(got.Verified) != 1 || got.Verified[0].Name != chain[0].Name {
		var names []string
		for _, m := range got.Verified {
			names = append(names, m.Name)
		}
		t.Fatalf("verified chain %v, want only %s (%s is damaged, what follows unreplayed)", names, chain[0].Name, chain[1].Name)
	}
}
