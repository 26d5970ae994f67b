package nomad

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/provider"
)

func stub(id, group, client, desired string, withPorts bool) *api.AllocationListStub {
	a := &api.AllocationListStub{ID: id, TaskGroup: group, ClientStatus: client, DesiredStatus: desired}
	if withPorts {
		a.AllocatedResources = &api.AllocatedResources{Shared: api.AllocatedSharedResources{Ports: []api.PortMapping{
			{Label: nomadglue.PortClient, Value: 2379, HostIP: "10.0.0.1"},
			{Label: nomadglue.PortPeer, Value: 2380, HostIP: "10.0.0.1"},
			{Label: nomadglue.PortStatus, Value: 2381, HostIP: "10.0.0.1"},
		}}}
	}
	return a
}

func groupJob(group string, count int) *api.Job {
	return &api.Job{TaskGroups: []*api.TaskGroup{{Name: &group, Count: &count}}}
}

// Invariant 10 (an allocation Nomad marks unknown or lost counts as
// possibly alive): allocations whose client is disconnected (unknown) or lost were
// dropped from Instances, so a survivor could think they were gone and
// recover (ForceNewCluster) while they still held a quorum behind a
// partition, and the leader removed a healthy disconnected voter after
// stale_after. Only the client's own report (complete, failed) or the
// allocation's disappearance proves it stopped; everything else is listed,
// Unknown unless it is a pending or running slot with desired status run.
func TestUnknownAndLostAllocationsStayListed(t *testing.T) {
	const (
		gone    = "gone"
		slot    = "slot"
		unknown = "unknown"
	)
	want := map[string]map[string]string{
		api.AllocClientStatusPending:  {"run": slot, "stop": unknown, "evict": unknown},
		api.AllocClientStatusRunning:  {"run": slot, "stop": unknown, "evict": unknown},
		api.AllocClientStatusUnknown:  {"run": unknown, "stop": unknown, "evict": unknown},
		api.AllocClientStatusLost:     {"run": unknown, "stop": unknown, "evict": unknown},
		api.AllocClientStatusComplete: {"run": gone, "stop": gone, "evict": gone},
		api.AllocClientStatusFailed:   {"run": gone, "stop": gone, "evict": gone},
		"some-future-status":          {"run": unknown, "stop": unknown, "evict": unknown},
	}
	for client, byDesired := range want {
		for desired, expect := range byDesired {
			t.Run(client+"/"+desired, func(t *testing.T) {
				p := New(Options{Job: "j", Group: "etcd"})
				p.update([]*api.AllocationListStub{stub("0123456789", "etcd", client, desired, true)})
				p.setJob(groupJob("etcd", 3))
				got := gone
				if len(p.insts) == 1 {
					got = slot
					if p.insts[0].Unknown {
						got = unknown
					}
					if in := p.insts[0]; in.Address != "10.0.0.1" || in.ClientPort != 2379 || in.PeerPort != 2380 || in.StatusPort != 2381 {
						t.Errorf("ports not kept: %+v", in)
					}
				}
				if got != expect {
					t.Errorf("client status %s, desired %s: got %s, want %s (%+v)", client, desired, got, expect, p.insts)
				}
			})
		}
	}
}

// An allocation without allocated resources is still present (it may run),
// but nobody can reach or join it: Unknown, without ports. Allocations of
// other groups are not ours; DesiredSize stays the group's count whatever
// is listed.
func TestAllocationsWithoutPortsAndOtherGroups(t *testing.T) {
	p := New(Options{Job: "j", Group: "etcd"})
	p.update([]*api.AllocationListStub{
		stub("aaaaaaaa-1", "etcd", api.AllocClientStatusRunning, api.AllocDesiredStatusRun, false),
		stub("bbbbbbbb-1", "etcd", api.AllocClientStatusLost, api.AllocDesiredStatusStop, false),
		stub("cccccccc-1", "other", api.AllocClientStatusRunning, api.AllocDesiredStatusRun, true),
		stub("dddddddd-1", "etcd", api.AllocClientStatusRunning, api.AllocDesiredStatusRun, true),
	})
	p.setJob(groupJob("etcd", 3))
	close(p.ready)
	insts, err := p.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]provider.Instance{}
	for _, in := range insts {
		got[in.Name] = in
	}
	want := map[string]provider.Instance{
		"etcd-aaaaaaaa": {Name: "etcd-aaaaaaaa", Unknown: true},
		"etcd-bbbbbbbb": {Name: "etcd-bbbbbbbb", Unknown: true},
		"etcd-dddddddd": {Name: "etcd-dddddddd", Address: "10.0.0.1", ClientPort: 2379, PeerPort: 2380, StatusPort: 2381},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("instances:\n got %+v\nwant %+v", got, want)
	}
	if n, err := p.DesiredSize(context.Background()); err != nil || n != 3 {
		t.Errorf("desired size %d (%v), want the group count 3", n, err)
	}
}
