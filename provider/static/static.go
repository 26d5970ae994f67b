// Package static is a provider with a fixed list of members, from the
// cluster definition. Set replaces the list (tests, and reloads).
package static

import (
	"context"
	"sync"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/provider"
)

// Provider serves a list of instances.
type Provider struct {
	mu        sync.Mutex
	instances []provider.Instance
}

var _ provider.Provider = (*Provider)(nil)

// New returns a provider serving the static members of a definition.
func New(ms []config.StaticMember) *Provider {
	p := &Provider{}
	p.Set(ms)
	return p
}

// Set replaces the member list.
func (p *Provider) Set(ms []config.StaticMember) {
	out := make([]provider.Instance, 0, len(ms))
	for _, m := range ms {
		out = append(out, provider.Instance{Name: m.Name, Address: m.Address, ClientPort: m.ClientPort, PeerPort: m.PeerPort, StatusPort: m.StatusPort})
	}
	p.mu.Lock()
	p.instances = out
	p.mu.Unlock()
}

// Instances returns a copy of the list.
func (p *Provider) Instances(context.Context) ([]provider.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]provider.Instance(nil), p.instances...), nil
}

// DesiredSize is the number of listed members.
func (p *Provider) DesiredSize(context.Context) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.instances), nil
}
