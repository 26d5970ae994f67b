package main

// What -accept-unauthenticated takes and signs: the snapshot the operator
// named, and the deltas the operator named, nothing a store writer added
// beside them (security review rev-sec11, findings 2 and 3).

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/cli"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// recoverAccepting runs 'recover' from the fixture's snapshot with
// -accept-unauthenticated and flags.
func (f *restoreFixture) recoverAccepting(t *testing.T, flags ...string) (int, *cli.MockUi) {
	t.Helper()
	ui := cli.NewMockUi()
	code := (&recoverCommand{ui: ui}).Run(append([]string{"-config", f.config, "-from", "snapshot:" + f.snap.Name, "-member", "m0", "-accept-unauthenticated"}, flags...))
	return code, ui
}

// chainNames names the fixture's deltas as -accept-unauthenticated-deltas
// takes them.
func (f *restoreFixture) chainNames() string {
	var names []string
	for _, d := range f.chain {
		names = append(names, d.Name)
	}
	return strings.Join(names, ",")
}

// memberAuthentic is what a member holding the KEK now takes from the
// fixture's store, with the store and the member's encryption.
func memberAuthentic(t *testing.T, f *restoreFixture) (map[string]bool, snapshot.Store, snapshot.Encryption) {
	t.Helper()
	store, member := f.storeAndEncryption(t)
	if len(member.MACKey) == 0 {
		t.Fatal("member encryption: no MAC key")
	}
	list, err := store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := member.Authentic(list)
	names := map[string]bool{}
	for _, m := range kept {
		names[m.Name] = true
	}
	return names, store, member
}

// TestAcceptUnauthenticatedSignsOnlyTheDeltasTheOperatorNamed: the store
// holds a pre-upgrade snapshot with its three deltas (no MAC), and a store
// writer appended a delta of its own (no MAC, encrypted to the public
// recipient) to that chain. 'recover -from snapshot:NAME
// -accept-unauthenticated' takes the named snapshot only: it refuses,
// listing every delta without a MAC after it (the writer's among them)
// and the flag that names them, and records and signs nothing. Naming the
// three genuine deltas (and accepting the loss of the writer's, past the
// chain end), the recovery goes through to the last of them; the
// writer's delta is neither replayed nor signed, and a member still
// refuses it. 'snapshot restore -accept-unauthenticated NAME' refuses as
// the first command does. Red before: the first command exited 0, replayed the
// writer's delta and Adopt signed it (rev-sec11
// TestRevSec11AcceptUnauthenticatedLaundersAForgedDelta).
func TestAcceptUnauthenticatedSignsOnlyTheDeltasTheOperatorNamed(t *testing.T) {
	f := newRestoreFixture(t) // pre-upgrade: no MAC anywhere
	ctx := context.Background()
	store, pub := f.storeAndEncryption(t) // no KEK yet: the attacker's view (recipients only)
	end := f.chain[len(f.chain)-1].Revision
	var seg snapshot.Segment
	seg.Events = append(seg.Events, &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("tenant-b/secret"), Value: []byte("attacker"),
		CreateRevision: end + 1, ModRevision: end + 1, Version: 1}})
	forged := storeDelta(t, store, snapshot.Encryption{Recipients: pub.Recipients}, f.snap, seg)

	kek, err := certs.NewKEK()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(certs.KEKEnv, kek)
	code, ui := f.recoverAccepting(t)
	errs := ui.ErrorWriter.String()
	t.Logf("recover -accept-unauthenticated: exit %d\n%s%s", code, ui.OutputWriter, errs)
	if code == 0 || !strings.Contains(errs, forged.Name) || !strings.Contains(errs, "-accept-unauthenticated-deltas") {
		t.Fatalf("recover -accept-unauthenticated over a chain with deltas without a MAC: exit %d; want a refusal listing them (%s among them) and the flag", code, forged.Name)
	}
	for _, d := range f.chain {
		if !strings.Contains(errs, d.Name) {
			t.Errorf("the refusal does not list delta %s", d.Name)
		}
	}
	f.unchanged(t)
	if kept, _, _ := memberAuthentic(t, f); len(kept) != 0 {
		t.Fatalf("a refused recovery signed %v", kept)
	}

	// snapshot restore refuses the same, and restores nothing.
	ui = cli.NewMockUi()
	if code := (&snapshotRestoreCommand{ui: ui}).Run([]string{"-config", f.config, "-member", "m0", "-accept-unauthenticated", f.snap.Name}); code == 0 ||
		!strings.Contains(ui.ErrorWriter.String(), forged.Name) || !strings.Contains(ui.ErrorWriter.String(), "-accept-unauthenticated-deltas") {
		t.Fatalf("snapshot restore -accept-unauthenticated over the chain: exit %d: %s%s", code, ui.OutputWriter, ui.ErrorWriter)
	}
	f.unchanged(t)

	// A name that is not a delta of the chain is refused.
	if code, ui := f.recoverAccepting(t, "-accept-unauthenticated-deltas", "no-such-delta"); code == 0 || !strings.Contains(ui.ErrorWriter.String(), "no-such-delta") {
		t.Fatalf("an unknown delta name: exit %d: %s", code, ui.ErrorWriter)
	}
	f.unchanged(t)

	// Naming the genuine deltas leaves the writer's past the chain end:
	// its writes would be dropped, which takes -accept-data-loss (review
	// data11 F5), as the refusal says.
	code, ui = f.recoverAccepting(t, "-accept-unauthenticated-deltas", f.chainNames())
	if errs := ui.ErrorWriter.String(); code == 0 || !strings.Contains(errs, forged.Name) || !strings.Contains(errs, "-accept-data-loss") {
		t.Fatalf("recover naming the genuine deltas only, without -accept-data-loss: exit %d; want a refusal naming %s and -accept-data-loss\n%s%s", code, forged.Name, ui.OutputWriter, errs)
	}
	f.unchanged(t)
	code, ui = f.recoverAccepting(t, "-accept-unauthenticated-deltas", f.chainNames(), "-accept-data-loss")
	t.Logf("recover naming the genuine deltas: exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
	if code != 0 {
		t.Fatalf("recover naming the genuine deltas failed")
	}
	if rec, err := f.co.Record(ctx); err != nil || rec.SourceRevision != end {
		t.Fatalf("record %+v (%v): want the chain verified to %d, the last named delta", rec, err, end)
	}
	kept, _, _ := memberAuthentic(t, f)
	if kept[forged.Name] {
		t.Errorf("the store writer's delta %s was signed: it authenticates for every member", forged.Name)
	}
	if !kept[f.snap.Name] || len(kept) != 1+len(f.chain) {
		t.Errorf("the member takes %v; want the snapshot and its %d named deltas", kept, len(f.chain))
	}
}

// TestAcceptUnauthenticatedNeverAppliesToLatest: a store writer's full
// snapshot without a MAC (its own etcd, data of its choosing), newer than
// the pre-upgrade ones, would be "latest" among objects without a MAC.
// -accept-unauthenticated (and -accept-unauthenticated-deltas) with
// snapshot:latest is refused, asking for a name: nothing is recorded and
// nothing signed. Red before: the planted snapshot was chosen, recorded
// and signed (rev-sec11
// TestRevSec11AcceptUnauthenticatedLatestSignsAPlantedSnapshot).
func TestAcceptUnauthenticatedNeverAppliesToLatest(t *testing.T) {
	f := newRestoreFixture(t)
	ctx := context.Background()
	store, pub := f.storeAndEncryption(t)
	etcd := startEtcd(t, filepath.Join(t.TempDir(), "attacker"))
	for i := range 200 {
		if _, err := etcd.Put(ctx, fmt.Sprintf("tenant-b/%03d", i), "attacker"); err != nil {
			t.Fatal(err)
		}
	}
	forged, err := snapshot.Save(ctx, snapshot.From{Endpoint: etcd.Endpoints()[0], SpoolDir: t.TempDir()}, store,
		snapshot.Source{Cluster: "unit", Epoch: 1}, snapshot.Encryption{Recipients: pub.Recipients}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kek, _ := certs.NewKEK()
	t.Setenv(certs.KEKEnv, kek)
	for _, flags := range [][]string{{"-accept-unauthenticated"}, {"-accept-unauthenticated-deltas", "a-delta"}} {
		ui := cli.NewMockUi()
		code := (&recoverCommand{ui: ui}).Run(append([]string{"-config", f.config, "-from", "snapshot:latest", "-member", "m0"}, flags...))
		t.Logf("recover latest %v: exit %d\n%s%s", flags, code, ui.OutputWriter, ui.ErrorWriter)
		if code == 0 || !strings.Contains(ui.ErrorWriter.String(), "never latest") {
			t.Fatalf("recover -from snapshot:latest %v: exit %d; want a refusal asking for a name", flags, code)
		}
		f.unchanged(t)
	}
	if kept, _, _ := memberAuthentic(t, f); kept[forged.Name] || len(kept) != 0 {
		t.Errorf("signed after a refusal: %v", kept)
	}
	// snapshot restore refuses the same.
	ui := cli.NewMockUi()
	if code := (&snapshotRestoreCommand{ui: ui}).Run([]string{"-config", f.config, "-member", "m0", "-accept-unauthenticated", "latest"}); code == 0 || !strings.Contains(ui.ErrorWriter.String(), "never latest") {
		t.Fatalf("snapshot restore -accept-unauthenticated latest: exit %d: %s", code, ui.ErrorWriter)
	}
}
