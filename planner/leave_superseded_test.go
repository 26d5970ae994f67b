package planner

import (
	"strings"
	"testing"
	"time"
)

// Sim seed 1002359 (two live clusters): m2-0, a voter of epoch 1 whose
// allocation Nomad was stopping, retried its removal without a quorum (its
// fellow voter m0-1, collected while it ran, was cut off by a partition).
// m0-2 restored epoch 2 from the snapshot and confirmed it; m2-0 kept
// etcd running until the partition healed and gave epoch 1 its quorum back
// beside epoch 2. The observation is m2-0's after step 517 (the record of
// epoch 2 written, not confirmed yet; m2-0 without the lock).
func TestALeavingMemberStopsOnceItsEpochIsReplaced(t *testing.T) {
	seed := func() Observation {
		return Observation{ClusterName: "c", Self: Self{Name: "m2-0"}, DesiredSize: 3, Running: true, SelfID: 0x17,
			RecoveryGrace: 20 * time.Second, QuorumLostFor: 21 * time.Second, StaleAfter: 30 * time.Second,
			Local:     Local{Cluster: "c", Name: "m2-0", Token: "tok19", Epoch: 1, ClusterID: 0x18, MemberID: 0x17, Revision: 104},
			Instances: []Instance{{Name: "m1-1"}, {Name: "m2-0"}, {Name: "m2-1"}, {Name: "m0-2"}},
			Peers:     []PeerStatus{{Name: "m1-1"}, {Name: "m2-1"}, {Name: "m0-2"}},
			Record:    &Record{Token: "tok405", Epoch: 2, Seeder: "m0-2", Source: "snapshot:snap-257"},
		}
	}
	o := seed()
	if d := PlanLeave(o); d.Kind != LeaveSuperseded || !strings.Contains(d.Reason, "epoch 2") {
		t.Fatalf("no quorum, epoch 2 recorded: %s (%s), want %s", d.Kind, d.Reason, LeaveSuperseded)
	}
	if d := (Faults{LeaveBesideNewerEpoch: true}).PlanLeave(o); d.Kind != Wait {
		t.Fatalf("with LeaveBesideNewerEpoch: %s (%s), want the old wait for the quorum", d.Kind, d.Reason)
	}

	// Confirmed, and with the lock: the same.
	o.Record.ClusterID, o.HoldsLock = 0x19b, true
	if d := PlanLeave(o); d.Kind != LeaveSuperseded {
		t.Fatalf("epoch 2 confirmed: %s (%s), want %s", d.Kind, d.Reason, LeaveSuperseded)
	}
	// Paused by an operator: it stops all the same (it changes nothing
	// but the moment a member that stops anyway stops).
	o.Paused = "op"
	if d := PlanLeave(o); d.Kind != LeaveSuperseded {
		t.Fatalf("paused: %s (%s), want %s", d.Kind, d.Reason, LeaveSuperseded)
	}
	o.Paused = ""

	// Consul restored the record of epoch 1 since: a peer that runs epoch
	// 2, or the store's snapshot of this data's cluster id at epoch 2 (a
	// recovery from this line), says the same.
	o = seed()
	o.Record = &Record{ClusterID: 0x18, Token: "tok19", Epoch: 1, Seeder: "m2-0"}
	o.Peers[2] = PeerStatus{Name: "m0-2", MemberID: 0x19a, Token: "tok405", Epoch: 2, ClusterID: 0x19b, Running: true, Healthy: true, Revision: 1000114}
	if d := PlanLeave(o); d.Kind != LeaveSuperseded || !strings.Contains(d.Reason, "m0-2") {
		t.Fatalf("older record, a peer runs epoch 2: %s (%s), want %s", d.Kind, d.Reason, LeaveSuperseded)
	}
	o.Peers[2] = PeerStatus{Name: "m0-2"}
	o.LineEpoch = 2
	if d := PlanLeave(o); d.Kind != LeaveSuperseded {
		t.Fatalf("older record, the store holds this line at epoch 2: %s (%s), want %s", d.Kind, d.Reason, LeaveSuperseded)
	}

	// Nothing newer: it waits for the quorum to come back to remove
	// itself (invariant 12), as before.
	o.LineEpoch = 0
	if d := PlanLeave(o); d.Kind != Wait {
		t.Fatalf("nothing newer: %s (%s), want a wait", d.Kind, d.Reason)
	}

	// With a quorum the old incarnation serves: the removal decides, not
	// the newer record. Without metadata there is no epoch to compare.
	o = seed()
	o.MembersKnown, o.MembersClusterID, o.HoldsLock = true, 0x18, true
	o.Members = members(voter(0x17, "m2-0", true), voter(0x105, "m0-1", true), voter(0x30, "m0-0", true))
	if d := PlanLeave(o); d.Kind == LeaveSuperseded {
		t.Fatalf("with a quorum: %s (%s), want the removal's rules", d.Kind, d.Reason)
	}
	o = seed()
	o.Local.Token = ""
	if d := PlanLeave(o); d.Kind != Wait {
		t.Fatalf("no metadata: %s (%s), want a wait", d.Kind, d.Reason)
	}
}
