package file_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
	"github.com/etcd-nomad/etcd-nomad/snapshot/storetest"
)

// TestConformance runs the store suite on a fresh directory per case.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (snapshot.Store, storetest.Raw) {
		dir := t.TempDir()
		s, err := file.New(dir, storetest.Cluster)
		if err != nil {
			t.Fatal(err)
		}
		return s, func(_ context.Context, key string, body []byte) error {
			return os.WriteFile(filepath.Join(dir, key), body, 0o600)
		}
	})
}
