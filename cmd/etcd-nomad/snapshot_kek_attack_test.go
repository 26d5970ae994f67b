package main

// The snapshot-reading commands of a cluster whose members authenticate
// snapshots (tls auto, a shared coordinator) need the key (security
// review rev-sec11, finding 5).

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// TestSnapshotCommandsWithoutTheKEKRefuse: an operator of a tls auto,
// Consul cluster runs 'snapshot restore … latest' (or verify, list, save,
// or 'recover -from snapshot:latest') from a shell without
// ETCD_NOMAD_CA_KEK. Without the key an object without a MAC passes and
// every genuine (MAC'd) one is refused, so "latest" is a store writer's
// forged snapshot (shown below with the key-less encryption). Every one of
// those commands refuses before reading the store, naming the variable
// and how to get it. Red before: the commands went on, and 'latest' was
// the forged snapshot (rev-sec11
// TestRevSec11OperatorWithoutKEKRestoresTheForgedLatest).
func TestSnapshotCommandsWithoutTheKEKRefuse(t *testing.T) {
	const def = "../../examples/nomad.hcl" // tls auto, consul coordination
	cl, _, diags := config.LoadFile(def)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ctx := context.Background()
	dir := t.TempDir()
	store, err := file.New(filepath.Join(dir, "store"), cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	kek, _ := certs.NewKEK()
	t.Setenv(certs.KEKEnv, kek)
	members, err := backends.Encryption(cl)
	if err != nil || len(members.MACKey) == 0 {
		t.Fatal("members' key", err)
	}
	etcd := startEtcd(t, filepath.Join(dir, "etcd"))
	for i := range 50 {
		etcd.Put(ctx, fmt.Sprintf("genuine/%03d", i), "v")
	}
	genuine, err := snapshot.Save(ctx, snapshot.From{Endpoint: etcd.Endpoints()[0], SpoolDir: t.TempDir()}, store, snapshot.Source{Cluster: cl.Name, Epoch: 3}, members, nil)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := snapshot.Save(ctx, snapshot.From{Endpoint: etcd.Endpoints()[0], SpoolDir: t.TempDir()}, store, snapshot.Source{Cluster: cl.Name, Epoch: 1}, snapshot.Encryption{}, nil)
	if err != nil {
		t.Fatal(err)
	}

	t.Setenv(certs.KEKEnv, "") // the operator's shell
	// What a reader without the key would take: the forged one.
	opEnc, err := backends.Encryption(cl)
	if err != nil {
		t.Fatal(err)
	}
	all, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := opEnc.Authentic(all)
	if newest, _, _, _ := snapshot.Newest(kept); newest.Name != forged.Name {
		t.Fatalf("control: without the key the newest is %s, not the forged %s (genuine %s)", newest.Name, forged.Name, genuine.Name)
	}
	// resolveName, which every command's "latest" goes through, refuses too.
	if name, err := resolveName(ctx, cli.NewMockUi(), &snapshotEnv{cl: cl, store: store, enc: opEnc}, "latest"); err == nil || !strings.Contains(err.Error(), certs.KEKEnv) {
		t.Fatalf("resolveName without the key: %q (%v), want a refusal naming %s", name, err, certs.KEKEnv)
	}

	for _, tc := range []struct {
		what string
		run  func(ui cli.Ui) int
	}{
		{"snapshot restore latest", func(ui cli.Ui) int {
			return (&snapshotRestoreCommand{ui: ui}).Run([]string{"-config", def, "-member", "m0", "latest"})
		}},
		{"snapshot verify latest", func(ui cli.Ui) int {
			return (&snapshotVerifyCommand{ui: ui}).Run([]string{"-config", def, "latest"})
		}},
		{"snapshot list", func(ui cli.Ui) int { return (&snapshotListCommand{ui: ui}).Run([]string{"-config", def}) }},
		{"snapshot save", func(ui cli.Ui) int { return (&snapshotSaveCommand{ui: ui}).Run([]string{"-config", def}) }},
		{"recover -from snapshot:latest", func(ui cli.Ui) int {
			return (&recoverCommand{ui: ui}).Run([]string{"-config", def, "-from", "snapshot:latest"})
		}},
	} {
		ui := cli.NewMockUi()
		code := tc.run(ui)
		errs := ui.ErrorWriter.String()
		t.Logf("%s without the KEK: exit %d: %s", tc.what, code, errs)
		if code == 0 || !strings.Contains(errs, certs.KEKEnv+" is not set") || !strings.Contains(errs, "nomad var get -item ca_kek") {
			t.Errorf("%s without %s: exit %d: %s%s; want a refusal naming the variable and how to get it", tc.what, certs.KEKEnv, code, ui.OutputWriter, errs)
		}
	}
}
