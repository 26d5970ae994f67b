package static_test

import (
	"testing"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/provider/providertest"
	"github.com/etcd-nomad/etcd-nomad/provider/static"
)

// A static list has no optional capability: its members never leave,
// inherit, depart or get replaced through it.
func TestConformance(t *testing.T) {
	providertest.Run(t, nil, func(t *testing.T) providertest.Backend {
		p := static.New([]config.StaticMember{
			{Name: "m0", Address: "10.0.0.1", ClientPort: 2379, PeerPort: 2380, StatusPort: 2381},
			{Name: "m1", Address: "fd00::2", ClientPort: 2379, PeerPort: 2380, StatusPort: 2381},
		})
		return providertest.Backend{Provider: p, Peer: p, Self: "m0", Other: "m1"}
	})
}
