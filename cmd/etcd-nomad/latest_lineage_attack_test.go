package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// TestLatestIsNeverAPutBackIncarnation (rev12-sec F1): a store writer
// puts back a genuine snapshot of an earlier incarnation of the job (same
// name and KEK: its MAC verifies; cluster id "01d", epoch 7, a year old)
// beside the running incarnation's (cluster id abc, epoch 2). "latest"
// for an operator's restore ('recover -from snapshot:latest', 'snapshot
// restore latest': chooseRestore) took snapshot.Newest over everything
// authentic, so it was the put-back one, without a word. Now "latest" is
// the newest snapshot of the cluster record's lineage, and a warning
// names the newer foreign one and why; named, it is taken, with a
// warning saying what it is. Since review rev13-data 3 the restore of
// "latest" beside it also needs -accept-data-loss (it may be of an
// incarnation that ran after a record Consul restored: its writes would
// be set aside), so the store writer costs the operator a flag, never a
// restore of the put-back one.
func TestLatestIsNeverAPutBackIncarnation(t *testing.T) {
	all, enc, foreign, mine := putBackBeside(t)
	record := snapshot.Lineage{ClusterID: 0xabc, Epoch: 2}

	ui := cli.NewMockUi()
	if got, _, err := chooseRestore(ui, all, &enc, record, "latest", acceptance{}); err == nil || !strings.Contains(err.Error(), foreign.Name) || !strings.Contains(err.Error(), "-accept-data-loss") {
		t.Fatalf("\"latest\" beside the newer foreign %s without -accept-data-loss: %s, %v; want a refusal naming it and the flag", foreign.Name, got.Name, err)
	}
	ui = cli.NewMockUi()
	got, _, err := chooseRestore(ui, all, &enc, record, "latest", acceptance{loss: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != mine.Name {
		t.Fatalf("\"latest\" is %s (cluster id %s, epoch %d), want the record's lineage's newest %s; warnings: %q", got.Name, got.ClusterID, got.Epoch, mine.Name, ui.ErrorWriter)
	}
	if w := ui.ErrorWriter.String(); !strings.Contains(w, foreign.Name) || !strings.Contains(w, "another incarnation") {
		t.Errorf("\"latest\" passed over the newer foreign %s without naming it and why: %q", foreign.Name, w)
	}

	ui = cli.NewMockUi()
	got, _, err = chooseRestore(ui, all, &enc, record, foreign.Name, acceptance{})
	if err != nil || got.Name != foreign.Name {
		t.Fatalf("the foreign snapshot named: %s, %v; want it taken", got.Name, err)
	}
	if w := ui.ErrorWriter.String(); !strings.Contains(w, "because you named it") {
		t.Errorf("the foreign snapshot named is taken without saying what it is: %q", w)
	}

	// Only the foreign one in the store: "latest" is none.
	only := []snapshot.Meta{}
	for _, m := range all {
		if m.Name == foreign.Name {
			only = append(only, m)
		}
	}
	if got, _, err := chooseRestore(cli.NewMockUi(), only, &enc, record, "latest", acceptance{}); err == nil {
		t.Errorf("\"latest\" beside only another incarnation's snapshot: %s, want a refusal", got.Name)
	}
}

// putBackBeside is a store of cluster "c" (all its objects, and enc with
// the MAC key they verify under) holding a put-back genuine snapshot of
// another incarnation (cluster id "01d", epoch 7, revision 5000, a year
// old) beside the running incarnation's newest (cluster id abc, epoch 2,
// revision 300).
func putBackBeside(t *testing.T) (all []snapshot.Meta, enc snapshot.Encryption, foreign, mine snapshot.Meta) {
	t.Helper()
	ctx := context.Background()
	store, err := file.New(filepath.Join(t.TempDir(), "store"), "c")
	if err != nil {
		t.Fatal(err)
	}
	key, _ := snapshot.DeriveMACKey(bytes.Repeat([]byte{7}, 32), "c")
	enc = snapshot.Encryption{MACKey: key}
	now := time.Now().UTC()
	put := func(epoch uint64, id string, rev int64, created time.Time) snapshot.Meta {
		m := snapshot.Meta{Cluster: "c", ClusterID: id, Epoch: epoch, Revision: rev, Created: created, Codec: snapshot.Codec, Size: 1, SHA256: strings.Repeat("0", 64)}
		m.Name = snapshot.ObjectName("c", epoch, rev, created, false)
		if _, err := store.Put(ctx, m.Name, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
		if err := store.PutMeta(ctx, m); err != nil {
			t.Fatal(err)
		}
		if _, err := snapshot.Adopt(ctx, store, enc, []snapshot.Meta{m}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	foreign = put(7, "01d", 5000, now.Add(-365*24*time.Hour))
	mine = put(2, "abc", 300, now.Add(-time.Minute))
	all, err = store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return all, enc, foreign, mine
}

// putBack copies the fixture's snapshot into its store as a genuine one
// of another incarnation (cluster id "01d", epoch 7, a year older) at
// revision rev (no KEK in the fixture: what authenticates is what the
// lineage rule sees).
func (f *restoreFixture) putBack(t *testing.T, rev int64) snapshot.Meta {
	t.Helper()
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(f.storeDir, f.snap.Name))
	if err != nil {
		t.Fatal(err)
	}
	m := f.snap
	m.Epoch, m.ClusterID, m.Revision, m.Created = 7, "01d", rev, f.snap.Created.Add(-365*24*time.Hour)
	m.Name = snapshot.ObjectName("unit", m.Epoch, m.Revision, m.Created, m.Encrypted)
	store, err := file.New(f.storeDir, "unit")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, m.Name, bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	if err := store.PutMeta(ctx, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestOperatorLatestCommandsSkipAPutBackIncarnation: the same attack
// through the commands, which read the cluster record for its lineage
// (recordLineage): 'snapshot verify latest' verifies the record's
// lineage's snapshot, and 'recover -from snapshot:latest' records it,
// both naming the put-back one in a warning ('recover' after asking for
// -accept-data-loss, review rev13-data 3, and then as an epoch above the
// put-back one's). The put-back object is the
// fixture's snapshot copied under another incarnation's epoch and
// cluster id (no KEK in this fixture: what authenticates is what the
// lineage rule sees).
func TestOperatorLatestCommandsSkipAPutBackIncarnation(t *testing.T) {
	ctx := context.Background()
	f := newRestoreFixture(t)
	foreign := f.putBack(t, f.snap.Revision)

	ui := cli.NewMockUi()
	code := (&snapshotVerifyCommand{ui: ui}).Run([]string{"-config", f.config, "latest"})
	t.Logf("snapshot verify latest: exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
	if code != 0 || !strings.Contains(ui.OutputWriter.String(), f.snap.Name+": OK") || !strings.Contains(ui.ErrorWriter.String(), foreign.Name) {
		t.Fatalf("snapshot verify latest: exit %d; want %s verified and %s named in a warning", code, f.snap.Name, foreign.Name)
	}

	code, ui = f.recover(t, "latest")
	t.Logf("recover -from snapshot:latest: exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
	if code == 0 || !strings.Contains(ui.ErrorWriter.String(), "-accept-data-loss") {
		t.Fatalf("recover -from snapshot:latest beside the newer put-back %s: exit %d, want a refusal asking for -accept-data-loss", foreign.Name, code)
	}
	f.unchanged(t)
	ui = cli.NewMockUi()
	code = (&recoverCommand{ui: ui}).Run([]string{"-config", f.config, "-from", "snapshot:latest", "-member", "m0", "-accept-data-loss"})
	t.Logf("recover -from snapshot:latest -accept-data-loss: exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
	if code != 0 {
		t.Fatalf("recover -from snapshot:latest -accept-data-loss: exit %d", code)
	}
	rec, err := f.co.Record(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := "snapshot:" + f.snap.Name; string(rec.Source) != want {
		t.Fatalf("recorded source %q, want %q (the record's lineage), not the put-back %s", rec.Source, want, foreign.Name)
	}
	if !strings.Contains(ui.ErrorWriter.String(), foreign.Name) {
		t.Errorf("recover passed over the put-back %s without naming it", foreign.Name)
	}
	if rec.Epoch <= foreign.Epoch {
		t.Errorf("recorded epoch %d, not above the put-back snapshot's %d", rec.Epoch, foreign.Epoch)
	}
}
