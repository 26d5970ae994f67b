package file_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// Third security review (rev13b): "one bad entry does not hide the others ... only the directory
// failing fails List". A store writer plants a directory, or a file the
// member may not read, under a metadata name: the read error is no
// ErrCorruptMeta, and the whole listing fails (every seed, recovery and
// save held), as one undecodable file did before session 13. Now a
// directory (or FIFO: fifo_attack_test.go), which only a writer who could
// delete the genuine file can put under its name, is skipped; an
// unreadable file is listed by its name, refused (snapshot.NameMeta).
func TestUnreadableMetadataDoesNotFailTheListing(t *testing.T) {
	for _, kind := range []string{"directory", "unreadable"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s, err := file.New(dir, "c")
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			good := snapshot.Meta{Name: snapshot.ObjectName("c", 1, 5, time.Now().UTC().Add(-time.Hour), false), Cluster: "c", Epoch: 1, Revision: 5, Created: time.Now().UTC().Add(-time.Hour)}
			if _, err := s.Put(ctx, good.Name, strings.NewReader("x")); err != nil {
				t.Fatal(err)
			}
			if err := s.PutMeta(ctx, good); err != nil {
				t.Fatal(err)
			}
			bad := filepath.Join(dir, snapshot.ObjectName("c", 1, 9, time.Now().UTC(), false)+".meta.json")
			switch kind {
			case "directory":
				err = os.Mkdir(bad, 0o700)
			case "unreadable":
				if os.Geteuid() == 0 {
					t.Skip("root reads a 000 file")
				}
				err = os.WriteFile(bad, []byte("{}"), 0o000)
			}
			if err != nil {
				t.Fatal(err)
			}
			list, err := s.List(ctx)
			want := 1
			if kind == "unreadable" {
				want = 2
			}
			if err != nil || len(list) != want || list[0].Name != good.Name {
				t.Fatalf("List with a %s planted as metadata: %+v, err %v; want the genuine one listed, no error", kind, list, err)
			}
			if kind == "unreadable" && (list[1].Corrupt == "" || list[1].Revision != 9 || snapshot.Encryption{}.Authenticated(list[1]) == nil) {
				t.Fatalf("unreadable metadata listed as %+v: want it by its name, revision 9, refused", list[1])
			}
		})
	}
}
