package planner

import (
	"strings"
	"testing"
	"time"
)

// Sim seed 28743 (acknowledged writes lost): an impatient operator
// recorded 'recover -from snapshot:snap-396' (epoch 2, tok589, revision
// 161); m0-1 restored it and confirmed it as cluster 295 (step 859), which
// wrote on to revision 1000263; m2-1 recovered epoch 3 from its data
// (ForceNewCluster keeps cluster id 295, step 1280), which was snapshotted
// (snap-1075, step 1288) and wrote on to 1000271. Consul then restored the
// operator's unconfirmed record (step 1342), and once every copy but the
// store's was gone, m0-1 resumed the restore and installed revision 161
// below both (step 1433). Under an unconfirmed record of epoch 2 the
// lineage (snapshot.Lineage) takes no snapshot of epoch 3: snap-1075 is a
// refused object, not LatestSnapshot, and SnapshotEpoch names its epoch;
// the resume read only LatestSnapshot. The observation is m0-1's at step
// 1433.
func TestAResumedRestoreNeverInstallsBelowASnapshotOfItsEpochOrLater(t *testing.T) {
	rec := func(operator bool) *Record {
		r := &Record{Token: "tok589", Epoch: 2, Seeder: "m0-1", Source: SnapshotSource("snap-396"), LastConfirmedToken: "tok19", LastConfirmedEpoch: 1}
		if operator {
			r.Operator, r.SourceRevision, r.Accepted, r.AcceptedRevision = true, 161, []AcceptedLine{{Epoch: 1, Revision: 161}}, 161
		}
		return r
	}
	view := func(r *Record) Observation {
		return Observation{ClusterName: "c", Self: Self{Name: "m0-1", PeerURL: "http://m0-1:2380"}, DesiredSize: 3, HoldsLock: true, NewToken: "tok1212",
			RecoveryGrace: 20 * time.Second, StaleAfter: 30 * time.Second, Local: Local{Empty: true}, Record: r,
			Instances:       []Instance{{Name: "m0-1", PeerURL: "http://m0-1:2380"}, {Name: "m2-2", PeerURL: "http://m2-2:2380"}, {Name: "m1-3", PeerURL: "http://m1-3:2380"}},
			Peers:           []PeerStatus{{Name: "m2-2"}, {Name: "m1-3"}},
			SnapshotEpoch:   3,
			RefusedSnapshot: &RefusedSnapshot{Name: "snap-1075", Epoch: 3, Revision: 1000271, BaseRevision: 1000264, Why: "of another incarnation: cluster id 295, epoch 3 (the record's: 0, 2)"},
		}
	}
	resume := func(r *Record) Decision {
		rc := *r
		return Decision{Kind: RecoverQuorum, Name: "m0-1", From: FromSnapshot, Snapshot: "snap-396", Record: &rc}
	}
	for _, operator := range []bool{true, false} {
		o := view(rec(operator))
		d := Plan(o)
		t.Logf("operator %v: %s: %s", operator, d.Kind, d.Reason)
		if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "snap-1075") {
			t.Errorf("operator %v: resumed the restore of epoch 2 (revision 161) beside snap-1075 of epoch 3 (revision 1000271): %s: %s", operator, d.Kind, d.Reason)
		}
		if err := Check(o, resume(o.Record)); err == nil {
			t.Errorf("operator %v: the checker lets the resume below a snapshot of epoch 3 through", operator)
		}
	}
	// The switch reverts the operator's: it resumes as in the seed.
	o := view(rec(true))
	if d := (Faults{ResumeRestoreBelowLaterEpoch: true}).Plan(o); d.Kind != RecoverQuorum {
		t.Errorf("with ResumeRestoreBelowLaterEpoch: %s: %s, want the seed's resume", d.Kind, d.Reason)
	}
	// Installed before a crash, never started (step 1437's data): its
	// start is held back the same way.
	for _, operator := range []bool{true, false} {
		o := view(rec(operator))
		o.HoldsLock = false
		o.Local = Local{Cluster: "c", Name: "m0-1", Token: "tok589", Epoch: 2, Revision: 1000161, Unstarted: true}
		d := Plan(o)
		if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "epoch 3") {
			t.Errorf("operator %v: started the installed restore of epoch 2 (revision 1000161) beside a snapshot of epoch 3: %s: %s", operator, d.Kind, d.Reason)
		}
		if err := Check(o, Decision{Kind: Rejoin, Name: "m0-1"}); err == nil {
			t.Errorf("operator %v: the checker lets the installed restore start below a snapshot of epoch 3", operator)
		}
		if d := (Faults{ResumeRestoreBelowLaterEpoch: true}).Plan(o); d.Kind != Rejoin {
			t.Errorf("operator %v, with ResumeRestoreBelowLaterEpoch: %s: %s, want the seed's start", operator, d.Kind, d.Reason)
		}
	}
	// The record's own incarnation ran and only its snapshot of epoch 2
	// is left (snap-671, cluster 295, revision 1000163): the lineage of
	// the unconfirmed record takes it, and the operator's record waits
	// for it as before (ResumeRestoreBesideNewer's rule); so does the
	// new rule, on SnapshotEpoch alone.
	o = view(rec(true))
	o.SnapshotEpoch, o.RefusedSnapshot = 2, nil
	o.LatestSnapshot = &SnapshotInfo{Name: "snap-671", Epoch: 2, Revision: 1000163}
	if d := Plan(o); d.Kind != Wait || !d.AwaitsOperator {
		t.Errorf("beside snap-671 of the record's own epoch: %s: %s", d.Kind, d.Reason)
	}
	if d := (Faults{ResumeRestoreBesideNewer: true}).Plan(o); d.Kind != Wait || !d.AwaitsOperator {
		t.Errorf("beside snap-671, with the older rule off: %s: %s", d.Kind, d.Reason)
	}
	// Nothing of epoch 2 or later in the store (the recorded snapshot
	// is the newest): the restore resumes.
	o = view(rec(true))
	o.SnapshotEpoch, o.RefusedSnapshot = 1, nil
	o.LatestSnapshot = &SnapshotInfo{Name: "snap-396", Epoch: 1, Revision: 161}
	if d := Plan(o); d.Kind != RecoverQuorum {
		t.Errorf("with the recorded snapshot the newest: %s: %s, want the resume", d.Kind, d.Reason)
	}
}
