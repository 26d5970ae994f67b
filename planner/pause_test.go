package planner

import (
	"strings"
	"testing"
)

// While paused, a lost quorum is not recovered automatically, but the
// recovery an operator recorded ('etcd-nomad recover -from m1') is
// carried out by its source — and by no one else.
func TestPauseLetsOnlyTheOperatorsRecoveryThrough(t *testing.T) {
	const pause = "paused by ops since 2026-11-01T00:00:00Z"
	m1 := Local{Cluster: "c", Name: "m1", MemberID: 2, ClusterID: 0xc1, Token: "tokA", Epoch: 1, Revision: 500}
	lost := Observation{ClusterName: "c", Self: Self{Name: "m1"}, Running: true, SelfID: 2, HoldsLock: true, NewToken: "n",
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, RecoveryGrace: 1, QuorumLostFor: 2, Local: m1,
		Record: &Record{ClusterID: 0xc1, Token: "tokA", Epoch: 1, Seeder: "m0"},
		Peers:  []PeerStatus{{Name: "m0", Token: "tokA", Epoch: 1, Revision: 400}, {Name: "m2"}}}
	if d := Plan(lost); d.Kind != RecoverQuorum {
		t.Fatalf("unpaused: %s (%s), want an automatic recovery", d.Kind, d.Reason)
	}
	lost.Paused = pause
	if d := Plan(lost); d.Kind != Wait || !strings.Contains(d.Reason, "paused (") || !strings.Contains(d.Reason, "recover-quorum") {
		t.Fatalf("paused: %s (%s), want a wait naming the held recovery", d.Kind, d.Reason)
	}

	op := &Record{Token: "tokOp", Epoch: 2, Seeder: "m1", Source: FromData, LastConfirmedToken: "tokA", LastConfirmedEpoch: 1, Operator: true}
	source := lost
	source.Record = op
	if d := Plan(source); d.Kind != RecoverQuorum || d.From != FromData || d.Record.Token != "tokOp" {
		t.Fatalf("the operator's source, paused: %s (%s), want it to resume the recorded recovery", d.Kind, d.Reason)
	}
	source.HoldsLock = false
	if d := Plan(source); !d.NeedsLock {
		t.Fatalf("the operator's source without the lock: %s (%s), want it to take the lock", d.Kind, d.Reason)
	}
	// The same record, written by a member (not an operator), waits.
	auto := *op
	auto.Operator = false
	source.HoldsLock, source.Record = true, &auto
	if d := Plan(source); d.Kind != Wait {
		t.Fatalf("a member's recorded recovery, paused: %s (%s), want a wait", d.Kind, d.Reason)
	}
	// Another member never acts on the operator's record while paused.
	other := lost
	other.Self, other.Local, other.SelfID = Self{Name: "m0"}, Local{Cluster: "c", Name: "m0", MemberID: 1, ClusterID: 0xc1, Token: "tokA", Epoch: 1, Revision: 400}, 1
	other.Record = op
	other.Peers = []PeerStatus{{Name: "m1", Token: "tokA", Epoch: 1, Revision: 500}, {Name: "m2"}}
	if d := Plan(other); d.Kind != Wait {
		t.Fatalf("another member under the operator's record, paused: %s (%s), want a wait", d.Kind, d.Reason)
	}
}
