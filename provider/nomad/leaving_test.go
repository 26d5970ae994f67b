package nomad_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/provider/nomad"
)

// TestLeavingOnlyWhenTheJobShrinks, on a real Nomad agent: an allocation
// stopped because the group shrank (count 2 → 1) is leaving (its member
// removes itself); one stopped because the whole job stopped ('nomad job
// stop') is not: the cluster stops with its membership whole, and the
// next 'nomad job run' starts every member from its data.
func TestLeavingOnlyWhenTheJobShrinks(t *testing.T) {
	_, cli := startNomad(t)
	const id = "leaving"
	job := sleepJob(id, 2)
	if _, _, err := cli.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	allocs := func() []*api.AllocationListStub {
		as, _, err := cli.Jobs().Allocations(id, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		return as
	}
	waitFor(t, time.Minute, "two running allocations", func() (bool, string) {
		n := 0
		for _, a := range allocs() {
			if a.ClientStatus == api.AllocClientStatusRunning {
				n++
			}
		}
		return n == 2, fmt.Sprint(n)
	})
	leaving := func(alloc string) bool {
		t.Helper()
		p := nomad.New(nomad.Options{Client: cli, Job: id, Group: "etcd", SelfAlloc: alloc})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := p.Leaving(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, a := range allocs() {
		if leaving(a.ID) {
			t.Fatalf("allocation %s leaving while the job runs", a.ID[:8])
		}
	}

	// Shrink: count 1. The allocation Nomad stops is leaving.
	*job.TaskGroups[0].Count = 1
	if _, _, err := cli.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	var gone, kept string
	waitFor(t, time.Minute, "one allocation told to stop", func() (bool, string) {
		gone, kept = "", ""
		for _, a := range allocs() {
			switch a.DesiredStatus {
			case api.AllocDesiredStatusStop:
				gone = a.ID
			case api.AllocDesiredStatusRun:
				kept = a.ID
			}
		}
		return gone != "" && kept != "", fmt.Sprint(gone, kept)
	})
	if !leaving(gone) {
		t.Errorf("allocation %s stopped by a scale-down is not leaving", gone[:8])
	}

	// Stop the job: its last allocation stops too, and is not leaving.
	if _, _, err := cli.Jobs().Deregister(id, false, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the last allocation told to stop", func() (bool, string) {
		a, _, err := cli.Allocations().Info(kept, nil)
		if err != nil {
			return false, err.Error()
		}
		return a.DesiredStatus == api.AllocDesiredStatusStop, a.DesiredStatus
	})
	if leaving(kept) {
		t.Errorf("allocation %s stopped with the whole job is leaving: the member would remove itself", kept[:8])
	}
}

// sleepJob is a service job of count allocations in group "etcd" with the
// provider's three port labels, whose task sleeps.
func sleepJob(id string, count int) *api.Job {
	job := api.NewServiceJob(id, id, "global", 50)
	job.Datacenters = []string{"dc1"}
	tg := api.NewTaskGroup("etcd", count)
	tg.Networks = []*api.NetworkResource{{DynamicPorts: []api.Port{
		{Label: nomadglue.PortClient}, {Label: nomadglue.PortPeer}, {Label: nomadglue.PortStatus},
	}}}
	task := api.NewTask("wait", "raw_exec")
	task.Config = map[string]any{"command": "/bin/sh", "args": []string{"-c", "sleep 600"}}
	task.Resources = &api.Resources{CPU: ptr(20), MemoryMB: ptr(32)}
	tg.AddTask(task)
	job.AddTaskGroup(tg)
	return job
}
