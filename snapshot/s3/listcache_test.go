package s3_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/s3"
)

// metaReads counts the GETs of metadata objects the store sends and fails
// the first failFirst of them for one key with a connection reset, as a
// store behind a flaky network does.
type metaReads struct {
	mu        sync.Mutex
	n         int
	failKey   string
	failFirst int
}

func (r *metaReads) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, ".meta.json") {
		r.mu.Lock()
		r.n++
		fail := r.failKey != "" && strings.HasSuffix(req.URL.Path, r.failKey) && r.failFirst > 0
		if fail {
			r.failFirst--
		}
		r.mu.Unlock()
		if fail {
			return nil, errors.New("read tcp: connection reset by peer")
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

func (r *metaReads) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func countingStore(t *testing.T, ctx context.Context) (*s3.Store, *metaReads) {
	t.Helper()
	reads := &metaReads{}
	store, _ := s3EnvWith(t, ctx, nil, &http.Client{Transport: reads})
	return store, reads
}

func putObjects(t *testing.T, ctx context.Context, store *s3.Store, n int) []string {
	t.Helper()
	var names []string
	for i := 1; i <= n; i++ {
		name := snapshot.ObjectName("main", 1, int64(i), time.Now(), false)
		if _, err := store.Put(ctx, name, strings.NewReader(name)); err != nil {
			t.Fatal(err)
		}
		if err := store.PutMeta(ctx, snapshot.Meta{Name: name, Cluster: "main", Revision: int64(i), Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// A member lists the store on every loop, and a delta chain adds an object
// a second: every listing read every metadata object again (a chain of
// thousands of segments, thousands of GETs a loop). A listing reads only
// what is new or rewritten since the last (by the listed ETag).
func TestListReadsOnlyNewOrRewrittenMetadata(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store, reads := countingStore(t, ctx)
	names := putObjects(t, ctx, store, 5)
	if l, err := store.List(ctx); err != nil || len(l) != 5 {
		t.Fatalf("first list: %d objects, %v", len(l), err)
	}
	if n := reads.count(); n != 5 {
		t.Fatalf("first list read %d metadata objects, want 5", n)
	}
	if l, err := store.List(ctx); err != nil || len(l) != 5 {
		t.Fatalf("second list: %d objects, %v", len(l), err)
	}
	if n := reads.count() - 5; n != 0 {
		t.Fatalf("a second list with nothing changed read %d metadata objects again, want 0", n)
	}
	// A rewritten metadata object (an operator's adoption signs it in
	// place) is read again, and the listing shows the new content.
	if err := store.PutMeta(ctx, snapshot.Meta{Name: names[2], Cluster: "main", Revision: 3, Epoch: 7, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := reads.count() - 5; n != 1 {
		t.Fatalf("a list after one rewrite read %d metadata objects, want 1", n)
	}
	for _, m := range l {
		if m.Name == names[2] && m.Epoch != 7 {
			t.Fatalf("the rewritten metadata listed as %+v: the cache hid the rewrite", m)
		}
	}
	// A deleted object is no longer listed.
	if err := store.Delete(ctx, names[0]); err != nil {
		t.Fatal(err)
	}
	if l, err := store.List(ctx); err != nil || len(l) != 4 {
		t.Fatalf("list after a delete: %d objects, %v", len(l), err)
	}
}

// One metadata read that failed the SDK's own three attempts failed the
// whole listing, and with it a member's observation or recovery attempt
// (seen with a store resetting 1 connection in 5). List retries it.
func TestListRetriesAMetadataReadBeyondTheSDKsAttempts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store, reads := countingStore(t, ctx)
	names := putObjects(t, ctx, store, 3)
	reads.mu.Lock()
	reads.failKey, reads.failFirst = names[1]+".meta.json", 4
	reads.mu.Unlock()
	l, err := store.List(ctx)
	if err != nil {
		t.Fatalf("list with one metadata read reset 4 times in a row: %v", err)
	}
	if len(l) != 3 {
		t.Fatalf("listed %d objects, want 3", len(l))
	}
}

// Corrupt metadata (a store writer's, up to snapshot.MaxMetaSize of it
// read) was read again and reported again at every listing, every loop of
// every member. It is read and reported once per version (ETag), skipped
// every time (listed by its name, refused), and read again once
// rewritten.
func TestCorruptMetadataIsReadAndReportedOncePerVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var logs clustertest.SyncBuffer
	reads := &metaReads{}
	store, raw := s3EnvWith(t, ctx, hclog.New(&hclog.LoggerOptions{Output: &logs}), &http.Client{Transport: reads})
	names := putObjects(t, ctx, store, 2)
	bad := snapshot.ObjectName("main", 1, 9, time.Now(), false)
	if _, err := store.Put(ctx, bad, strings.NewReader(bad)); err != nil {
		t.Fatal(err)
	}
	plant := func(body string) {
		if _, err := raw.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("main/" + bad + ".meta.json"), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	plant(`{"name": "trunc`)
	for i := 0; i < 3; i++ {
		if l, err := store.List(ctx); err != nil || len(l) != len(names)+1 {
			t.Fatalf("list %d: %d objects, %v; want %d", i, len(l), err, len(names)+1)
		}
	}
	if n, r := reads.count(), strings.Count(logs.String(), "corrupt metadata, its object listed by name"); n != 3 || r != 1 {
		t.Fatalf("three listings read %d metadata objects and reported %s %d times; want 3 reads (2 good, 1 corrupt) and 1 report\n%s", n, bad, r, logs.String())
	}
	plant(`{"name": "still trunc`)
	if _, err := store.List(ctx); err != nil {
		t.Fatal(err)
	}
	if n, r := reads.count(), strings.Count(logs.String(), "corrupt metadata, its object listed by name"); n != 4 || r != 2 {
		t.Fatalf("after a rewrite: %d reads, %d reports; want 4 and 2", n, r)
	}
}
