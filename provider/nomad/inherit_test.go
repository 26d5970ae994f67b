package nomad

import (
	"testing"

	"github.com/hashicorp/nomad/api"
)

// TestReplacementRunningBeforeSelfStopsInheritsNothing: a replacement
// inherits the leaving member's data only while it has not started (Nomad
// moves the data before the tasks start, once the previous allocation has
// stopped), or once self has stopped before it. One that runs while self
// still runs was placed while self's client was disconnected and started
// without the data (issue 27, h.isolate-long): self, told to stop on its
// return because its allocation is lost, must leave the membership, not
// keep it for a handover that never comes (the replacement then waited
// stale_after, 2 minutes, to join).
func TestReplacementRunningBeforeSelfStopsInheritsNothing(t *testing.T) {
	job := func(migrate bool) *api.Job {
		name := "etcd"
		return &api.Job{TaskGroups: []*api.TaskGroup{{Name: &name, EphemeralDisk: &api.EphemeralDisk{Sticky: ptr(true), Migrate: ptr(migrate)}}}}
	}
	for _, c := range []struct {
		name             string
		self, next       string // ClientStatus
		prev             string
		migrate, inherit bool
	}{
		{"replacement waits for self (drain, scale, update)", "running", "pending", "self", true, true},
		{"replacement started while self was disconnected", "running", "running", "self", true, false},
		{"replacement already gone", "running", "complete", "self", true, false},
		{"self stopped, then the replacement started with its data", "complete", "running", "self", true, true},
		{"self failed, then the replacement started with its data", "failed", "running", "self", true, true},
		{"self lost, the replacement runs", "lost", "running", "self", true, false},
		{"self lost, the replacement copies its files (rev18d F-A)", "lost", "pending", "self", true, false},
		{"self unknown, the replacement copies its files (rev18d F-A)", "unknown", "pending", "self", true, false},
		{"no migrating disk", "running", "pending", "self", false, false},
		{"the replacement of another allocation", "running", "pending", "other", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			self := &api.Allocation{ID: "self", ClientStatus: c.self}
			next := &api.Allocation{ID: "next", PreviousAllocation: c.prev, ClientStatus: c.next, TaskGroup: "etcd", Job: job(c.migrate)}
			if got := inheritsData(self, next); got != c.inherit {
				t.Errorf("inheritsData = %v, want %v", got, c.inherit)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
