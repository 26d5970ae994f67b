package nomad

import (
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/provider"
)

// TestSlotNeedsEveryPort: a running allocation is a slot only with its
// client, peer and status ports and an address; with one of them missing
// (a job rendered without a label) it is listed Unknown with what it has,
// never dropped and never a slot to join. Ports of other labels are
// ignored; the address is the first port's host IP.
func TestSlotNeedsEveryPort(t *testing.T) {
	port := func(label string, v int) api.PortMapping {
		return api.PortMapping{Label: label, Value: v, HostIP: "10.0.0.7"}
	}
	for _, c := range []struct {
		name  string
		ports []api.PortMapping
		want  provider.Instance
	}{
		{"all three", []api.PortMapping{port("metrics", 9100), port(nomadglue.PortClient, 2379), port(nomadglue.PortPeer, 2380), port(nomadglue.PortStatus, 2381)},
			provider.Instance{Name: "etcd-01234567", Address: "10.0.0.7", ClientPort: 2379, PeerPort: 2380, StatusPort: 2381}},
		{"no status port", []api.PortMapping{port(nomadglue.PortClient, 2379), port(nomadglue.PortPeer, 2380)},
			provider.Instance{Name: "etcd-01234567", Address: "10.0.0.7", ClientPort: 2379, PeerPort: 2380, Unknown: true}},
		{"no peer port", []api.PortMapping{port(nomadglue.PortClient, 2379), port(nomadglue.PortStatus, 2381)},
			provider.Instance{Name: "etcd-01234567", Address: "10.0.0.7", ClientPort: 2379, StatusPort: 2381, Unknown: true}},
		{"no client port", []api.PortMapping{port(nomadglue.PortPeer, 2380), port(nomadglue.PortStatus, 2381)},
			provider.Instance{Name: "etcd-01234567", Address: "10.0.0.7", PeerPort: 2380, StatusPort: 2381, Unknown: true}},
		{"no address", []api.PortMapping{{Label: nomadglue.PortClient, Value: 2379}, {Label: nomadglue.PortPeer, Value: 2380}, {Label: nomadglue.PortStatus, Value: 2381}},
			provider.Instance{Name: "etcd-01234567", ClientPort: 2379, PeerPort: 2380, StatusPort: 2381, Unknown: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := stub("01234567-89ab-cdef", "etcd", api.AllocClientStatusRunning, api.AllocDesiredStatusRun, false)
			a.AllocatedResources = &api.AllocatedResources{Shared: api.AllocatedSharedResources{Ports: c.ports}}
			got, ok := instance("etcd", a)
			if !ok || got != c.want {
				t.Errorf("instance = %+v, %v; want %+v", got, ok, c.want)
			}
		})
	}
}

// TestNodesOfListedAllocations: NodeOf finds the node behind a member name
// among every allocation of the job listed, also one proven stopped (no
// slot, but its node is known), and SelfNode that of this member's own
// allocation (the ASG provider maps them to EC2 instances); both say no
// for an allocation no longer listed.
func TestNodesOfListedAllocations(t *testing.T) {
	self := stub("aaaaaaaa-1111", "etcd", api.AllocClientStatusRunning, api.AllocDesiredStatusRun, true)
	self.NodeID = "node-a"
	done := stub("bbbbbbbb-2222", "etcd", api.AllocClientStatusComplete, api.AllocDesiredStatusStop, true)
	done.NodeID = "node-b"
	p := New(Options{Job: "j", Group: "etcd", SelfAlloc: "aaaaaaaa-1111"})
	if _, ok := p.SelfNode(); ok {
		t.Fatal("SelfNode before any list")
	}
	p.update([]*api.AllocationListStub{self, done})
	p.setJob(groupJob("etcd", 3))
	if n, ok := p.SelfNode(); !ok || n != "node-a" {
		t.Errorf("SelfNode = %q, %v; want node-a", n, ok)
	}
	for name, want := range map[string]string{"etcd-aaaaaaaa": "node-a", "etcd-bbbbbbbb": "node-b"} {
		if n, ok := p.NodeOf(name); !ok || n != want {
			t.Errorf("NodeOf(%s) = %q, %v; want %s", name, n, ok, want)
		}
	}
	if n, ok := p.NodeOf("etcd-cccccccc"); ok {
		t.Errorf("NodeOf an unlisted member = %q", n)
	}
	p.update([]*api.AllocationListStub{done})
	p.setJob(groupJob("etcd", 3))
	if n, ok := p.SelfNode(); ok {
		t.Errorf("SelfNode after its allocation left the list = %q", n)
	}
}
