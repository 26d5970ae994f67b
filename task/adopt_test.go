package task

import (
	"github.com/etcd-nomad/etcd-nomad/datadir"

	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
)

// TestDataCarriedToNewAllocationIsAdopted (invariant 6): Nomad
// moves the previous allocation's alloc/data into its replacement, under
// the old member's directory name. The new member adopts exactly one such
// directory of its cluster whose owner is not live, never two, never
// another cluster's, and never when it has a directory of its own.
func TestDataCarriedToNewAllocationIsAdopted(t *testing.T) {
	mkOn := func(t *testing.T, root, name, cluster string, stopped bool, host string) {
		t.Helper()
		d := datadir.Dir{Root: filepath.Join(root, name)}
		if err := d.WriteMeta(datadir.Meta{Cluster: cluster, Name: name, Token: "tok", Epoch: 1, Stopped: stopped, Host: host}); err != nil {
			t.Fatal(err)
		}
	}
	mkStopped := func(t *testing.T, root, name, cluster string, stopped bool) {
		t.Helper()
		mkOn(t, root, name, cluster, stopped, "10.0.0.9")
	}
	const here = "10.0.0.1"
	// mk: a previous member whose etcd stopped cleanly (what Nomad moves on
	// a drain or an update: it stops the old allocation first).
	mk := func(t *testing.T, root, name, cluster string) { mkStopped(t, root, name, cluster, true) }
	none := func(string) (bool, bool) { return false, false }

	t.Run("one previous member is adopted under the new name", func(t *testing.T) {
		dir := t.TempDir()
		mk(t, dir, "etcd-old1", "main")
		mk(t, dir, "etcd-other", "another-cluster")
		from, err := adoptPrevious(filepath.Join(dir, "etcd-new1"), "main", here, none)
		if err != nil || from != filepath.Join(dir, "etcd-old1") {
			t.Fatalf("adopted %q, %v; want etcd-old1", from, err)
		}
		meta, err := datadir.Dir{Root: filepath.Join(dir, "etcd-new1")}.ReadMeta()
		if err != nil || meta.Name != "etcd-old1" {
			t.Fatalf("adopted metadata %+v, %v: the persisted name must stay the identity", meta, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "etcd-old1")); !os.IsNotExist(err) {
			t.Fatalf("the old directory is still there (%v): it would be carried forward forever", err)
		}
	})
	t.Run("two candidates: none adopted, both kept", func(t *testing.T) {
		dir := t.TempDir()
		mk(t, dir, "etcd-a", "main")
		mk(t, dir, "etcd-b", "main")
		from, err := adoptPrevious(filepath.Join(dir, "etcd-new"), "main", here, none)
		if err == nil || from != "" {
			t.Fatalf("adopted %q, %v; want an error and nothing adopted", from, err)
		}
		for _, n := range []string{"etcd-a", "etcd-b"} {
			if _, err := os.Stat(filepath.Join(dir, n, "current", datadir.MetaFile)); err != nil {
				t.Fatalf("%s: %v", n, err)
			}
		}
	})
	t.Run("a live member's directory is never adopted", func(t *testing.T) {
		dir := t.TempDir()
		mk(t, dir, "etcd-live", "main")
		from, err := adoptPrevious(filepath.Join(dir, "etcd-new"), "main", here, func(n string) (bool, bool) { return n == "etcd-live", n == "etcd-live" })
		if err != nil || from != "" {
			t.Fatalf("adopted %q, %v", from, err)
		}
	})
	t.Run("a directory whose WAL a running etcd holds is never adopted", func(t *testing.T) {
		dir := t.TempDir()
		mk(t, dir, "etcd-running", "main")
		wal := filepath.Join(dir, "etcd-running", "current", "etcd", "member", "wal")
		if err := os.MkdirAll(wal, 0o700); err != nil {
			t.Fatal(err)
		}
		l, err := fileutil.LockFile(filepath.Join(wal, "0000000000000000-0000000000000000.wal"), os.O_WRONLY|os.O_CREATE, fileutil.PrivateFileMode)
		if err != nil {
			t.Fatal(err)
		}
		from, err := adoptPrevious(filepath.Join(dir, "etcd-new"), "main", here, none)
		if err != nil || from != "" {
			t.Fatalf("adopted %q, %v: its WAL is locked by a running etcd", from, err)
		}
		l.Close()
		from, err = adoptPrevious(filepath.Join(dir, "etcd-new"), "main", here, none)
		if err != nil || from == "" {
			t.Fatalf("adopted %q, %v: once etcd released its WAL the directory is the previous member's", from, err)
		}
	})
	t.Run("a copy not cleanly stopped is never adopted", func(t *testing.T) {
		// chaos-hosts seed 11: a lost allocation's client came back with
		// its member still running, Nomad copied that running member's disk
		// into the replacement, and the replacement started the copy: one
		// member id with two logs, the copy's 9,000 revisions behind.
		dir := t.TempDir()
		mkStopped(t, dir, "etcd-copied", "main", false)
		from, err := adoptPrevious(filepath.Join(dir, "etcd-new"), "main", here, none)
		if err == nil || from != "" {
			t.Fatalf("adopted %q, %v; want an error and nothing adopted", from, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "etcd-copied", "current", datadir.MetaFile)); err != nil {
			t.Fatalf("the copy must be kept: %v", err)
		}
	})
	t.Run("a crashed member's data moved on this host is adopted once its owner is gone", func(t *testing.T) {
		// A crash loop, then Nomad's reschedule on the same host: the
		// terminated allocation's disk is renamed into the replacement.
		dir := t.TempDir()
		mkOn(t, dir, "etcd-crashed", "main", false, here)
		listed := func(n string) (bool, bool) { return n == "etcd-crashed", false }
		if from, err := adoptPrevious(filepath.Join(dir, "etcd-new"), "main", here, listed); from != "" {
			t.Fatalf("adopted %q, %v while the provider still lists its owner (it may run on)", from, err)
		}
		from, err := adoptPrevious(filepath.Join(dir, "etcd-new"), "main", here, none)
		if err != nil || from != filepath.Join(dir, "etcd-crashed") {
			t.Fatalf("adopted %q, %v; want etcd-crashed", from, err)
		}
	})
	t.Run("a member with a directory of its own adopts nothing", func(t *testing.T) {
		dir := t.TempDir()
		mk(t, dir, "etcd-old", "main")
		if err := os.MkdirAll(filepath.Join(dir, "etcd-new", "aside"), 0o700); err != nil {
			t.Fatal(err)
		}
		from, err := adoptPrevious(filepath.Join(dir, "etcd-new"), "main", here, none)
		if err != nil || from != "" {
			t.Fatalf("adopted %q, %v", from, err)
		}
	})
}

// TestCleanStopIsMarkedAndClearedOnStart: a real member marks its data
// cleanly stopped only after its etcd stopped, and clears the mark before
// etcd starts again, so a copy of a running member's directory never
// carries it (and is never adopted).
func TestCleanStopIsMarkedAndClearedOnStart(t *testing.T) {
	k := newKit(t, "m0")
	m := k.member("m0", nil)
	stop := runLoop(t, m)
	running := func() (bool, string) {
		m.mu.Lock()
		e := m.proc.Server()
		m.mu.Unlock()
		meta, err := m.dir.ReadMeta()
		return e != nil && err == nil && meta.MemberID != 0, fmt.Sprintf("etcd running %v, meta %+v %v", e != nil, meta, err)
	}
	waitUntil(t, 20*time.Second, "m0 running", running)
	if meta, _ := m.dir.ReadMeta(); meta.Stopped {
		t.Fatalf("a running member's data is marked stopped: %+v", meta)
	}
	stop()
	if meta, err := m.dir.ReadMeta(); err != nil || !meta.Stopped {
		t.Fatalf("after a clean stop: %+v, %v; want the stopped mark", meta, err)
	}
	again := k.member("m0", nil)
	runLoop(t, again)
	waitUntil(t, 20*time.Second, "m0 running again", func() (bool, string) {
		again.mu.Lock()
		e := again.proc.Server()
		again.mu.Unlock()
		meta, err := again.dir.ReadMeta()
		return e != nil && err == nil && !meta.Stopped && meta.Host == again.self.Address, fmt.Sprintf("etcd running %v, meta %+v %v", e != nil, meta, err)
	})
}
