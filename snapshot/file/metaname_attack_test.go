package file_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// Third security review (rev13b): the S3 store skips metadata that names another object than its
// key ("metadata of X names Y": ErrCorruptMeta); the file store lists it.
// A store writer's metadata file of a valid file name can so carry a
// name of ~64 KiB (no file name could), which every member keeps for the
// life of the process (task's refusedSnapshots, logged once per name and
// never forgotten): a few thousand such per listing, renamed each time,
// grow every member without bound.
func TestFileMetadataNamesItsOwnFile(t *testing.T) {
	dir := t.TempDir()
	s, err := file.New(dir, "c")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	file := snapshot.ObjectName("c", 1, 9, now, false)
	long := file + strings.Repeat("x", 60<<10)
	b, _ := json.Marshal(snapshot.Meta{Name: long, Cluster: "c", Epoch: 1, Revision: 9, Created: now})
	if err := os.WriteFile(filepath.Join(dir, file+".meta.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, file), []byte("x"), 0o600)
	list, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list {
		if m.Name != file {
			t.Fatalf("List returned metadata from file %s naming another object (%d bytes long): the file store does not bind a metadata file to its name", file, len(m.Name))
		}
	}
	// Not hidden either: listed by its own name, refused.
	if len(list) != 1 || list[0].Corrupt == "" || (snapshot.Encryption{}).Authenticated(list[0]) == nil {
		t.Fatalf("metadata naming another object listed as %+v: want its file's object, refused", list)
	}
}
