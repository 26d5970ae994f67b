package main

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// TestRecoverTakesAnUnauthenticatedSnapshotOnlyWithTheFlag: the store holds
// a snapshot and chain written before snapshots were authenticated (no
// MAC) and the operator now holds the KEK. 'recover -from snapshot:NAME'
// refuses it, naming it and the flag, and records nothing; with
// -accept-unauthenticated it verifies and records it, and signs the
// metadata of what it verified, so that the member (which never accepts
// an unauthenticated object) restores it.
func TestRecoverTakesAnUnauthenticatedSnapshotOnlyWithTheFlag(t *testing.T) {
	f := newRestoreFixture(t) // written without a KEK: no MAC
	kek, err := certs.NewKEK()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(certs.KEKEnv, kek)

	code, ui := f.recover(t, f.snap.Name)
	if errs := ui.ErrorWriter.String(); code == 0 || !strings.Contains(errs, f.snap.Name) || !strings.Contains(errs, "-accept-unauthenticated") {
		t.Fatalf("recover from an unauthenticated snapshot: exit %d: %s%s; want a refusal naming it and the flag", code, ui.OutputWriter, errs)
	}
	f.unchanged(t)

	ui = cli.NewMockUi()
	code = (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "snapshot:" + f.snap.Name, "-member", "m0", "-accept-unauthenticated"})
	if code != 0 {
		t.Fatalf("recover -accept-unauthenticated: exit %d: %s%s", code, ui.OutputWriter, ui.ErrorWriter)
	}
	if got, err := f.co.Record(context.Background()); err != nil || got.Epoch != 2 || got.SourceRevision != f.chain[len(f.chain)-1].Revision {
		t.Fatalf("record after recover -accept-unauthenticated: %+v (%v)", got, err)
	}
	// What the member reads: the snapshot and every delta now authenticate.
	cl := loadConfig(cli.NewMockUi(), f.config)
	store, err := backends.StoreWithLog(context.Background(), cl, nil)
	if err != nil {
		t.Fatal(err)
	}
	member, err := backends.Encryption(cl)
	if err != nil || len(member.MACKey) == 0 {
		t.Fatalf("member encryption %v: no MAC key from %s", err, certs.KEKEnv)
	}
	list, err := store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if kept, refused := member.Authentic(list); len(kept) != 1+len(f.chain) {
		t.Fatalf("after the operator's acceptance the member still refuses %v", refused)
	}
	if _, err := snapshot.Verify(context.Background(), store, f.snap.Name, member, nil); err != nil {
		t.Fatalf("the member's verify of the accepted snapshot: %v", err)
	}
}
