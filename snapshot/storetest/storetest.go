// Package storetest is the conformance suite every snapshot store backend
// (snapshot/file, snapshot/s3) runs: the snapshot.Store contract as the
// snapshot code relies on it (a streamed object invisible until its
// metadata, read back byte for byte, os.ErrNotExist for what is missing,
// deletion of object and metadata, names that cannot escape the store),
// checked the same way against each backend on its real storage. Backend
// tests keep only what is theirs (multipart cleanup, TLS, shared
// directories).
package storetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Cluster is the cluster the stores Open returns belong to: object names
// are snapshot.ObjectName(Cluster, ...).
const Cluster = "main"

// Open returns an empty store of Cluster, stopped by the test's cleanup,
// and a way to write its storage directly.
type Open func(t *testing.T) (snapshot.Store, Raw)

// Raw writes body under key in the store's storage (key is what the store
// names OBJECT or OBJECT.meta.json: a file in its directory, an object
// under its prefix), as a store writer does, bypassing the store.
type Raw func(ctx context.Context, key string, body []byte) error

// Run runs the suite, each case on a fresh store from open.
func Run(t *testing.T, open Open) {
	for _, c := range []struct {
		name string
		test func(*testing.T, snapshot.Store, Raw)
	}{
		{"LargeObjectRoundTrip", plain(largeObjectRoundTrip)},
		{"MetaRoundTrip", plain(metaRoundTrip)},
		{"MissingIsErrNotExist", plain(missingIsErrNotExist)},
		{"DeleteRemovesObjectAndMeta", plain(deleteRemovesObjectAndMeta)},
		{"NamesCannotEscape", plain(namesCannotEscape)},
		{"CorruptMetadataIsListedRefused", corruptMetadataIsListedRefused},
		{"OversizeMetadataIsListedRefusedUnread", oversizeMetadataIsListedRefusedUnread},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, raw := open(t)
			c.test(t, s, raw)
		})
	}
}

func plain(f func(*testing.T, snapshot.Store)) func(*testing.T, snapshot.Store, Raw) {
	return func(t *testing.T, s snapshot.Store, _ Raw) { f(t, s) }
}

func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// put stores body under a name of revision rev and returns the metadata
// it recorded.
func put(t *testing.T, ctx context.Context, s snapshot.Store, rev int64, body []byte) snapshot.Meta {
	t.Helper()
	created := start.Add(time.Duration(rev) * time.Second)
	name := snapshot.ObjectName(Cluster, 1, rev, created, false)
	n, err := s.Put(ctx, name, bytes.NewReader(body))
	if err != nil || n != int64(len(body)) {
		t.Fatalf("put %s: %d bytes, %v; want %d", name, n, err, len(body))
	}
	m := snapshot.Meta{Name: name, Cluster: Cluster, Epoch: 1, Revision: rev, Created: created, Size: n, StoredSize: n, Codec: "zstd"}
	if err := s.PutMeta(ctx, m); err != nil {
		t.Fatalf("put meta of %s: %v", name, err)
	}
	return m
}

func list(t *testing.T, ctx context.Context, s snapshot.Store) []snapshot.Meta {
	t.Helper()
	l, err := s.List(ctx)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	sort.Slice(l, func(i, j int) bool { return l[i].Name < l[j].Name })
	return l
}

func readAll(t *testing.T, ctx context.Context, s snapshot.Store, name string) ([]byte, snapshot.Meta) {
	t.Helper()
	rc, m, err := s.Open(ctx, name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return b, m
}

// A 40 MiB object (more than two 16 MiB multipart parts) is streamed in,
// stays invisible to List until its metadata is stored, and reads back
// byte for byte.
func largeObjectRoundTrip(t *testing.T, s snapshot.Store) {
	ctx := timeout(t)
	body := bytes.Repeat([]byte("etcd-nomad "), 40<<20/11)
	name := snapshot.ObjectName(Cluster, 1, 42, start, false)
	n, err := s.Put(ctx, name, io.MultiReader(bytes.NewReader(body)))
	if err != nil || n != int64(len(body)) {
		t.Fatalf("put: %d %v", n, err)
	}
	if l := list(t, ctx, s); len(l) != 0 {
		t.Fatalf("object listed before its metadata: %v", l)
	}
	if err := s.PutMeta(ctx, snapshot.Meta{Name: name, Cluster: Cluster, Epoch: 1, Revision: 42, Created: start, StoredSize: n}); err != nil {
		t.Fatal(err)
	}
	if l := list(t, ctx, s); len(l) != 1 || l[0].Name != name || l[0].Revision != 42 {
		t.Fatalf("list after the metadata: %+v", l)
	}
	back, m := readAll(t, ctx, s, name)
	if !bytes.Equal(back, body) || m.Name != name {
		t.Fatalf("read back %d bytes as %s, want %d as %s", len(back), m.Name, len(body), name)
	}
}

// Every metadata field reads back as stored, from List and from Open,
// for each of several objects.
func metaRoundTrip(t *testing.T, s snapshot.Store) {
	ctx := timeout(t)
	want := []snapshot.Meta{put(t, ctx, s, 100, []byte("one")), put(t, ctx, s, 101, []byte("two"))}
	full := snapshot.Meta{
		Name: snapshot.ObjectName(Cluster, 3, 102, start, true), Cluster: Cluster, ClusterID: "c1", Epoch: 3, Revision: 102,
		Endpoint: "https://10.0.0.1:2379", MemberID: "8e9e05c52164694d", EtcdVersion: "3.6.16", Created: start,
		Size: 5, SHA256: strings.Repeat("ab", 32), StoredSize: 5, Encrypted: true, Codec: "zstd",
		Kind: snapshot.KindDelta, FirstRevision: 90, Base: "base", Events: 7,
	}
	if _, err := s.Put(ctx, full.Name, strings.NewReader("three")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMeta(ctx, full); err != nil {
		t.Fatal(err)
	}
	want = append(want, full)
	got := list(t, ctx, s)
	if len(got) != len(want) {
		t.Fatalf("list: %d objects, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !sameMeta(got[i], want[i]) {
			t.Errorf("listed %+v,\nwant %+v", got[i], want[i])
		}
		if b, m := readAll(t, ctx, s, want[i].Name); !sameMeta(m, want[i]) || len(b) == 0 {
			t.Errorf("opened %+v (%d bytes),\nwant %+v", m, len(b), want[i])
		}
	}
}

func sameMeta(a, b snapshot.Meta) bool {
	if !a.Created.Equal(b.Created) {
		return false
	}
	a.Created, b.Created = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// A name never stored opens with os.ErrNotExist, as does an object whose
// metadata was never stored.
func missingIsErrNotExist(t *testing.T, s snapshot.Store) {
	ctx := timeout(t)
	if _, _, err := s.Open(ctx, snapshot.ObjectName(Cluster, 1, 7, start, false)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open of a name never stored: %v, want os.ErrNotExist", err)
	}
	name := snapshot.ObjectName(Cluster, 1, 8, start, false)
	if _, err := s.Put(ctx, name, strings.NewReader("no metadata")); err != nil {
		t.Fatal(err)
	}
	if rc, _, err := s.Open(ctx, name); !errors.Is(err, os.ErrNotExist) {
		if err == nil {
			rc.Close()
		}
		t.Fatalf("open of an object without metadata: %v, want os.ErrNotExist", err)
	}
}

// Delete removes the object and its metadata, and only that one.
func deleteRemovesObjectAndMeta(t *testing.T, s snapshot.Store) {
	ctx := timeout(t)
	gone := put(t, ctx, s, 200, []byte("gone"))
	kept := put(t, ctx, s, 201, []byte("kept"))
	if err := s.Delete(ctx, gone.Name); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(ctx, gone.Name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open after delete: %v, want os.ErrNotExist", err)
	}
	if l := list(t, ctx, s); len(l) != 1 || l[0].Name != kept.Name {
		t.Fatalf("list after deleting %s: %+v, want only %s", gone.Name, l, kept.Name)
	}
	if b, _ := readAll(t, ctx, s, kept.Name); string(b) != "kept" {
		t.Fatalf("the other object reads %q", b)
	}
}

// Names that could leave the store's directory or prefix are refused by
// every method that takes one, and nothing lands.
func namesCannotEscape(t *testing.T, s snapshot.Store) {
	ctx := timeout(t)
	for _, name := range []string{"", "../escape", "a/b", `a\b`, ".hidden"} {
		if _, err := s.Put(ctx, name, strings.NewReader("x")); err == nil {
			t.Errorf("Put accepted %q", name)
		}
		if err := s.PutMeta(ctx, snapshot.Meta{Name: name, Cluster: Cluster, Epoch: 1, Revision: 1}); err == nil {
			t.Errorf("PutMeta accepted %q", name)
		}
		if rc, _, err := s.Open(ctx, name); err == nil {
			rc.Close()
			t.Errorf("Open accepted %q", name)
		}
		if err := s.Delete(ctx, name); err == nil {
			t.Errorf("Delete accepted %q", name)
		}
	}
	if l := list(t, ctx, s); len(l) != 0 {
		t.Fatalf("list after refused names: %+v", l)
	}
}

// One metadata object that does not decode (a store writer's, a torn
// copy) neither fails the listing nor hides its object: it is listed by
// what its name encodes (snapshot.NameMeta), and authentication refuses
// it, as it refuses a forged MAC. A failed listing holds every seed,
// recovery and save of the members (the file store failed it once);
// a hidden object let a writer who overwrote the newest
// segment's metadata with garbage make members recover from older data
// (third security review).
func corruptMetadataIsListedRefused(t *testing.T, s snapshot.Store, raw Raw) {
	ctx := timeout(t)
	good := put(t, ctx, s, 300, []byte("good"))
	bad := snapshot.ObjectName(Cluster, 1, 301, start.Add(301*time.Second), false)
	if err := raw(ctx, bad, []byte("object")); err != nil {
		t.Fatal(err)
	}
	if err := raw(ctx, bad+".meta.json", []byte(`{"name": "trunc`)); err != nil {
		t.Fatal(err)
	}
	l := list(t, ctx, s)
	if len(l) != 2 || l[0].Name != good.Name {
		t.Fatalf("listed %+v, want %s and %s", l, good.Name, bad)
	}
	listedRefused(t, l[1], bad, 301)
	if rc, _, err := s.Open(ctx, bad); !errors.Is(err, snapshot.ErrCorruptMeta) {
		if err == nil {
			rc.Close()
		}
		t.Fatalf("open of %s: %v, want snapshot.ErrCorruptMeta", bad, err)
	}
}

// listedRefused checks that m is the listing of object name at revision
// whose metadata is corrupt: what the name encodes, refused with or
// without a MAC key.
func listedRefused(t *testing.T, m snapshot.Meta, name string, revision int64) {
	t.Helper()
	if m.Name != name || m.Cluster != Cluster || m.Epoch != 1 || m.Revision != revision || m.Corrupt == "" || m.MAC != "" {
		t.Fatalf("corrupt metadata of %s listed as %+v: want what its name encodes, marked corrupt", name, m)
	}
	for _, key := range [][]byte{nil, make([]byte, snapshot.MACKeySize)} {
		if err := (snapshot.Encryption{MACKey: key, AcceptUnauthenticated: true}).Authenticated(m); !errors.Is(err, snapshot.ErrCorruptMeta) {
			t.Fatalf("corrupt metadata of %s authenticates (key %v): %v", name, key != nil, err)
		}
	}
}

// A metadata object larger than snapshot.MaxMetaSize (valid JSON, one
// huge field) is corrupt, listed refused by its name, and the listing
// reads no more of it than that: read whole, a store writer's object of a
// few GiB was an OOM of every member in turn.
func oversizeMetadataIsListedRefusedUnread(t *testing.T, s snapshot.Store, raw Raw) {
	ctx := timeout(t)
	good := put(t, ctx, s, 400, []byte("good"))
	big := snapshot.ObjectName(Cluster, 1, 401, start.Add(401*time.Second), false)
	if err := raw(ctx, big, []byte("object")); err != nil {
		t.Fatal(err)
	}
	const size = 32 << 20
	body := []byte(`{"name":"` + big + `","cluster":"` + Cluster + `","epoch":1,"revision":401,"endpoint":"` + strings.Repeat("A", size) + `"}`)
	if err := raw(ctx, big+".meta.json", body); err != nil {
		t.Fatal(err)
	}
	body = nil
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	l, err := s.List(ctx)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("list beside oversize metadata: %v", err)
	}
	if len(l) != 2 || l[0].Name != good.Name {
		t.Fatalf("listed %d objects (%s...), want %s and %s", len(l), l[len(l)-1].Name, good.Name, big)
	}
	listedRefused(t, l[1], big, 401)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
		t.Fatalf("a listing beside %d MiB of metadata allocated %d MiB: read whole", size>>20, alloc>>20)
	}
}
