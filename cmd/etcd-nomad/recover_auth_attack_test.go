package main

import (
	"context"
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// TestRecoverTakesAnUnauthenticatedSnapshotOnlyWithTheFlag: the store holds
// a snapshot and chain written before snapshots were authenticated (no
// MAC) and the operator now holds the KEK. 'recover -from snapshot:NAME'
// refuses it, naming it and the flag, and records nothing; with
// -accept-unauthenticated, and the deltas after it named with
// -accept-unauthenticated-deltas, it verifies and records it, and signs the
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

	// The deltas after it carry no MAC either: each is named.
	code, ui = f.recoverAccepting(t, "-accept-unauthenticated-deltas", f.chainNames())
	if code != 0 {
		t.Fatalf("recover -accept-unauthenticated: exit %d: %s%s", code, ui.OutputWriter, ui.ErrorWriter)
	}
	if got, err := f.co.Record(context.Background()); err != nil || got.Epoch != 2 || got.SourceRevision != f.chain[len(f.chain)-1].Revision {
		t.Fatalf("record after recover -accept-unauthenticated: %+v (%v)", got, err)
	}
	// What the member reads: the snapshot and every delta now authenticate.
	kept, store, member := memberAuthentic(t, f)
	if len(kept) != 1+len(f.chain) {
		t.Fatalf("after the operator's acceptance the member takes only %v", kept)
	}
	if _, err := snapshot.Verify(context.Background(), store, f.snap.Name, member, nil); err != nil {
		t.Fatalf("the member's verify of the accepted snapshot: %v", err)
	}
}
