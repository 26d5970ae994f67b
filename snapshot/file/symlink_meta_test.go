package file_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// List's doc says metadata that is "unreadable (permissions, a
// symlink)" is listed by name, refused; the DirEntry type check skips a
// symlink before the ELOOP branch is reached: the object is hidden.
func TestSymlinkedMetadataIsListedRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := file.New(dir, "c")
	if err != nil {
		t.Fatal(err)
	}
	name := snapshot.ObjectName("c", 1, 5, time.Now().UTC(), false)
	if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(other, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(dir, name+".meta.json")); err != nil {
		t.Fatal(err)
	}
	l, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 1 || l[0].Corrupt == "" {
		t.Fatalf("symlinked metadata of %s: listed %+v, want it listed by name and refused (List's doc)", name, l)
	}
}
