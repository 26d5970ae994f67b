package planner

import (
	"strings"
	"testing"
)

// An installed restore waits beside a quorum (review rv14-data,
// TestRV14InstalledRestoreDoesNotStartBesideAQuorum, RV14-1), and
// 'recover -keep-running' frees it only if it never started.
// The known gap of invariant 10 it closed: a member-decided recovery from
// a snapshot
// recorded epoch 3 (tok3, unconfirmed) and installed the restored data
// (meta: tok3, epoch 3, no member id, no cluster id), then its next loop
// (or a restart after a crash) finds the old cluster tok2 back with a
// quorum that acknowledged writes up to 600. Starting the installed data
// is a one-member cluster of epoch 3 beside it; once it confirms, the old
// members set their data (and writes past the snapshot) aside.
func TestInstalledRestoreDoesNotStartBesideAQuorum(t *testing.T) {
	rec := &Record{Token: "tok3", Epoch: 3, Seeder: "m0", Source: SnapshotSource("snap-2-500"), LastConfirmedToken: "tok2", LastConfirmedEpoch: 2}
	voter := func(name string) PeerStatus {
		return PeerStatus{Name: name, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Running: true, Healthy: true, Revision: 600}
	}
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, DesiredSize: 3, HoldsLock: true, RecoveryGrace: 1,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: rec,
		Local:        Local{Cluster: "c", Name: "m0", Token: "tok3", Epoch: 3, Revision: 500},
		Peers:        []PeerStatus{voter("m1"), voter("m2")},
		MembersKnown: true, MembersClusterID: 0xc2, Members: []Member{{ID: 1, Name: "m0"}, {ID: 2, Name: "m1", Healthy: true}, {ID: 3, Name: "m2", Healthy: true}}}
	for _, known := range []bool{true, false} {
		o := o
		if !known {
			o.MembersKnown, o.MembersClusterID, o.Members = false, 0, nil
		}
		d := Plan(o)
		t.Logf("members known %v: %s: %s", known, d.Kind, d.Reason)
		if d.Kind == Rejoin {
			t.Errorf("members known %v: the restorer starts its installed epoch-3 data (a new one-member cluster) beside tok2's quorum at revision 600: %s (checker: %v)", known, d.Reason, Check(o, d))
		}
		if d.Kind == Wait && (!d.AwaitsOperator || !strings.Contains(d.Reason, "recover -keep-running")) {
			t.Errorf("members known %v: the wait does not name the operator's way out: %s", known, d.Reason)
		}
		start := Decision{Kind: Rejoin, Name: "m0", Reason: "start the installed restore"}
		if err := Check(o, start); err == nil || !strings.Contains(err.Error(), "invariant 10") {
			t.Errorf("members known %v: the checker lets the installed restore start beside tok2's quorum: %v", known, err)
		}
	}

	// The way out: 'recover -keep-running' records tok2 when the restored
	// copy never started (the start marks it before etcd runs), and
	// refuses when a start of it may have run (ready, then died before
	// its metadata was completed: it may hold acknowledged writes).
	answered := func(unstarted bool) OperatorView {
		return OperatorView{Record: rec, NewToken: "tok4", Answered: []PeerStatus{
			{Name: "m0", Token: "tok3", Epoch: 3, Revision: 500, Unstarted: unstarted}, voter("m1"), voter("m2")}}
	}
	if _, err := OperatorKeepRunning(answered(false)); err == nil {
		t.Error("recover -keep-running records tok2 over a restore whose start may have run")
	}
	kept, err := OperatorKeepRunning(answered(true))
	if err != nil {
		t.Fatalf("recover -keep-running beside a restore that never started: %v", err)
	}
	after := o
	after.Record = &kept
	after.Local.Unstarted = true
	d := Plan(after)
	if d.Kind != SetAside {
		t.Fatalf("under the kept record %+v the never-started restored copy: %s: %s, want set-aside", kept, d.Kind, d.Reason)
	}
	if err := Check(after, d); err != nil {
		t.Fatalf("checker refuses setting the never-started restored copy aside: %v", err)
	}
}

// An installed restore that never started, under an older record that
// no quorum answers for (Consul restored an old seed record: sim seed
// 62), starts to re-record its epoch (epochs only grow); beside a quorum
// it waits, and under the record of the cluster that answers (what
// 'recover -keep-running' writes) it is set aside.
func TestInstalledRestoreUnderAnOlderRecordStartsOnlyWithoutAQuorum(t *testing.T) {
	old := &Record{Token: "tok1", Epoch: 1, Seeder: "m1"}
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, DesiredSize: 3, HoldsLock: true, RecoveryGrace: 1,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: old,
		Local: Local{Cluster: "c", Name: "m0", Token: "tok3", Epoch: 3, Revision: 1000404, Unstarted: true},
		Peers: []PeerStatus{{Name: "m1"}, {Name: "m2"}}}
	if d := Plan(o); d.Kind != Rejoin {
		t.Errorf("no quorum answers: %s: %s, want rejoin (re-record epoch 3 once it runs)", d.Kind, d.Reason)
	}
	beside := o
	beside.Peers = []PeerStatus{{Name: "m1", Token: "tok2", Epoch: 2, ClusterID: 0xc2, Running: true, Healthy: true, Revision: 600}, {Name: "m2"}}
	if d := Plan(beside); d.Kind != Wait {
		t.Errorf("a healthy voter of another line answers: %s: %s, want wait", d.Kind, d.Reason)
	}
	kept := beside
	kept.Record = &Record{ClusterID: 0xc2, Token: "tok2", Epoch: 2, Seeder: "m1"}
	kept.MembersKnown, kept.MembersClusterID, kept.Members = true, 0xc2, []Member{{ID: 2, Name: "m1", Healthy: true}, {ID: 3, Name: "m2", Healthy: true}}
	if d := Plan(kept); d.Kind != SetAside {
		t.Errorf("under the record of the cluster that answers: %s: %s, want set-aside", d.Kind, d.Reason)
	}
}
