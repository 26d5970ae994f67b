package file_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// Third security review (rev13b): a store writer plants a FIFO under a metadata name. List opens
// it (os.Open blocks until a writer opens the FIFO) and never returns:
// the listing ignores its context, and every member that lists (each
// loop during a quorum loss, the delta supervisor) is wedged, not just
// told the object is corrupt.
func TestPlantedFIFOMetadataDoesNotHangTheListing(t *testing.T) {
	dir := t.TempDir()
	s, err := file.New(dir, "c")
	if err != nil {
		t.Fatal(err)
	}
	name := snapshot.ObjectName("c", 1, 5, time.Now().UTC(), false)
	fifo := filepath.Join(dir, name+".meta.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := s.List(ctx); done <- err }()
	select {
	case err := <-done:
		t.Logf("List: %v", err)
	case <-time.After(3 * time.Second):
		// Unblock the leaked List before failing.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("List of a store with a FIFO planted as metadata did not return in 3 s (its 1 s context ignored): the member's loop waits forever")
	}
}
