package main

import (
	"context"
	"testing"

	"github.com/hashicorp/cli"
)

// A recover -accept-unauthenticated that the planner refuses (here: the
// member named is not an instance) changes nothing in the store: the
// adoption (signing what the operator accepted) happens only once the
// recovery is decided, just before its record is written. Before, recover
// signed the snapshot and its chain before deciding, so a refused recover
// left them authentic for the members' automatic paths (review data11 F6).
func TestRefusedRecoverSignsNothing(t *testing.T) {
	f := newRestoreFixture(t) // written without a KEK: no MAC
	setNewKEK(t)
	ui := cli.NewMockUi()
	code := (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "snapshot:" + f.snap.Name, "-member", "nosuch", "-accept-unauthenticated"})
	if code == 0 {
		t.Fatalf("recover with a member that is not an instance: exit 0: %s", ui.OutputWriter)
	}
	f.unchanged(t)
	store, _ := f.storeAndEncryption(t)
	list, err := store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list {
		if m.MAC != "" {
			t.Fatalf("a refused recover (%s) signed %s", ui.ErrorWriter, m.Name)
		}
	}
}
