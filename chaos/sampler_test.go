package chaos

import (
	"errors"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// The job review's item 10: the sampler polled the instance list captured
// when it started, so a replacement allocation (a new instance, the one
// most likely to have seeded a second cluster) was never sampled, and
// failed reads were dropped without a trace. Each sample now reads the
// current instances, and failures are counted.
func TestSamplerFollowsTheCurrentInstances(t *testing.T) {
	a := provider.Instance{Name: "etcd-a"}
	b := provider.Instance{Name: "etcd-b"} // a replacement of a
	current := []provider.Instance{a}
	src := sampleSource{
		instances: func() []provider.Instance { return current },
		status: func(in provider.Instance) (status.Member, error) {
			switch in.Name {
			case "etcd-a":
				return status.Member{ClusterID: 1, Epoch: 1}, nil
			case "etcd-b":
				return status.Member{ClusterID: 2, Epoch: 1}, nil
			}
			return status.Member{}, errors.New("connection refused")
		},
		record: func() (coord.Record, error) { return coord.Record{}, errors.New("consul restarting") },
	}
	s := newSampler()
	s.sampleOnce(src)
	current = []provider.Instance{b, {Name: "etcd-c"}}
	s.sampleOnce(src)
	members, _, _, samples := s.result()
	if samples != 2 || members[1] != 1 || members[2] != 1 {
		t.Errorf("members %v in %d samples, want cluster 1 once (a) and cluster 2 once (its replacement b)", members, samples)
	}
	if s.errors != 3 || s.lastErr == nil {
		t.Errorf("%d failed reads (last %v), want 3: the record twice, etcd-c's status once", s.errors, s.lastErr)
	}
}
