package planner

import (
	"strings"
	"testing"
	"time"
)

// Sim seed 7867: m1-2 recorded epoch 3 (tok3) as a recovery from its
// epoch 2 data at revision 1000354, rewrote its metadata (ForceNew) and
// went down before its start. Consul then restored an old state: the
// record of epoch 1 (cluster 17), whose members are long gone. Back, m1-2
// kept its data until that cluster answered with a quorum, which it never
// does, while the empty replacements m0-4 and m2-6 waited for m1-2, the
// newer epoch, to re-record: no member ever moved.
func unstartedUnderOlderRecordView() Observation {
	return Observation{ClusterName: "c", Self: Self{Name: "m1-2"}, DesiredSize: 3, RecoveryGrace: 20e9, QuorumLostFor: 300e9,
		Instances: []Instance{{Name: "m0-4"}, {Name: "m1-2"}, {Name: "m2-6"}},
		Record:    &Record{Token: "tok19", Epoch: 1, ClusterID: 0x17, Seeder: "m1-0"},
		Local: Local{Cluster: "c", Name: "m1-2", Token: "tok3", Epoch: 3, MemberID: 0x470, Revision: 1000354,
			ForceNewPending: true, Unstarted: true},
		Peers: []PeerStatus{{Name: "m0-4"}, {Name: "m2-6"}}}
}

// TestUnstartedRecoveryUnderAnOlderRecordNobodyAnswersForAwaitsTheOperator
// protects liveness: the wait that nothing but an operator ends says so
// (AwaitsOperator) and names the command, and that command frees it.
func TestUnstartedRecoveryUnderAnOlderRecordNobodyAnswersForAwaitsTheOperator(t *testing.T) {
	o := unstartedUnderOlderRecordView()
	d := Plan(o)
	if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "recover -from m1-2") {
		t.Fatalf("m1-2 under the restored record of epoch 1 no quorum answers for: %s awaits=%v (%s)", d.Kind, d.AwaitsOperator, d.Reason)
	}
	t.Logf("m1-2: %s", d.Reason)

	// The peers wait for m1-2 (the newer epoch) and never recover beside
	// it on their own.
	peer := o
	peer.Self = Self{Name: "m0-4"}
	peer.Local = Local{Empty: true}
	peer.HoldsLock = true
	peer.Peers = []PeerStatus{{Name: "m1-2", Token: "tok3", Epoch: 3, Revision: 1000354, ForceNewPending: true, Unstarted: true}, {Name: "m2-6"}}
	if d := Plan(peer); d.Kind != Wait {
		t.Fatalf("m0-4 beside m1-2's newer data: %s (%s)", d.Kind, d.Reason)
	}

	// The way out it names: 'recover -from m1-2' records epoch 4 from its
	// data, and m1-2 carries it out.
	rec, err := OperatorRecovery(OperatorView{Record: o.Record, From: "m1-2", NewToken: "tok4",
		Answered: []PeerStatus{{Name: "m0-4"}, peer.Peers[0], {Name: "m2-6"}}})
	if err != nil {
		t.Fatalf("recover -from m1-2: %v", err)
	}
	after := o
	after.Record, after.HoldsLock = &rec, true
	if d := Plan(after); d.Kind != RecoverQuorum {
		t.Fatalf("m1-2 under the operator's record of epoch %d: %s (%s)", rec.Epoch, d.Kind, d.Reason)
	}

	// Not while an instance is silent (the record's cluster may be behind
	// it), nor with PendingWaitsSilently (the behaviour before the fix).
	silent := o
	silent.Unreachable = 1
	if d := Plan(silent); d.Kind != Wait || d.AwaitsOperator {
		t.Errorf("an instance silent: %s awaits=%v (%s)", d.Kind, d.AwaitsOperator, d.Reason)
	}
	if d := (Faults{PendingWaitsSilently: true}).Plan(o); d.Kind != Wait || d.AwaitsOperator {
		t.Errorf("PendingWaitsSilently: %s awaits=%v (%s)", d.Kind, d.AwaitsOperator, d.Reason)
	}

	// Nor before the quorum has been lost for the recovery grace: a
	// member of the record's cluster restarting looks the same for a
	// moment (review rev18b F2), nor with automatic recovery off.
	for _, lost := range []struct{ grace, lost int64 }{{20e9, 0}, {20e9, 19e9}, {0, 300e9}} {
		early := o
		early.RecoveryGrace, early.QuorumLostFor = time.Duration(lost.grace), time.Duration(lost.lost)
		if d := Plan(early); d.Kind != Wait || d.AwaitsOperator {
			t.Errorf("grace %s, quorum lost for %s: %s awaits=%v (%s)", early.RecoveryGrace, early.QuorumLostFor, d.Kind, d.AwaitsOperator, d.Reason)
		}
	}

	// Under an older record Consul restored that was never confirmed
	// (cluster id 0), no quorum counts as lost: its seeder gone for the
	// grace does (review rev18d F-B: the member waited, paging no one).
	unconfirmed := o
	unconfirmed.Record = &Record{Token: "tok19", Epoch: 1, Seeder: "m1-0"}
	unconfirmed.QuorumLostFor = 0
	for _, gone := range []time.Duration{0, 19 * time.Second, 25 * time.Second} {
		unconfirmed.SeederGoneFor = gone
		d := Plan(unconfirmed)
		if want := gone >= unconfirmed.RecoveryGrace; d.Kind != Wait || d.AwaitsOperator != want {
			t.Errorf("unconfirmed older record, seeder gone for %s: %s awaits=%v, want a wait awaiting the operator: %v (%s)", gone, d.Kind, d.AwaitsOperator, want, d.Reason)
		}
	}

	// The record's cluster answers with a quorum that lists m1-2's
	// member: the data, a prefix, goes aside as before.
	back := o
	back.MembersKnown, back.MembersClusterID = true, 0x17
	back.Members = []Member{{ID: 0x470, Name: "m1-2"}, {ID: 2, Name: "m0-4", Healthy: true}, {ID: 3, Name: "m2-6", Healthy: true}}
	if d := Plan(back); d.Kind != SetAside {
		t.Errorf("the record's cluster answers listing m1-2: %s (%s)", d.Kind, d.Reason)
	}
}
