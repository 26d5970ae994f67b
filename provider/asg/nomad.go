package asg

import (
	"context"
	"fmt"
	"sync"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/provider"
)

// DefaultNodeAttribute is the Nomad node attribute that holds a client's
// EC2 instance id (set by Nomad's env_aws fingerprinter).
const DefaultNodeAttribute = "unique.platform.aws.instance-id"

// Allocations is what OnNomad needs of the Nomad provider.
type Allocations interface {
	provider.Provider
	// NodeOf returns the node of the allocation behind member name.
	NodeOf(name string) (string, bool)
	// SelfNode is this member's node.
	SelfNode() (string, bool)
	// Leaving reports whether this member's allocation is being stopped.
	Leaving(ctx context.Context) (bool, error)
}

// NodeResolver maps a Nomad node to its EC2 instance id.
type NodeResolver interface {
	InstanceOfNode(ctx context.Context, nodeID string) (string, error)
}

// OnNomad is the provider for members that are Nomad allocations on
// clients in an auto-scaling group: allocations are the member slots, and
// each allocation's node is mapped to its EC2 instance so that the group's
// lifecycle reaches the member: an allocation on a terminating instance is
// leaving (it removes its member, then completes the lifecycle hook), and a
// member that stays unhealthy can have its instance replaced.
type OnNomad struct {
	Allocs Allocations
	Group  *Provider
	Nodes  NodeResolver
}

var _ provider.Provider = (*OnNomad)(nil)

// Instances are the allocations whose instance is not terminating.
func (p *OnNomad) Instances(ctx context.Context) ([]provider.Instance, error) {
	insts, err := p.Allocs.Instances(ctx)
	if err != nil {
		return nil, err
	}
	st, err := p.Group.State(ctx)
	if err != nil {
		return nil, err
	}
	lifecycle := map[string]string{}
	for _, in := range st.Instances {
		lifecycle[in.ID] = in.Lifecycle
	}
	out := insts[:0]
	for _, in := range insts {
		if node, ok := p.Allocs.NodeOf(in.Name); ok {
			if id, err := p.Nodes.InstanceOfNode(ctx, node); err == nil && Terminating(lifecycle[id]) {
				continue
			}
		}
		out = append(out, in)
	}
	return out, nil
}

// DesiredSize is the task group's count.
func (p *OnNomad) DesiredSize(ctx context.Context) (int, error) { return p.Allocs.DesiredSize(ctx) }

func (p *OnNomad) selfInstance(ctx context.Context) (string, error) {
	node, ok := p.Allocs.SelfNode()
	if !ok {
		return "", fmt.Errorf("this allocation's node is not known yet")
	}
	return p.Nodes.InstanceOfNode(ctx, node)
}

// Leaving reports whether this allocation is being stopped or its instance
// is being terminated.
func (p *OnNomad) Leaving(ctx context.Context) (bool, error) {
	if leaving, err := p.Allocs.Leaving(ctx); err != nil || leaving {
		return leaving, err
	}
	id, err := p.selfInstance(ctx)
	if err != nil {
		return false, err
	}
	st, err := p.Group.State(ctx)
	if err != nil {
		return false, err
	}
	for _, in := range st.Instances {
		if in.ID == id {
			return Terminating(in.Lifecycle), nil
		}
	}
	return false, nil
}

// Depart completes the lifecycle hook of this allocation's instance.
func (p *OnNomad) Depart(ctx context.Context) error {
	id, err := p.selfInstance(ctx)
	if err != nil {
		return err
	}
	return p.Group.DepartInstance(ctx, id)
}

// ReplacementInFlight reports whether the group is replacing an instance.
func (p *OnNomad) ReplacementInFlight(ctx context.Context) (bool, error) {
	return p.Group.ReplacementInFlight(ctx)
}

// Invalidate drops the group's cached reading: the member reads
// ReplacementInFlight afresh before it asks for a replacement.
func (p *OnNomad) Invalidate() { p.Group.Invalidate() }

// MarkUnhealthy asks the group to replace the instance that runs member
// name.
func (p *OnNomad) MarkUnhealthy(ctx context.Context, name string) error {
	node, ok := p.Allocs.NodeOf(name)
	if !ok {
		return fmt.Errorf("no allocation runs member %s", name)
	}
	id, err := p.Nodes.InstanceOfNode(ctx, node)
	if err != nil {
		return err
	}
	return p.Group.MarkUnhealthy(ctx, id)
}

// NomadNodes resolves nodes through the Nomad API, caching answers (a
// node's instance never changes).
type NomadNodes struct {
	Client *nomadapi.Client
	// Attribute, optional, defaults to DefaultNodeAttribute.
	Attribute string

	mu    sync.Mutex
	cache map[string]string
}

// InstanceOfNode reads the node's instance id attribute.
func (n *NomadNodes) InstanceOfNode(ctx context.Context, nodeID string) (string, error) {
	n.mu.Lock()
	if id, ok := n.cache[nodeID]; ok {
		n.mu.Unlock()
		return id, nil
	}
	n.mu.Unlock()
	attr := n.Attribute
	if attr == "" {
		attr = DefaultNodeAttribute
	}
	node, _, err := n.Client.Nodes().Info(nodeID, (&nomadapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("read node %s: %w", nodeID, err)
	}
	id := node.Attributes[attr]
	if id == "" {
		return "", fmt.Errorf("node %s (%s) has no attribute %s: is it an EC2 instance with the env_aws fingerprinter enabled?", node.Name, nodeID, attr)
	}
	n.mu.Lock()
	if n.cache == nil {
		n.cache = map[string]string{}
	}
	n.cache[nodeID] = id
	n.mu.Unlock()
	return id, nil
}
