package planner

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Review rev14b (data), D3 (TestReviewAPlantedHighestEpochDoesNotWrapTheNextEpoch): highest_epoch comes from Consul, whose
// writers are in docs/security.md's threat model. A planted highest_epoch of 2^64-1
// is invisible ('status' does not show it) and every later recovery
// records epoch top()+1, which wraps to 0: below the record it replaces
// (invariant 9), below every member's data. A planted Epoch could do the
// same before, but it showed in 'status'; the field is not bounded or
// checked when read.
func TestAPlantedHighestEpochDoesNotWrapTheNextEpoch(t *testing.T) {
	rec := Record{ClusterID: 0xc2, Token: "tok2", Epoch: 2, Seeder: "m0", HighestEpoch: math.MaxUint64}
	o := Observation{ClusterName: "c", Self: Self{Name: "m1"}, HoldsLock: true, RecoveryGrace: 20 * time.Second, QuorumLostFor: 30 * time.Second,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Running: true, SelfID: 0x11, Record: &rec,
		Local: Local{Cluster: "c", Name: "m1", Token: "tok2", Epoch: 2, MemberID: 0x11, ClusterID: 0xc2, Revision: 450},
		Peers: []PeerStatus{{Name: "m0"}, {Name: "m2"}}}
	d := Plan(o)
	if !d.AwaitsOperator || !strings.Contains(d.Reason, "highest_epoch") {
		t.Errorf("under a planted highest_epoch the planner decides %s (%s), want a wait for an operator naming highest_epoch", d.Kind, d.Reason)
	}
	if d.Record != nil && d.Record.Epoch <= rec.Epoch {
		t.Errorf("recovery under a planted highest_epoch: %s records epoch %d over epoch %d (%s); Check: %v", d.Kind, d.Record.Epoch, rec.Epoch, d.Reason, Check(o, d))
	}
	v := OperatorView{Record: &rec, From: "m1", NewToken: "tokN",
		Answered: []PeerStatus{{Name: "m1", Token: "tok2", Epoch: 2, ClusterID: 0xc2, Revision: 450}, {Name: "m0"}, {Name: "m2"}}}
	if got, err := OperatorRecovery(v); err != nil || got.Epoch != rec.Epoch+1 {
		t.Errorf("operator's recovery under a planted highest_epoch records epoch %d (%v), want %d (above what it sees, not above the planted field)", got.Epoch, err, rec.Epoch+1)
	}
}
