package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/s3"
)

// The S3 store against a real S3-compatible server (versitygw, built by
// tools/build.sh): multipart streaming upload, metadata last, listing,
// deletion, missing objects.
func TestStoreOnRealS3Server(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	agent, err := devagents.StartS3(ctx, t.TempDir(), "etcd-backups")
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Stop(10 * time.Second)
	clustertest.AWSEnv(t, devagents.S3AccessKey, devagents.S3SecretKey)
	store, err := s3.New(ctx, s3.Options{Bucket: "etcd-backups", Prefix: "main/", Endpoint: agent.Addr, Region: "us-east-1", PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	// 40 MiB: more than two 16 MiB parts.
	body := bytes.Repeat([]byte("etcd-nomad "), 40<<20/11)
	name := snapshot.ObjectName("main", 1, 42, time.Now(), false)
	n, err := store.Put(ctx, name, io.MultiReader(bytes.NewReader(body)))
	if err != nil || n != int64(len(body)) {
		t.Fatalf("put: %d %v", n, err)
	}
	if list, _ := store.List(ctx); len(list) != 0 {
		t.Fatalf("object listed before its metadata: %v", list)
	}
	m := snapshot.Meta{Name: name, Cluster: "main", Revision: 42, Created: time.Now().UTC(), StoredSize: n}
	if err := store.PutMeta(ctx, m); err != nil {
		t.Fatal(err)
	}
	list, err := store.List(ctx)
	if err != nil || len(list) != 1 || list[0].Revision != 42 {
		t.Fatalf("list %v %v", list, err)
	}
	rc, got, err := store.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(back, body) || got.Name != name {
		t.Fatalf("read back %d bytes (%v), want %d", len(back), err, len(body))
	}
	if err := store.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Open(ctx, name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open after delete: %v", err)
	}
	if _, err := store.Put(ctx, "../escape", strings.NewReader("x")); err == nil {
		t.Fatal("a name escaping the prefix was accepted")
	}
}
