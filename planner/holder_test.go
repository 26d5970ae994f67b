package planner

import (
	"strings"
	"testing"
	"time"
)

// Sim seed 36353 (the first snapshot save failing): m0-1, empty, no
// record (Consul lost its state), every listed peer empty and answering;
// m1-0, a voter of cluster 17 without a quorum that Nomad collected while
// it runs, which m0-1 had seen listed with its data, answers its probe
// without a leader. Before the member remembered such a data holder,
// nothing named it and m0-1 seeded a second epoch 1 beside it; the
// partition that split cluster 17 healed and it served again. The seed
// waits while it is named; RecoverBesideUnlistedVoter reverts that (and
// Check refuses the seed).
func TestNoSeedBesideADataHolderTheProviderDropped(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m0-1"}, Local: Local{Empty: true}, HoldsLock: true, NewToken: "tok222",
		RecoveryGrace:  20 * time.Second,
		Instances:      []Instance{{Name: "m0-1"}, {Name: "m2-0"}, {Name: "m1-1"}},
		Peers:          []PeerStatus{{Name: "m2-0"}, {Name: "m1-1"}},
		UnlistedVoters: []string{"m1-0 (http://m1-0:2379)"}}
	if d := Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "m1-0") {
		t.Fatalf("beside the data holder m1-0: %s (%s), want a wait naming it", d.Kind, d.Reason)
	}
	bad := (Faults{RecoverBesideUnlistedVoter: true}).Plan(o)
	if bad.Kind != Seed {
		t.Fatalf("with RecoverBesideUnlistedVoter: %s (%s), want the seed of the defect", bad.Kind, bad.Reason)
	}
	if err := Check(o, bad); err == nil || !strings.Contains(err.Error(), "invariant 10") {
		t.Fatalf("the seed beside m1-0: Check says %v, want invariant 10", err)
	}
	o.UnlistedVoters = nil
	if d := Plan(o); d.Kind != Seed {
		t.Fatalf("with nothing named: %s (%s), want the seed", d.Kind, d.Reason)
	}
}
