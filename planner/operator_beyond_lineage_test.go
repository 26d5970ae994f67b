package planner

import (
	"errors"
	"testing"
	"time"
)

// Review rev18c N4 (rev17a F2) in sim seed 16514's state: epoch 2, a
// recovery from m0-1's epoch-1 data, ran and was snapshotted at revision
// 240 (snap-536); Consul restored epoch 1's record. 'recover -from m1-1
// -accept-data-loss' sees snap-536 outside the record's lineage (Beyond)
// and records epoch 3; under that record m1-1's lineage takes snap-536 as
// its newest snapshot, and the recovery must not wait for an operator
// again for writes the command showed and the operator accepted.
func TestOperatorAcceptsTheSnapshotBeyondTheLineageItShowed(t *testing.T) {
	peers := []PeerStatus{
		{Name: "m1-1", MemberID: 0x139, Token: "tok20", Epoch: 1, ClusterID: 0x18, Revision: 177},
		{Name: "m2-0", MemberID: 0x17, Token: "tok20", Epoch: 1, ClusterID: 0x18, Revision: 173},
		{Name: "m0-2"}}
	rec := &Record{ClusterID: 0x18, Token: "tok20", Epoch: 1, Seeder: "m2-0"}
	view := OperatorView{Record: rec, From: "m1-1", Answered: peers, NewToken: "op",
		Latest: &SnapshotInfo{Name: "snap-359", Epoch: 1, Revision: 127}, SnapshotEpoch: 2,
		Beyond: &SnapshotInfo{Name: "snap-536", Epoch: 2, Revision: 240}}
	var loss *LossError
	if _, err := OperatorRecovery(view); !errors.As(err, &loss) || len(loss.Snapshots) != 1 || loss.Snapshots[0] != "snap-536" {
		t.Fatalf("without -accept-data-loss: %v, want a loss naming snap-536", err)
	}
	view.AcceptLoss = true
	member := func(f Faults) Decision {
		nr, err := f.OperatorRecovery(view)
		if err != nil {
			t.Fatal(err)
		}
		if nr.Epoch != 3 {
			t.Fatalf("recorded epoch %d, want 3 (above snap-536's epoch 2)", nr.Epoch)
		}
		o := Observation{ClusterName: "c", Self: Self{Name: "m1-1"}, NewToken: "n", DesiredSize: 3, RecoveryGrace: 20 * time.Second, HoldsLock: true,
			Local:          Local{Cluster: "c", Name: "m1-1", Token: "tok20", Epoch: 1, ClusterID: 0x18, MemberID: 0x139, Revision: 177},
			Instances:      []Instance{{Name: "m2-0"}, {Name: "m1-1"}, {Name: "m0-2"}},
			Peers:          peers[1:],
			Record:         &nr,
			LatestSnapshot: &SnapshotInfo{Name: "snap-536", Epoch: 2, Revision: 240}, SnapshotEpoch: 2, LineEpoch: 2}
		d := f.Plan(o)
		if f == (Faults{}) {
			if err := Check(o, d); err != nil {
				t.Fatalf("m1-1's resume: %v", err)
			}
		}
		return d
	}
	if d := member(Faults{}); d.Kind != RecoverQuorum || d.From != FromData {
		t.Fatalf("m1-1 under the operator's record: %s (operator %v: %s), want it to resume the recovery", d.Kind, d.AwaitsOperator, d.Reason)
	}
	if d := member(Faults{OperatorForgetsBeyond: true}); !d.AwaitsOperator {
		t.Fatalf("with OperatorForgetsBeyond: %s (%s), want the old wait for an operator", d.Kind, d.Reason)
	}
	// Writes the line made after the command saw it are not accepted.
	view.Beyond.Revision = 200
	nr, _ := OperatorRecovery(view)
	o := Observation{ClusterName: "c", Self: Self{Name: "m1-1"}, NewToken: "n", DesiredSize: 3, RecoveryGrace: 20 * time.Second, HoldsLock: true,
		Local:     Local{Cluster: "c", Name: "m1-1", Token: "tok20", Epoch: 1, ClusterID: 0x18, MemberID: 0x139, Revision: 177},
		Instances: []Instance{{Name: "m2-0"}, {Name: "m1-1"}, {Name: "m0-2"}}, Peers: peers[1:], Record: &nr,
		LatestSnapshot: &SnapshotInfo{Name: "snap-536", Epoch: 2, Revision: 240}, SnapshotEpoch: 2, LineEpoch: 2}
	if d := Plan(o); !d.AwaitsOperator {
		t.Fatalf("the line wrote on after the command (240 > 200): %s (%s), want a wait for an operator", d.Kind, d.Reason)
	}
}

// Review rev18f F2: a snapshot beyond the lineage under the source's
// cluster id, of a newer epoch (a line forked from the source's by a
// recovery), reaching a lower revision than the source went ahead without
// -accept-data-loss, and its acceptance was recorded unasked: the two
// lines' revisions do not compare. It asks now, and records only what
// was accepted; a put-back snapshot of another cluster id below the
// source still holds nothing back.
func TestOperatorAsksBesideAForkedLinesSnapshotWhateverItsRevision(t *testing.T) {
	peers := []PeerStatus{
		{Name: "m1-1", MemberID: 0x139, Token: "tok20", Epoch: 1, ClusterID: 0x18, Revision: 177},
		{Name: "m2-0", MemberID: 0x17, Token: "tok20", Epoch: 1, ClusterID: 0x18, Revision: 173},
		{Name: "m0-2"}}
	rec := &Record{ClusterID: 0x18, Token: "tok20", Epoch: 1, Seeder: "m2-0"}
	view := OperatorView{Record: rec, From: "m1-1", Answered: peers, NewToken: "op", SnapshotEpoch: 2,
		Beyond: &SnapshotInfo{Name: "snap-536", Epoch: 2, Revision: 170, ClusterID: 0x18}}
	var loss *LossError
	if _, err := OperatorRecovery(view); !errors.As(err, &loss) || len(loss.Snapshots) != 1 || loss.Snapshots[0] != "snap-536" {
		t.Fatalf("beside the forked line's snap-536 at 170 (source at 177), without -accept-data-loss: %v, want a loss naming it", err)
	}
	view.AcceptLoss = true
	nr, err := OperatorRecovery(view)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range nr.Accepted {
		found = found || a.Epoch == 2 && a.Revision == 170
	}
	if !found {
		t.Fatalf("accepted %+v: want snap-536's line (epoch 2, 170) recorded as accepted", nr.Accepted)
	}

	putBack := view
	putBack.AcceptLoss = false
	putBack.Beyond = &SnapshotInfo{Name: "old", Epoch: 7, Revision: 170, ClusterID: 0x1d}
	nr, err = OperatorRecovery(putBack)
	if err != nil {
		t.Fatalf("beside a put-back snapshot of another cluster id below the source: %v", err)
	}
	for _, a := range nr.Accepted {
		if a.Epoch == 7 && a.Revision > 177 {
			t.Fatalf("accepted %+v beyond what the command saw", nr.Accepted)
		}
	}
}
