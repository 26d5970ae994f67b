package local

import (
	"testing"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/coord/coordtest"
)

// TestConformance runs the coordinator suite on two coordinators of one
// shared directory (two members).
func TestConformance(t *testing.T) {
	coordtest.Run(t, func(t *testing.T) (coord.Coordinator, coord.Coordinator) {
		dir := t.TempDir()
		a, err := New(dir)
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(dir)
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	})
}
