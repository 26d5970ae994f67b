package planner

import (
	"strings"
	"testing"
)

// Review rev15-data F1: a ForceNewCluster recovery of epoch 3 from m0's data became
// ready, acknowledged writes (revision 500 -> 700) and died before its
// metadata was completed (ForceNewPending, started: not Unstarted). Consul
// then restored an old backup of its state: the confirmed record of
// epoch 2 (cluster c2). m1 and m2 (epoch 2 data at revision 500) come back.
func rev15ConsulRestoredView(self string) Observation {
	rec := &Record{Token: "tok2", Epoch: 2, ClusterID: 0xc2, Seeder: "m0"}
	m0 := PeerStatus{Name: "m0", MemberID: 1, Token: "tok3", Epoch: 3, Revision: 700, ForceNewPending: true}
	stopped := func(name string, id uint64) PeerStatus {
		return PeerStatus{Name: name, MemberID: id, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Revision: 500}
	}
	o := Observation{ClusterName: "c", Self: Self{Name: self}, DesiredSize: 3, HoldsLock: true, RecoveryGrace: 1,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: rec}
	switch self {
	case "m0":
		o.Local = Local{Cluster: "c", Name: "m0", Token: "tok3", Epoch: 3, MemberID: 1, Revision: 700, ForceNewPending: true}
		o.Peers = []PeerStatus{stopped("m1", 2), stopped("m2", 3)}
	case "m1":
		o.Local = Local{Cluster: "c", Name: "m1", Token: "tok2", Epoch: 2, MemberID: 2, ClusterID: 0xc2, Revision: 500}
		o.Peers = []PeerStatus{m0, stopped("m2", 3)}
	}
	return o
}

// m1 must not start the restored record's epoch 2 while m0 holds epoch 3
// data that ran (it would be re-recorded from m0, invariant 9).
func TestVoterWaitsBesideNewerStartedDataUnderARestoredRecord(t *testing.T) {
	o := rev15ConsulRestoredView("m1")
	d := Plan(o)
	t.Logf("m1: %s: %s", d.Kind, d.Reason)
	if d.Kind == Rejoin {
		t.Errorf("m1 starts the restored epoch 2 beside m0's epoch 3 data that ran: %s: %s", d.Kind, d.Reason)
	}
}

// Once m1 and m2 run c2 with a quorum that lists m0, m0 sets its epoch 3
// data (700 > 500: writes acknowledged while its start ran) aside
// without any operator accepting the loss.
func TestStartedForceNewIsNotSetAsideUnderARestoredRecord(t *testing.T) {
	o := withC2Quorum(rev15ConsulRestoredView("m0"))
	d := Plan(o)
	t.Logf("m0: %s: %s", d.Kind, d.Reason)
	if err := Check(o, d); err != nil {
		t.Logf("checker: %v", err)
	}
	if d.Kind == SetAside {
		t.Errorf("m0 sets aside epoch 3 data whose start ran (revision 700, c2 at 510) under a record Consul restored, with no operator's -accept-data-loss: %s", d.Reason)
	}
}

// Both ways out of the wait above: 'recover -keep-running
// -accept-data-loss' writes the record again carrying epoch 3 (refused,
// naming m0, without the flag), under which m0 sets its data aside; and
// while c2 does not run, 'recover -from m0' recovers from m0's data.
func TestStartedForceNewUnderARestoredRecordHasBothWaysOut(t *testing.T) {
	o := withC2Quorum(rev15ConsulRestoredView("m0"))
	if d := Plan(o); d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "-accept-data-loss") || !strings.Contains(d.Reason, "recover -from m0") {
		t.Fatalf("m0: %s: %s, want a wait naming both ways out", d.Kind, d.Reason)
	}
	m0 := PeerStatus{Name: "m0", MemberID: 1, Token: "tok3", Epoch: 3, Revision: 700, ForceNewPending: true}
	v := OperatorView{Record: o.Record, NewToken: "tok4", Answered: []PeerStatus{m0, c2Voter("m1", 2), c2Voter("m2", 3)}}
	if _, err := OperatorKeepRunning(v); err == nil || !strings.Contains(err.Error(), "m0") {
		t.Fatalf("keep-running without -accept-data-loss: %v, want a refusal naming m0", err)
	}
	v.AcceptLoss = true
	kept, err := OperatorKeepRunning(v)
	if err != nil {
		t.Fatalf("keep-running -accept-data-loss: %v", err)
	}
	if kept.Token != "tok2" || kept.ClusterID != 0xc2 || kept.HighestEpoch != 3 {
		t.Fatalf("kept record %+v, want tok2 c2 carrying epoch 3", kept)
	}
	after := o
	after.Record = &kept
	if d := Plan(after); d.Kind != SetAside {
		t.Fatalf("under the kept record m0: %s: %s, want set-aside", d.Kind, d.Reason)
	} else if err := Check(after, d); err != nil {
		t.Fatalf("checker refuses the accepted set-aside: %v", err)
	}

	// c2 does not run (m1, m2 wait beside m0's newer data): recover -from m0.
	stopped := func(name string, id uint64) PeerStatus {
		return PeerStatus{Name: name, MemberID: id, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Revision: 500}
	}
	// m0's data forked from c2's line at a revision it does not record:
	// c2's data may hold writes it lacks, so the command asks (review
	// rev15b A2).
	from := OperatorView{Record: o.Record, NewToken: "tok4", From: "m0", Answered: []PeerStatus{m0, stopped("m1", 2), stopped("m2", 3)}}
	if _, err := OperatorRecovery(from); err == nil || !strings.Contains(err.Error(), "-accept-data-loss") {
		t.Fatalf("recover -from m0 without -accept-data-loss beside c2's line: %v, want a refusal naming the flag", err)
	}
	from.AcceptLoss = true
	rec, err := OperatorRecovery(from)
	if err != nil {
		t.Fatalf("recover -from m0: %v", err)
	}
	if rec.Epoch <= 3 || rec.Seeder != "m0" {
		t.Fatalf("recover -from m0 recorded %+v, want m0 seeding an epoch above 3", rec)
	}
}

// c2Voter is m1 or m2 running the restored record's c2 as a healthy
// voter at revision 510 (writes after m0's epoch 3 forked at 500).
func c2Voter(name string, id uint64) PeerStatus {
	return PeerStatus{Name: name, MemberID: id, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Running: true, Healthy: true, Revision: 510}
}

// withC2Quorum is o once m1 and m2 run c2 with a quorum whose member list
// still names m0.
func withC2Quorum(o Observation) Observation {
	o.Peers = []PeerStatus{c2Voter("m1", 2), c2Voter("m2", 3)}
	o.MembersKnown, o.MembersClusterID = true, 0xc2
	o.Members = []Member{{ID: 1, Name: "m0"}, {ID: 2, Name: "m1", Healthy: true}, {ID: 3, Name: "m2", Healthy: true}}
	return o
}
