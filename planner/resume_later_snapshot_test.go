package planner

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// resumeBelowSnapshotView is m1's view of a recovery of epoch 2 from its
// epoch 1 data at revision 500, recorded and never started, while the
// store's newest snapshot is snap.
func resumeBelowSnapshotView(rec *Record, snap *SnapshotInfo) Observation {
	return Observation{
		ClusterName: "kit", Self: Self{Name: "m1", PeerURL: "https://m1:2380"}, HoldsLock: true, NewToken: "n", RecoveryGrace: time.Second,
		Local:          Local{Cluster: "kit", Name: "m1", MemberID: 0x20, ClusterID: 0x17, Token: "tok19", Epoch: 1, Revision: 500},
		Record:         rec,
		Instances:      []Instance{{Name: "m0b"}, {Name: "m1"}, {Name: "m2b"}},
		Peers:          []PeerStatus{{Name: "m0b"}, {Name: "m2b"}},
		LatestSnapshot: snap,
		SnapshotEpoch:  snap.Epoch,
	}
}

// An operator's 'recover -from m1' (epoch 2, bounded by what it accepted)
// crashed before its start; epoch 3 then ran (restored from an older
// snapshot at 300, acknowledged to 400, snapshotted, its members
// collected) and Consul restored the operator's record. Resuming from
// epoch 1 data at 500 would set epoch 3's writes aside: the store's
// snapshot of a later epoch was taken after the record (review rev15d F1,
// red before: the later-epoch rule held only for a member's own record).
func TestOperatorRecoveryDoesNotResumeBelowALaterEpochsSnapshot(t *testing.T) {
	rec := &Record{Token: "tok100", Epoch: 2, Seeder: "m1", Source: FromData, LastConfirmedToken: "tok19", LastConfirmedEpoch: 1,
		Operator: true, Accepted: []AcceptedLine{{Token: "tok19", Epoch: 1, Revision: 500}, {Epoch: 1, Revision: 500}}, AcceptedRevision: 500}
	o := resumeBelowSnapshotView(rec, &SnapshotInfo{Name: "snap-e3", Epoch: 3, Revision: 400})
	d := Plan(o)
	if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "snap-e3") {
		t.Errorf("the operator's recovery of epoch 2 resumed from epoch 1 data at 500 while the store holds epoch 3 (ran after the record) at 400: %s: %s", d.Kind, d.Reason)
	}
	if err := Check(o, Decision{Kind: RecoverQuorum, Name: "m1", From: FromData, Record: rec}); err == nil {
		t.Error("the checker lets the resume below a later epoch's snapshot through")
	}
}

// Consul lost m1's unconfirmed record of epoch 2 before m1 rewrote its
// metadata; m0b recovered epoch 2 from its own epoch 1 data at 300, took
// writes to 450 and was snapshotted; Consul then restored m1's record.
// The snapshot of epoch 2 is another line's: 450 < 500 says nothing, and
// resuming would lose epoch 2's writes 301..450 (review rev15d F2, red
// before: a snapshot of the record's own epoch was compared by revision).
func TestOwnRecoveryDoesNotResumeBelowASameEpochSnapshotOfAnotherLine(t *testing.T) {
	rec := &Record{Token: "tok100", Epoch: 2, Seeder: "m1", Source: FromData, LastConfirmedToken: "tok19", LastConfirmedEpoch: 1}
	o := resumeBelowSnapshotView(rec, &SnapshotInfo{Name: "snap-e2", Epoch: 2, Revision: 450})
	d := Plan(o)
	if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "snap-e2") {
		t.Errorf("resumed epoch 2 (tok100) from epoch 1 data at 500 while the store holds an epoch 2 snapshot at 450 of another line: %s: %s", d.Kind, d.Reason)
	}
	if err := Check(o, Decision{Kind: RecoverQuorum, Name: "m1", From: FromData, Record: rec}); err == nil {
		t.Error("the checker lets the resume below a same-epoch snapshot of another line through")
	}
	// A snapshot of an epoch below the record's, below this data's
	// revision, is what the recovery chose over: it goes ahead.
	o = resumeBelowSnapshotView(rec, &SnapshotInfo{Name: "snap-e1", Epoch: 1, Revision: 450})
	if d := Plan(o); d.Kind != RecoverQuorum {
		t.Errorf("beside an older snapshot below this data: %s: %s", d.Kind, d.Reason)
	}
}

// The restored record's cluster c2 ran on with a quorum (m1 and m2, to
// 510) beside m0's epoch 3 data whose ForceNewCluster start began and
// never completed; then both voters restart at once. Each waits beside
// m0's data (TestVoterWaitsBesideNewerStartedDataUnderARestoredRecord).
// The operator can go either way: recover from m0's line, or keep c2's
// line from m1 with -accept-data-loss, which sets m0's data aside (review
// rev15d F3, red before: 'recover -from m1' refused, naming a step no
// command does).
func TestOperatorKeepsTheRestoredRecordsLineOverNewerStartedData(t *testing.T) {
	o := rev15ConsulRestoredView("m1")
	o.Local.Revision = 510
	m0 := PeerStatus{Name: "m0", MemberID: 1, Token: "tok3", Epoch: 3, Revision: 700, ForceNewPending: true}
	s1 := PeerStatus{Name: "m1", MemberID: 2, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Revision: 510}
	s2 := PeerStatus{Name: "m2", MemberID: 3, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Revision: 510}
	o.Peers = []PeerStatus{m0, s2}
	if d := Plan(o); d.Kind == Rejoin {
		t.Fatalf("m1 rejoined beside m0's newer started data: %s", d.Reason)
	}
	v := OperatorView{Record: o.Record, NewToken: "tok4", Answered: []PeerStatus{m0, s1, s2}}

	// Recover from m0's line.
	vm0 := v
	vm0.From, vm0.AcceptLoss = "m0", true
	rec0, err := OperatorRecovery(vm0)
	if err != nil {
		t.Fatalf("recover -from m0 -accept-data-loss: %v", err)
	}
	o0 := rev15ConsulRestoredView("m0")
	o0.Record = &rec0
	o0.Peers = []PeerStatus{s1, s2}
	if d := Plan(o0); d.Kind != RecoverQuorum {
		t.Errorf("m0 does not resume the operator's recovery from its data: %s: %s", d.Kind, d.Reason)
	}

	// Keep c2's line from m1: without -accept-data-loss the command names
	// m0's data; with it, the record sets it aside.
	vm1 := v
	vm1.From = "m1"
	_, err = OperatorRecovery(vm1)
	var loss *LossError
	if err == nil || !errors.As(err, &loss) || len(loss.Members) != 1 || loss.Members[0] != "m0" {
		t.Fatalf("recover -from m1 without -accept-data-loss: want a loss error naming m0, got %v", err)
	}
	vm1.AcceptLoss = true
	rec1, err := OperatorRecovery(vm1)
	if err != nil {
		t.Fatalf("the operator cannot keep c2's line (acknowledged to 510) from m1's data, even with -accept-data-loss: %v", err)
	}
	if rec1.Epoch <= m0.Epoch {
		t.Fatalf("the recovery from m1 records epoch %d, not above m0's %d", rec1.Epoch, m0.Epoch)
	}
	o1 := o
	o1.Record = &rec1
	o1.Peers = []PeerStatus{m0, s2}
	if d := Plan(o1); d.Kind != RecoverQuorum {
		t.Errorf("m1 does not resume the operator's recovery from its data: %s: %s", d.Kind, d.Reason)
	}
	o0 = rev15ConsulRestoredView("m0")
	o0.Record = &rec1
	o0.Peers = []PeerStatus{s1, s2}
	if d := Plan(o0); d.Kind == Rejoin || d.Kind == RecoverQuorum {
		t.Errorf("m0 starts its epoch 3 data under the operator's recovery from m1: %s: %s", d.Kind, d.Reason)
	}
}

// The same as the member sees it: under an unconfirmed record of epoch 2
// the task's lineage (snapshot.Lineage) does not take a snapshot of epoch
// 3, so LatestSnapshot is nil and the snapshot is only refused and counted
// in SnapshotEpoch; the resume still waits, for an operator's record and
// a member's own (review rev16a A1, red before: the rule read only
// LatestSnapshot).
func TestResumeWaitsBelowALaterEpochsSnapshotOutsideTheLineage(t *testing.T) {
	op := &Record{Token: "tok100", Epoch: 2, Seeder: "m1", Source: FromData, LastConfirmedToken: "tok19", LastConfirmedEpoch: 1,
		Operator: true, Accepted: []AcceptedLine{{Token: "tok19", Epoch: 1, Revision: 500}, {Epoch: 1, Revision: 500}}, AcceptedRevision: 500}
	own := &Record{Token: "tok100", Epoch: 2, Seeder: "m1", Source: FromData, LastConfirmedToken: "tok19", LastConfirmedEpoch: 1}
	for _, rec := range []*Record{op, own} {
		o := resumeBelowSnapshotView(rec, &SnapshotInfo{Name: "snap-e3", Epoch: 3, Revision: 400})
		o.LatestSnapshot = nil
		o.RefusedSnapshot = &RefusedSnapshot{Name: "snap-e3", Epoch: 3, Revision: 400, BaseRevision: 400, Why: "of another incarnation"}
		d := Plan(o)
		if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "epoch 3") {
			t.Errorf("operator %v: resumed epoch 2 from epoch 1 data beside a snapshot of epoch 3 outside the lineage: %s: %s", rec.Operator, d.Kind, d.Reason)
		}
		if err := Check(o, Decision{Kind: RecoverQuorum, Name: "m1", From: FromData, Record: rec}); err == nil {
			t.Errorf("operator %v: the checker lets the resume through", rec.Operator)
		}
	}
}
