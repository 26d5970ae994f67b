package datadir

import (
	"errors"
	"os"
	"reflect"
	"testing"
	"time"
)

// The holders file round-trips; a missing one is os.ErrNotExist; a torn
// one, another version, or a holder without a name or time is an error,
// never "no holders"; a rewrite leaves no temporary file.
func TestHoldersFile(t *testing.T) {
	d := Dir{Root: t.TempDir() + "/m0"}
	if _, err := d.ReadHolders(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no file: %v, want os.ErrNotExist", err)
	}
	at := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	want := Holders{Cluster: "c", Written: at, Holders: []Holder{{Name: "b", ClientURL: "http://b:2379", ClusterID: 0x17, Epoch: 1, ListedAt: at, Listed: true,
		Words: []HolderWord{{ClientURL: "http://b2:2379", ClusterID: 0x17}}}}}
	if err := d.WriteHolders(want); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadHolders()
	if err != nil || got.Version != HoldersVersion || len(got.Holders) != 1 || got.Cluster != "c" || !reflect.DeepEqual(got.Holders[0], want.Holders[0]) {
		t.Fatalf("read back %+v (%v), want %+v", got, err, want)
	}
	if _, err := os.Stat(d.HoldersPath() + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left: %v", err)
	}
	for name, body := range map[string]string{
		"torn":          `{"version":1,"holders":[{"name":"b"`,
		"other version": `{"version":2,"holders":[]}`,
		"no name":       `{"version":1,"holders":[{"listed_at":"2026-11-28T03:00:00Z"}]}`,
		"no time":       `{"version":1,"holders":[{"name":"b"}]}`,
	} {
		if err := os.WriteFile(d.HoldersPath(), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if h, err := d.ReadHolders(); err == nil || errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %+v (%v), want an error", name, h, err)
		}
	}
}
