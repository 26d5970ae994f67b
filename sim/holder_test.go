package sim

import (
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Sim seed 36353 with SnapshotUnconfirmed (the first save failing, as the
// store may; since the first snapshot follows the seed's confirmation,
// the snapshot's writers name the cluster without it): m1-0 seeded
// cluster 17 (epoch 1) and m0-0 joined it; a partition cut them apart
// (step 21) and Consul lost its state (step 91). Nomad collected m0-0
// (step 104) and m1-0 (step 246) while they ran, a cluster without a
// quorum: neither ever answered as a healthy voter after the record was
// gone, and no summary or snapshot names them. m0-1, an empty
// replacement, saw "peer m1-0 holds data of epoch 1" (step 140); at step
// 300, m1-0 unlisted and reachable, m0-0 behind a partition, it saw "no
// record and no data anywhere" and seeded a second epoch 1 (cluster e2),
// which acknowledged writes; the partition healed (step 348) and cluster
// 17 served again without them. A member now remembers the listed peers
// whose /status named data of a cluster for the recovery grace after the
// provider last listed them and probes them once it no longer does:
// m1-0 answers as a voter without a leader and the seed waits.
// ForgetListedHolder reverts it.
func TestASeedWaitsBesideADataHolderTheProviderDropped(t *testing.T) {
	su := planner.Faults{SnapshotUnconfirmed: true}
	r, w := Run(Config{Seed: 36353, Defects: Defects{ForgetListedHolder: true, Planner: su}})
	if r.Violation == nil || r.Violation.Invariant != InvLostWrites || !strings.Contains(r.Violation.Detail, "epoch 1") {
		t.Fatalf("seed 36353 with ForgetListedHolder: %v, want %q of epoch 1\n%s", r.Violation, InvLostWrites, w.Trace())
	}
	for _, d := range []Defects{{Planner: su}, {}} {
		if r, w := Run(Config{Seed: 36353, Defects: d}); r.Violation != nil || r.Stuck != "" {
			t.Fatalf("seed 36353 (%+v): violation %v, stuck %q\n%s", d, r.Violation, r.Stuck, w.Trace())
		}
	}
}
