package asg_test

import (
	"context"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/provider/asg"
)

// allocs is an in-memory Nomad side: allocation-backed member slots on
// nodes (the real Nomad provider is exercised by the e2e tests).
type allocs struct {
	insts   []provider.Instance
	nodes   map[string]string
	self    string
	leaving bool
}

func (a *allocs) Instances(context.Context) ([]provider.Instance, error) {
	return append([]provider.Instance(nil), a.insts...), nil
}
func (a *allocs) DesiredSize(context.Context) (int, error) { return len(a.insts), nil }
func (a *allocs) NodeOf(name string) (string, bool)        { n, ok := a.nodes[name]; return n, ok }
func (a *allocs) SelfNode() (string, bool)                 { return a.NodeOf(a.self) }
func (a *allocs) Leaving(context.Context) (bool, error)    { return a.leaving, nil }

type nodeMap map[string]string

func (m nodeMap) InstanceOfNode(_ context.Context, node string) (string, error) { return m[node], nil }

func TestAllocationsMappedToInstances(t *testing.T) {
	s := fakeGroup(t)
	group := newProvider(t, s, "-")
	al := &allocs{
		insts: []provider.Instance{{Name: "etcd-1"}, {Name: "etcd-2"}, {Name: "etcd-3"}},
		nodes: map[string]string{"etcd-1": "node-a", "etcd-2": "node-b", "etcd-3": "node-c"},
		self:  "etcd-3",
	}
	p := &asg.OnNomad{Allocs: al, Group: group, Nodes: nodeMap{"node-a": "i-a", "node-b": "i-b", "node-c": "i-c"}}
	ctx := context.Background()
	if insts, err := p.Instances(ctx); err != nil || len(insts) != 3 {
		t.Fatalf("instances %v %v", insts, err)
	}
	if leaving, _ := p.Leaving(ctx); leaving {
		t.Fatal("leaving while the instance is InService")
	}

	// The instance under this allocation starts terminating.
	s.SetLifecycle("i-c", "Terminating:Wait")
	insts, err := p.Instances(ctx)
	if err != nil || len(insts) != 2 {
		t.Fatalf("the allocation on a terminating instance is still a slot: %v %v", insts, err)
	}
	if leaving, err := p.Leaving(ctx); err != nil || !leaving {
		t.Fatalf("allocation on a terminating instance not leaving: %v %v", leaving, err)
	}
	if err := p.Depart(ctx); err != nil {
		t.Fatal(err)
	}
	if c := s.Completed(); len(c) != 1 || c[0] != "i-c" {
		t.Fatalf("completed %v, want [i-c]", c)
	}
	if inFlight, _ := p.ReplacementInFlight(ctx); !inFlight {
		t.Fatal("terminating instance is a replacement in flight")
	}

	// A member that cannot recover: its allocation's instance is replaced.
	s.SetLifecycle("i-c", "InService")
	if err := p.MarkUnhealthy(ctx, "etcd-2"); err != nil {
		t.Fatal(err)
	}
	if h := s.Health("i-b"); h != "Unhealthy" {
		t.Fatalf("instance of etcd-2 is %s, want Unhealthy", h)
	}
}
