package planner

import (
	"testing"
	"time"
)

// Review of the operator model (session 13, F2): an operator's restore
// accepted one number over every line the command saw, so a member of an
// older line at a higher revision (m0, epoch 2 at 1000, the line an earlier
// operator restore of an older snapshot replaced) raised the ceiling above
// the quorum-lost line's (epoch 3 at 300). That line got its quorum back,
// acknowledged writes up to 400 and lost it again: the restorer set them
// aside although the operator never saw them. Each line's data is now
// compared only with what the command accepted of that line.
func TestOperatorRestoreKeepsLaterWritesOfALineBesideAnOlderLinesHigherRevision(t *testing.T) {
	rec0 := &Record{ClusterID: 0xc3, Token: "tok3", Epoch: 3, Seeder: "m1"}
	v := OperatorView{Record: rec0, From: "m1", NewToken: "tokR", AcceptLoss: true,
		Snapshot: &SnapshotInfo{Name: "s3", Revision: 280, Epoch: 3},
		Answered: []PeerStatus{
			{Name: "m0", Token: "tok2", Epoch: 2, Revision: 1000},
			{Name: "m1", Token: "tok3", Epoch: 3, Revision: 300},
			{Name: "m2", Token: "tok3", Epoch: 3, Revision: 300}}}
	rec, err := OperatorSnapshotRecovery(v)
	if err != nil {
		t.Fatal(err)
	}
	own := Observation{ClusterName: "c", Self: Self{Name: "m1"}, Running: true, SelfID: 0x13f, RecoveryGrace: 20 * time.Second,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: &rec,
		Local: Local{Cluster: "c", Name: "m1", Token: "tok3", Epoch: 3, MemberID: 0x13f, ClusterID: 0xc3, Revision: 400},
		Peers: []PeerStatus{{Name: "m0", Token: "tok2", Epoch: 2, Revision: 1000}, {Name: "m2", Token: "tok3", Epoch: 3, Revision: 400}}}
	if d := Plan(own); d.Kind != Wait || !d.AwaitsOperator {
		t.Fatalf("the restorer holding writes 301..400 of its line, acknowledged after the operator's record (accepted %+v): %s (%s); want a wait for the operator", rec.Accepted, d.Kind, d.Reason)
	}
	if d := (Faults{AcceptAcrossLines: true}).Plan(own); d.Kind != SetAside && d.Kind != RecoverQuorum {
		t.Fatalf("with AcceptAcrossLines: %s (%s); want the set-aside that loses writes 301..400", d.Kind, d.Reason)
	}
	// The same as an empty restorer beside the peer holding 400.
	peer := own
	peer.Running, peer.SelfID, peer.Local, peer.HoldsLock = false, 0, Local{Empty: true}, true
	if d := Plan(peer); d.Kind != Wait || !d.AwaitsOperator {
		t.Fatalf("the empty restorer beside m2 at 400: %s (%s); want a wait for the operator", d.Kind, d.Reason)
	}
	// What the command saw of each line is set aside: m0's 1000 of its
	// own line, the others' 300 of theirs.
	own.Local.Revision, own.Peers[1].Revision = 300, 300
	if d := Plan(own); d.Kind != SetAside {
		t.Fatalf("every line at what the command accepted: %s (%s); want the restorer to set its data aside", d.Kind, d.Reason)
	}
	// A member of older release writes the record back without the
	// per-line list: it keeps only the narrowest bound, never a wider one.
	old := rec
	old.Accepted = nil
	if old.AcceptedRevision != 280 {
		t.Fatalf("the one-number bound for older members: %d, want the narrowest line's 280", old.AcceptedRevision)
	}
	own.Record = &old
	if d := Plan(own); d.Kind != Wait || !d.AwaitsOperator {
		t.Fatalf("the record written back by an older member: %s (%s); want a wait (nothing of line tok3 beyond 280 accepted)", d.Kind, d.Reason)
	}
}
