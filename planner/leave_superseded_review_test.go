package planner

import (
	"testing"
	"time"
)

func leavingVoterView() Observation {
	return Observation{ClusterName: "c", Self: Self{Name: "m2-0"}, DesiredSize: 3, Running: true, SelfID: 0x17,
		RecoveryGrace: 20 * time.Second, QuorumLostFor: 21 * time.Second, StaleAfter: 30 * time.Second,
		Local:     Local{Cluster: "c", Name: "m2-0", Token: "tok19", Epoch: 1, ClusterID: 0x18, MemberID: 0x17, Revision: 104},
		Instances: []Instance{{Name: "m1-1"}, {Name: "m2-0"}, {Name: "m2-1"}, {Name: "m0-2"}},
		Peers:     []PeerStatus{{Name: "m1-1"}, {Name: "m2-1"}, {Name: "m0-2"}},
	}
}

// Review rev18e F2: the leaving member is itself the recorded seeder of
// the newer, unconfirmed epoch (a recovery from its own data, whose record
// write succeeded but answered an error): Plan resumes it; PlanLeave took
// its own recovery for a replacement of its incarnation.
func TestALeavingMembersOwnRecoveryDoesNotSupersedeIt(t *testing.T) {
	o := leavingVoterView()
	o.Record = &Record{Token: "tok20", Epoch: 2, Seeder: "m2-0", Source: FromData, LastConfirmedToken: "tok19", LastConfirmedEpoch: 1}
	o.HoldsLock = true
	if l := PlanLeave(o); l.Kind == LeaveSuperseded {
		t.Errorf("its own unconfirmed recovery counted as a newer epoch that replaced this incarnation: %s", l.Reason)
	}
}

// Review rev18e F1: 'recover -keep-running' recorded epoch 1 (this
// member's incarnation, confirmed, highest_epoch 2) over epoch 2, whose
// lone member still runs until it sets its data aside. A leaving voter of
// the kept incarnation that misses its quorum for one observation stopped
// without removing itself (invariant 12); an epoch above the record's
// highest still stops it.
func TestALeavingVoterOfTheKeptIncarnationIgnoresTheAbandonedEpoch(t *testing.T) {
	o := leavingVoterView()
	o.Record = &Record{Token: "tok19", Epoch: 1, ClusterID: 0x18, Seeder: "m1-1", HighestEpoch: 2}
	o.Peers[2] = PeerStatus{Name: "m0-2", MemberID: 0x17, Token: "tok20", Epoch: 2, ClusterID: 0x18, Running: true, Healthy: true, Revision: 90}
	if l := PlanLeave(o); l.Kind == LeaveSuperseded {
		t.Errorf("the kept incarnation's voter stops beside an epoch the record abandoned: %s", l.Reason)
	}
	line := leavingVoterView()
	line.Record = o.Record
	line.LineEpoch = 2
	if l := PlanLeave(line); l.Kind == LeaveSuperseded {
		t.Errorf("a snapshot of the abandoned epoch stops the kept incarnation's voter: %s", l.Reason)
	}
	line.LineEpoch = 3
	if l := PlanLeave(line); l.Kind != LeaveSuperseded {
		t.Errorf("a snapshot of epoch 3, above the record's highest: %s (%s), want leave-superseded", l.Kind, l.Reason)
	}
}
