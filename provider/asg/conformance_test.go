package asg_test

import (
	"slices"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/provider/asg"
	"github.com/etcd-nomad/etcd-nomad/provider/asg/asgtest"
	"github.com/etcd-nomad/etcd-nomad/provider/providertest"
)

var groupCapabilities = []providertest.Capability{
	providertest.Leaver, providertest.Departer, providertest.Replacer, providertest.Invalidator,
}

// cachingProvider reuses its readings for an hour: the suite's fresh
// readings must come from Invalidate, not from the cache's age.
func cachingProvider(t *testing.T, s *asgtest.Server, self string) *asg.Provider {
	t.Helper()
	return newProviderRefresh(t, s, self, time.Hour)
}

// The group's own instances are the members (asgtest serves the AWS calls).
func TestConformance(t *testing.T) {
	providertest.Run(t, groupCapabilities, func(t *testing.T) providertest.Backend {
		s := fakeGroup(t)
		return providertest.Backend{
			Provider: cachingProvider(t, s, "i-a"),
			Peer:     cachingProvider(t, s, "i-b"),
			Self:     "i-a",
			Other:    "i-b",
			TakeAway: func(*testing.T) { s.SetLifecycle("i-a", "Terminating:Wait") },
			Departed: func(*testing.T) bool { return slices.Contains(s.Completed(), "i-a") },
		}
	})
}

// Nomad allocations on the group's instances (the Nomad side in memory,
// as in nomad_test.go; asgtest serves the AWS calls).
func TestOnNomadConformance(t *testing.T) {
	providertest.Run(t, groupCapabilities, func(t *testing.T) providertest.Backend {
		s := fakeGroup(t)
		al := &allocs{
			insts: []provider.Instance{
				{Name: "etcd-1", Address: "10.0.0.1", ClientPort: 20001, PeerPort: 20002, StatusPort: 20003},
				{Name: "etcd-2", Address: "10.0.0.2", ClientPort: 20001, PeerPort: 20002, StatusPort: 20003},
			},
			nodes: map[string]string{"etcd-1": "node-a", "etcd-2": "node-b"},
			self:  "etcd-1",
		}
		nodes := nodeMap{"node-a": "i-a", "node-b": "i-b"}
		peer := &allocs{insts: al.insts, nodes: al.nodes, self: "etcd-2"}
		return providertest.Backend{
			Provider: &asg.OnNomad{Allocs: al, Group: cachingProvider(t, s, "-"), Nodes: nodes},
			Peer:     &asg.OnNomad{Allocs: peer, Group: cachingProvider(t, s, "-"), Nodes: nodes},
			Self:     "etcd-1",
			Other:    "etcd-2",
			TakeAway: func(*testing.T) { s.SetLifecycle("i-a", "Terminating:Wait") },
			Departed: func(*testing.T) bool { return slices.Contains(s.Completed(), "i-a") },
		}
	})
}
