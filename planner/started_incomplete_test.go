package planner

import (
	"strings"
	"testing"
)

// startedIncompleteView is the seeder m0 of an unconfirmed recovery of
// epoch 3 (rec) whose start began (MarkStarted wrote StartedToken, so the
// data is not Unstarted) and never completed (no cluster id), beside tok2's
// quorum (m1, m2), back meanwhile at revision 600.
func startedIncompleteView(rec *Record, local Local) (Observation, []PeerStatus) {
	voter := func(name string, id uint64) PeerStatus {
		return PeerStatus{Name: name, MemberID: id, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Running: true, Healthy: true, Revision: 600}
	}
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, DesiredSize: 3, HoldsLock: true, RecoveryGrace: 1,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: rec, Local: local,
		Peers:        []PeerStatus{voter("m1", 2), voter("m2", 3)},
		MembersKnown: true, MembersClusterID: 0xc2, Members: []Member{{ID: 1, Name: "m0"}, {ID: 2, Name: "m1", Healthy: true}, {ID: 3, Name: "m2", Healthy: true}}}
	self := PeerStatus{Name: "m0", MemberID: local.MemberID, Token: local.Token, Epoch: local.Epoch, Revision: local.Revision, ForceNewPending: local.ForceNewPending, Unstarted: local.Unstarted}
	return o, []PeerStatus{self, voter("m1", 2), voter("m2", 3)}
}

// wayOut checks that m0's start is fenced beside the quorum, that the
// fence names 'recover -keep-running -accept-data-loss', that the command
// refuses without the flag (naming m0: the data may hold acknowledged
// writes) and records tok2 with it, and that m0 then sets its data aside.
func wayOut(t *testing.T, o Observation, answered []PeerStatus) {
	t.Helper()
	for _, known := range []bool{true, false} {
		o := o
		if !known {
			o.MembersKnown, o.MembersClusterID, o.Members = false, 0, nil
		}
		d := Plan(o)
		t.Logf("members known %v: m0: %s (awaits operator %v): %s", known, d.Kind, d.AwaitsOperator, d.Reason)
		if d.Kind != Wait || !d.AwaitsOperator {
			t.Fatalf("members known %v: m0 does not wait for an operator beside tok2's quorum: %s: %s", known, d.Kind, d.Reason)
		}
		if !strings.Contains(d.Reason, "recover -keep-running -accept-data-loss") {
			t.Errorf("members known %v: the fence does not name 'recover -keep-running -accept-data-loss': %s", known, d.Reason)
		}
		if err := Check(o, d); err != nil {
			t.Error(err)
		}
	}
	v := OperatorView{Record: o.Record, NewToken: "tok4", Answered: answered}
	_, err := OperatorKeepRunning(v)
	t.Logf("recover -keep-running: %v", err)
	if err == nil || !strings.Contains(err.Error(), "-accept-data-loss") || !strings.Contains(err.Error(), "m0") {
		t.Errorf("recover -keep-running without -accept-data-loss: %v, want a refusal naming m0 and -accept-data-loss", err)
	}
	v.AcceptLoss = true
	kept, err := OperatorKeepRunning(v)
	if err != nil {
		t.Fatalf("recover -keep-running -accept-data-loss: %v", err)
	}
	if kept.Token != "tok2" || kept.Epoch != 2 || kept.ClusterID != 0xc2 || kept.top() < o.Local.Epoch {
		t.Fatalf("recover -keep-running -accept-data-loss recorded %+v", kept)
	}
	o.Record = &kept
	d := Plan(o)
	t.Logf("m0 under the kept record: %s: %s", d.Kind, d.Reason)
	if d.Kind != SetAside {
		t.Errorf("m0 does not set its data aside under the record the operator kept: %s: %s", d.Kind, d.Reason)
	}
	if err := Check(o, d); err != nil {
		t.Error(err)
	}
}

// A recovery from data whose ForceNewCluster start began and never
// completed stays fenced beside the source line's quorum, and the operator
// has a way out (review rev14c-data R3, TestRev14cStartedForceNewBesideAQuorum).
func TestStartedForceNewBesideAQuorumStaysFencedWithAWayOut(t *testing.T) {
	rec := &Record{Token: "tok3", Epoch: 3, Seeder: "m0", Source: FromData, LastConfirmedToken: "tok2", LastConfirmedEpoch: 2}
	o, answered := startedIncompleteView(rec, Local{Cluster: "c", Name: "m0", Token: "tok3", Epoch: 3, MemberID: 1, Revision: 500, ForceNewPending: true})
	wayOut(t, o, answered)
}

// An installed restore whose start began and never completed (no member
// id) beside a quorum that came back: the fence names a command that
// frees it (review rev14c-data R1,
// TestRev14cStartedInstalledRestoreBesideAQuorumHasAWayOut).
func TestStartedInstalledRestoreBesideAQuorumHasAWayOut(t *testing.T) {
	rec := &Record{Token: "tok3", Epoch: 3, Seeder: "m0", Source: SnapshotSource("snap-2-500"), LastConfirmedToken: "tok2", LastConfirmedEpoch: 2}
	o, answered := startedIncompleteView(rec, Local{Cluster: "c", Name: "m0", Token: "tok3", Epoch: 3, Revision: 500})
	wayOut(t, o, answered)
}
