package main

import (
	"context"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
)

// A recover -accept-unauthenticated that the planner refuses (here: the
// member named is not an instance) changes nothing in the store: the
// adoption (signing what the operator accepted) happens only once the
// recovery is decided, just before its record is written. Before, recover
// signed the snapshot and its chain before deciding, so a refused recover
// left them authentic for the members' automatic paths (review data11 F6).
func TestRefusedRecoverSignsNothing(t *testing.T) {
	f := newRestoreFixture(t) // written without a KEK: no MAC
	kek, err := certs.NewKEK()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(certs.KEKEnv, kek)
	ui := cli.NewMockUi()
	code := (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "snapshot:" + f.snap.Name, "-member", "nosuch", "-accept-unauthenticated"})
	if code == 0 {
		t.Fatalf("recover with a member that is not an instance: exit 0: %s", ui.OutputWriter)
	}
	f.unchanged(t)
	cl := loadConfig(cli.NewMockUi(), f.config)
	store, err := backends.StoreWithLog(context.Background(), cl, nil)
	if err != nil {
		t.Fatal(err)
	}
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
