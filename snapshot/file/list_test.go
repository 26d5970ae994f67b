package file

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// TestOneBadMetadataDoesNotFailTheListing: one unreadable metadata file
// failed the whole listing of a file store (the S3 store skips it with a
// warning). A failed listing holds every seed and recovery
// (ListingUnanswered) and stops scheduled snapshots: one bad file wedged
// them until an operator deleted it by hand. It is reported, and listed by
// its name, refused (third security review: skipped, it was hidden); the
// good snapshot is listed (session-13 data review, red before).
func TestOneBadMetadataDoesNotFailTheListing(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	s, err := New(dir, "unit")
	if err != nil {
		t.Fatal(err)
	}
	s.Log = hclog.New(&hclog.LoggerOptions{Output: &logs})
	ctx := context.Background()
	good := snapshot.ObjectName("unit", 1, 2, time.Now().UTC(), false)
	if _, err := s.Put(ctx, good, strings.NewReader("good")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMeta(ctx, snapshot.Meta{Name: good, Cluster: "unit", Epoch: 1, Revision: 2, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	bad := "unit-e1-r00000000000000000001-20261127T000000Z.snap.zst"
	if err := os.WriteFile(filepath.Join(dir, bad+metaSuffix), []byte("{trunc"), 0o600); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatalf("listing failed on one bad metadata file: %v", err)
	}
	if len(list) != 2 || list[0].Name != bad || list[0].Corrupt == "" || list[1].Name != good {
		t.Fatalf("listed %+v, want %s (refused by name) and %s", list, bad, good)
	}
	if !strings.Contains(logs.String(), bad) {
		t.Fatalf("%s skipped without a report; log:\n%s", bad, logs.String())
	}
}

// TestMetadataVanishingDuringAListingIsSkipped: retention deletes a
// snapshot between the listing's ReadDir and its read of the metadata.
// That failed the whole listing; it is skipped, as S3's listing skips
// metadata deleted since its listing (red before). (It planted a dangling
// symlink before: a symlink is now listed refused by its name,
// TestSymlinkedMetadataIsListedRefused.)
func TestMetadataVanishingDuringAListingIsSkipped(t *testing.T) {
	dir := t.TempDir()
	s, err := New(dir, "unit")
	if err != nil {
		t.Fatal(err)
	}
	gone := snapshot.ObjectName("unit", 1, 1, time.Now().UTC(), false)
	meta := filepath.Join(dir, gone+metaSuffix)
	if err := os.WriteFile(meta, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.afterReadDir = func() {
		if err := os.Remove(meta); err != nil {
			t.Error(err)
		}
	}
	list, err := s.List(context.Background())
	if err != nil || len(list) != 0 {
		t.Fatalf("listing beside metadata deleted meanwhile: %+v, %v; want empty, no error", list, err)
	}
}
