package nomad_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/provider/nomad"
	"github.com/etcd-nomad/etcd-nomad/provider/providertest"
)

// On a real Nomad agent: each case gets its own job of two allocations
// with the provider's ports and a sticky, migrating ephemeral disk, so
// that the replacement of a stopped allocation inherits its data.
func TestConformance(t *testing.T) {
	_, cli := startNomad(t)
	var jobs atomic.Int32
	providertest.Run(t, []providertest.Capability{providertest.Leaver, providertest.Inheritor}, func(t *testing.T) providertest.Backend {
		id := fmt.Sprintf("conformance-%d", jobs.Add(1))
		job := sleepJob(id, 2)
		job.TaskGroups[0].EphemeralDisk = &api.EphemeralDisk{Sticky: ptr(true), Migrate: ptr(true), SizeMB: ptr(150)}
		if _, _, err := cli.Jobs().Register(job, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _, _ = cli.Jobs().Deregister(id, true, nil) })
		var running []string
		waitFor(t, time.Minute, "two running allocations", func() (bool, string) {
			as, _, err := cli.Jobs().Allocations(id, false, nil)
			if err != nil {
				return false, err.Error()
			}
			running = running[:0]
			for _, a := range as {
				if a.ClientStatus == api.AllocClientStatusRunning {
					running = append(running, a.ID)
				}
			}
			return len(running) == 2, fmt.Sprint(running)
		})
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		member := func(alloc string) *nomad.Provider {
			p := nomad.New(nomad.Options{Client: cli, Job: id, Group: "etcd", SelfAlloc: alloc})
			go p.Watch(ctx)
			return p
		}
		self, other := running[0], running[1]
		return providertest.Backend{
			Provider: member(self),
			Peer:     member(other),
			Self:     nomadglue.MemberName("etcd", self),
			Other:    nomadglue.MemberName("etcd", other),
			TakeAway: func(t *testing.T) {
				if _, err := cli.Allocations().Stop(&api.Allocation{ID: self}, nil); err != nil {
					t.Fatal(err)
				}
			},
			Inherits: true,
		}
	})
}
