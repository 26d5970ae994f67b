package file_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// TestClustersSharingADirectoryNeverSeeOrPruneEachOther: two clusters
// whose definitions name the same path (one mounted volume for all
// backups) each list, open, prune and delete only their own snapshots.
// "main-e2" is a valid cluster name whose snapshots start with "main-e",
// as "main"'s do.
func TestClustersSharingADirectoryNeverSeeOrPruneEachOther(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stores := map[string]*file.Store{}
	for _, cluster := range []string{"main", "main-e2"} {
		s, err := file.New(dir, cluster)
		if err != nil {
			t.Fatal(err)
		}
		stores[cluster] = s
		for i := range 3 {
			created := start.Add(time.Duration(i) * time.Hour)
			if cluster == "main-e2" {
				created = created.Add(10 * time.Hour) // the other cluster's are newer
			}
			name := snapshot.ObjectName(cluster, 1, int64(100+i), created, false)
			if _, err := s.Put(ctx, name, strings.NewReader(cluster)); err != nil {
				t.Fatal(err)
			}
			if err := s.PutMeta(ctx, snapshot.Meta{Name: name, Cluster: cluster, Epoch: 1, Revision: int64(100 + i), Created: created}); err != nil {
				t.Fatal(err)
			}
		}
	}
	main, other := stores["main"], stores["main-e2"]
	list, err := main.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Fatalf("cluster main lists %d snapshots, want its own 3: %v", len(list), names(list))
	}
	for _, m := range list {
		if m.Cluster != "main" {
			t.Fatalf("cluster main lists %s of cluster %s", m.Name, m.Cluster)
		}
	}
	// Retention of main keeping one: only main's two older ones go.
	for _, m := range snapshot.Expired(list, 1, 0, start.Add(24*time.Hour)) {
		if err := main.Delete(ctx, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	theirs, err := other.List(ctx)
	if err != nil || len(theirs) != 3 {
		t.Fatalf("main's retention pruned the other cluster: it lists %v (%v), want 3", names(theirs), err)
	}
	if left, _ := main.List(ctx); len(left) != 1 {
		t.Fatalf("main kept %v, want 1", names(left))
	}
	// Neither opens nor deletes the other's snapshot by name.
	if _, _, err := main.Open(ctx, theirs[2].Name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("main opened the other cluster's %s: %v", theirs[2].Name, err)
	}
	if err := main.Delete(ctx, theirs[2].Name); err == nil {
		t.Fatalf("main deleted the other cluster's %s", theirs[2].Name)
	}
	if _, err := os.Stat(dir + "/" + theirs[2].Name); err != nil {
		t.Fatalf("the other cluster's object: %v", err)
	}
	if _, err := file.New(dir, ""); err == nil {
		t.Fatal("a store without a cluster was accepted")
	}
}

func names(list []snapshot.Meta) []string {
	var out []string
	for _, m := range list {
		out = append(out, fmt.Sprintf("%s(%s)", m.Name, m.Cluster))
	}
	return out
}
