package s3_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// TestStoreOverTLSWithCAFile: the S3 store opened from a cluster
// definition talks https to a real S3 server whose certificate comes from
// a private CA: it fails without ca_file (certificate not trusted) and
// works with it.
func TestStoreOverTLSWithCAFile(t *testing.T) {
	tier.Starts(t, "an S3 server")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ca, err := certs.NewCA("s3-test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := certs.Issue(ca, "s3", []string{"127.0.0.1", "localhost"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	files, err := certs.Write(filepath.Join(dir, "tls"), "s3", ca.Cert, srv)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := devagents.StartS3TLS(ctx, filepath.Join(dir, "s3"), files.Cert, files.Key, "etcd-backups")
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Stop(10 * time.Second)
	if !strings.HasPrefix(agent.Addr, "https://") {
		t.Fatalf("agent address %s is not https", agent.Addr)
	}
	clustertest.AWSEnv(t, devagents.S3AccessKey, devagents.S3SecretKey)
	t.Setenv("AWS_CA_BUNDLE", "")

	load := func(caLine string) *config.Cluster {
		t.Helper()
		cl, _, diags := config.LoadFile(writeS3Def(t, dir, `
      bucket     = "etcd-backups"
      endpoint   = "`+agent.Addr+`"
      region     = "us-east-1"
      path_style = true
      `+caLine))
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		return cl
	}

	untrusted, err := backends.Store(ctx, load(""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untrusted.List(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("list without ca_file: %v, want a certificate error", err)
	}

	store, err := backends.Store(ctx, load(`ca_file = "tls/ca.crt"`))
	if err != nil {
		t.Fatal(err)
	}
	name := snapshot.ObjectName("tls", 1, 7, time.Now(), false)
	body := []byte("snapshot over TLS")
	if _, err := store.Put(ctx, name, bytes.NewReader(body)); err != nil {
		t.Fatalf("put over TLS: %v", err)
	}
	if err := store.PutMeta(ctx, snapshot.Meta{Name: name, Cluster: "tls", Revision: 7, Created: time.Now().UTC(), StoredSize: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	list, err := store.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != name {
		t.Fatalf("list over TLS: %v %v", list, err)
	}
}

// TestCAFileNeedsHTTPS: ca_file with a plain-http endpoint is a
// configuration error naming the field.
func TestCAFileNeedsHTTPS(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := writeS3Def(t, dir, `
      bucket   = "b"
      endpoint = "http://127.0.0.1:9000"
      ca_file  = "ca.crt"`)
	_, _, diags := config.LoadFile(file)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "ca_file") || !strings.Contains(diags.Error(), "cluster.hcl:15") {
		t.Fatalf("diagnostics = %v, want an error on ca_file at cluster.hcl:15", diags)
	}
}

// writeS3Def writes dir/cluster.hcl: a one-member static cluster whose
// snapshot store is s3 with the given attributes (from its line 13 on).
func writeS3Def(t *testing.T, dir, storeAttrs string) string {
	t.Helper()
	file := filepath.Join(dir, "cluster.hcl")
	def := `cluster "tls" {
  data_dir = "/tmp/unused"
  provider "static" {
    member "m0" {
      address = "127.0.0.1"
    }
  }
  coordination "local" {
    dir = "/tmp/unused-coord"
  }
  snapshot {
    store "s3" {` + storeAttrs + `
    }
  }
}
`
	if err := os.WriteFile(file, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}
