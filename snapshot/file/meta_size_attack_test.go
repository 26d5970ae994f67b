package file

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// TestPlantedHugeMetadataIsNotReadWhole: a store writer plants one
// OBJECT.meta.json of 64 MiB (valid JSON, a huge field). Every member's
// listing (the leader's save check, every loop during a quorum loss) read
// it whole into the process that runs etcd; at a few GiB that is an OOM of
// every member in turn. A listing reads at most snapshot.MaxMetaSize of a
// metadata object and skips a larger one as corrupt (session-13 security
// review, red before).
func TestPlantedHugeMetadataIsNotReadWhole(t *testing.T) {
	dir := t.TempDir()
	s, err := New(dir, "c")
	if err != nil {
		t.Fatal(err)
	}
	name := snapshot.ObjectName("c", 1, 5, time.Now().UTC(), false)
	body := `{"name":"` + name + `","cluster":"c","endpoint":"` + strings.Repeat("A", 64<<20) + `"}`
	if err := os.WriteFile(filepath.Join(dir, name+".meta.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	body = ""
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = s.List(context.Background())
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("List: %v; allocated %d MiB", err, alloc>>20)
	if err != nil {
		t.Fatalf("a listing beside oversize metadata: %v, want it skipped", err)
	}
	if alloc > 16<<20 {
		t.Fatalf("one planted 64 MiB metadata object made a listing allocate %d MiB: unbounded", alloc>>20)
	}
}
