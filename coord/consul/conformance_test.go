package consul

import (
	"testing"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/coord/coordtest"
)

// TestConformance runs the coordinator suite on a real Consul dev agent:
// two coordinators (two members, two clients) on one fresh prefix per case.
func TestConformance(t *testing.T) {
	addr := consulAgent(t)
	coordtest.Run(t, func(t *testing.T) (coord.Coordinator, coord.Coordinator) {
		return newCoord(t, addr, "conformance/"+t.Name()), newCoord(t, addr, "conformance/"+t.Name())
	})
}
