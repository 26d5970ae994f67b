package file_test

import (
	"testing"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
	"github.com/etcd-nomad/etcd-nomad/snapshot/storetest"
)

// TestConformance runs the store suite on a fresh directory per case.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) snapshot.Store {
		s, err := file.New(t.TempDir(), storetest.Cluster)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
