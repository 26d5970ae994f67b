package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// After the KEK was created again, an operator who strips the mac line of
// a snapshot's metadata only (docs/security.md's former way out) leaves its
// deltas with MACs under the old key: forged even with
// -accept-unauthenticated. recover must not drop their writes silently:
// it refuses, naming them and the revision range, unless
// -accept-data-loss; stripping the mac of every delta of that base too,
// and naming them (docs/security.md's way out now), restores the whole chain. Before, recover
// exited 0 recording the snapshot's revision (review data11 F5).
func TestKEKChangeWayOutKeepsTheDeltas(t *testing.T) {
	f := newRestoreFixture(t) // snapshot + 3 deltas
	ctx := context.Background()
	setNewKEK(t)
	store, oldEnc := f.storeAndEncryption(t)
	// Written under the old key (as members with it write them).
	if _, err := snapshot.Adopt(ctx, store, oldEnc, append([]snapshot.Meta{f.snap}, f.chain...)); err != nil {
		t.Fatal(err)
	}
	// The variable's ca_kek was lost and created again.
	setNewKEK(t)
	// The operator follows docs/security.md: strip the mac line of the snapshot.
	stripMAC(t, filepath.Join(f.storeDir, f.snap.Name+".meta.json"))
	ui := cli.NewMockUi()
	code := (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "snapshot:" + f.snap.Name, "-member", "m0", "-accept-unauthenticated"})
	end := f.chain[len(f.chain)-1].Revision
	got, rerr := f.co.Record(ctx)
	if code == 0 && (rerr != nil || got.SourceRevision < end) {
		t.Fatalf("recover exited 0 and recorded a restore to revision %d (%v), while the store holds the chain to %d: the old key's deltas were dropped silently\nout: %s\nerr: %s",
			got.SourceRevision, rerr, end, ui.OutputWriter, ui.ErrorWriter)
	}
	if errs := ui.ErrorWriter.String(); code == 0 || !strings.Contains(errs, f.chain[0].Name) || !strings.Contains(errs, "-accept-data-loss") {
		t.Fatalf("want a refusal naming the old key's deltas and -accept-data-loss: exit %d: %s", code, errs)
	}
	f.unchanged(t)
	// The way out: strip the mac of every delta of that base too.
	for _, d := range f.chain {
		stripMAC(t, filepath.Join(f.storeDir, d.Name+".meta.json"))
	}
	ui = cli.NewMockUi()
	code = (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "snapshot:" + f.snap.Name, "-member", "m0", "-accept-unauthenticated", "-accept-unauthenticated-deltas", f.chainNames()})
	if got, err := f.co.Record(ctx); code != 0 || err != nil || got.SourceRevision != end {
		t.Fatalf("recover after stripping every mac: exit %d, record %+v (%v), want the chain end %d\nout: %s\nerr: %s", code, got, err, end, ui.OutputWriter, ui.ErrorWriter)
	}
}

// stripMAC deletes the mac field of the metadata file at p.
func stripMAC(t *testing.T, p string) {
	t.Helper()
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	delete(meta, "mac")
	b, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// setNewKEK sets a new key encryption key in the environment, as the
// operator's shell holds the cluster's.
func setNewKEK(t *testing.T) {
	t.Helper()
	kek, err := certs.NewKEK()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(certs.KEKEnv, kek)
}

// storeAndEncryption opens the fixture's store and the encryption (with
// the MAC key from the environment) the commands use.
func (f *restoreFixture) storeAndEncryption(t *testing.T) (snapshot.Store, snapshot.Encryption) {
	t.Helper()
	cl := loadConfig(cli.NewMockUi(), f.config)
	store, err := backends.StoreWithLog(context.Background(), cl, nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := backends.Encryption(cl)
	if err != nil {
		t.Fatal(err)
	}
	return store, enc
}
