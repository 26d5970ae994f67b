package planner

import (
	"strings"
	"testing"
	"time"
)

// Sim seed 16514 one epoch later (review rev18c N1): epoch 2 (cluster id
// 18) ran on m1-1 and m2-0; epoch 3, recovered from m0-1's epoch-2 data
// (ForceNewCluster keeps the cluster id), ran on m0-1, which Nomad had
// collected while it served, and was snapshotted at revision 240; Consul
// restored the record of epoch 1. m1-1's epoch-2 data is above the
// record, and "epochs only grow" started it to re-record epoch 2: a
// quorum of epoch 2 beside epoch 3.
func TestDataAboveAnOlderRecordOfASupersededLineDoesNotRejoin(t *testing.T) {
	seed := func() Observation {
		return Observation{ClusterName: "c", Self: Self{Name: "m1-1"}, NewToken: "n", DesiredSize: 3,
			RecoveryGrace: 20 * time.Second, QuorumLostFor: 41 * time.Second,
			Local:          Local{Cluster: "c", Name: "m1-1", Token: "tok30", Epoch: 2, ClusterID: 0x18, MemberID: 0x139, Revision: 177},
			Instances:      []Instance{{Name: "m2-0"}, {Name: "m1-1"}, {Name: "m0-2"}},
			Peers:          []PeerStatus{{Name: "m2-0", MemberID: 0x17, Token: "tok30", Epoch: 2, ClusterID: 0x18, Revision: 173}, {Name: "m0-2"}},
			Record:         &Record{ClusterID: 0x18, Token: "tok20", Epoch: 1, Seeder: "m2-0"},
			KnownHealthy:   []string{"m0-1"},
			LatestSnapshot: &SnapshotInfo{Name: "snap-359", Epoch: 1, Revision: 127},
			RefusedSnapshot: &RefusedSnapshot{Name: "snap-536", Epoch: 3, Revision: 240, BaseRevision: 200,
				Why: "of another incarnation"},
			SnapshotEpoch: 3, LineEpoch: 3}
	}
	o := seed()
	if d := Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "m0-1") {
		t.Fatalf("while epoch 3 serves on m0-1: %s (%s), want a wait beside it", d.Kind, d.Reason)
	}
	if err := Check(o, (Faults{RejoinSupersededAboveRecord: true}).Plan(o)); err == nil || !strings.Contains(err.Error(), "invariant 9") {
		t.Fatalf("the planner with RejoinSupersededAboveRecord: Check says %v, want invariant 9", err)
	}

	// m0-1 stopped: epoch 3's snapshot reaches further than any data.
	o.KnownHealthy = nil
	if d := Plan(o); d.Kind != Wait || !d.AwaitsOperator {
		t.Fatalf("below epoch 3's snapshot, nothing answering: %s (operator %v: %s), want a wait for an operator", d.Kind, d.AwaitsOperator, d.Reason)
	}
	// Epoch 3's snapshot reaches no further than this data by revision,
	// but the lines forked at 150 and their revisions do not compare
	// (review rev18f F1: a recovery from this data lost epoch 3's writes
	// 151..177): m1-1 asks an operator, holding the lock or not, naming
	// both ways out.
	o.RefusedSnapshot.Revision, o.RefusedSnapshot.BaseRevision = 177, 177
	o.HoldsLock = true
	d := Plan(o)
	if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "recover -from snapshot:NAME -accept-data-loss") {
		t.Fatalf("the best source by revision, holding the lock: %s %+v (%s), want a wait for an operator", d.Kind, d.Record, d.Reason)
	}
	if bad := (Faults{RecoverAcrossLines: true}).Plan(o); bad.Kind != RecoverQuorum || Check(o, bad) == nil {
		t.Fatalf("RecoverAcrossLines: %s, Check %v; want a recovery from data that Check refuses", bad.Kind, Check(o, bad))
	}

	// Nothing of the kind: a higher epoch of another cluster id, an
	// epoch the record carries, this data's cluster answering.
	for _, tc := range []struct {
		name string
		edit func(*Observation)
	}{
		{"another cluster id's higher epoch", func(o *Observation) { o.LineEpoch = 0 }},
		{"an epoch the record carries", func(o *Observation) { o.Record.HighestEpoch = 3 }},
		{"this data's cluster answering", func(o *Observation) {
			o.MembersKnown, o.MembersClusterID = true, 0x18
			o.Members = []Member{{ID: 0x17, Name: "m2-0", Healthy: true}, {ID: 0x139, Name: "m1-1"}}
		}},
	} {
		o := seed()
		o.KnownHealthy = nil
		tc.edit(&o)
		if d := Plan(o); d.Kind != Rejoin {
			t.Errorf("%s: %s (%s), want the rejoin", tc.name, d.Kind, d.Reason)
		}
	}
}

// Sim seed 16514 with Consul losing its state instead of restoring epoch
// 1's record (review rev18c N2): m1-1 holds epoch 1's data (cluster id
// 18), epoch 2 was recovered from m0-1's and snapshotted at revision 240,
// and m0-1 serves it, collected. With no record, the data started to
// re-record epoch 1: a quorum of it beside epoch 2.
func TestDataWithoutRecordOfASupersededLineDoesNotRejoin(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m1-1"}, NewToken: "n", DesiredSize: 3,
		RecoveryGrace: 20 * time.Second, RecordMissingFor: 41 * time.Second,
		Local:          Local{Cluster: "c", Name: "m1-1", Token: "tok20", Epoch: 1, ClusterID: 0x18, MemberID: 0x139, Revision: 177},
		Instances:      []Instance{{Name: "m2-0"}, {Name: "m1-1"}, {Name: "m0-2"}},
		Peers:          []PeerStatus{{Name: "m2-0", MemberID: 0x17, Token: "tok20", Epoch: 1, ClusterID: 0x18, Revision: 173}, {Name: "m0-2"}},
		LatestSnapshot: &SnapshotInfo{Name: "snap-536", Epoch: 2, Revision: 240},
		SnapshotEpoch:  2, LineEpoch: 2,
		KnownHealthy: []string{"m0-1 (leader of cluster 18: its summary in the coordinator was rewritten)"}}
	if d := Plan(o); d.Kind != Wait || d.AwaitsOperator || !strings.Contains(d.Reason, "m0-1") {
		t.Fatalf("while epoch 2 serves on m0-1: %s (operator %v: %s), want a wait for it to re-record", d.Kind, d.AwaitsOperator, d.Reason)
	}
	if err := Check(o, (Faults{RejoinSupersededWithoutRecord: true}).Plan(o)); err == nil || !strings.Contains(err.Error(), "invariant 9") {
		t.Fatalf("the planner with RejoinSupersededWithoutRecord: Check says %v, want invariant 9", err)
	}
	// Nothing of epoch 2 answers: within the grace a plain wait, then an
	// operator chooses (no member of the newer line is left to re-record
	// it; this data holds writes the snapshot may lack).
	o.KnownHealthy = nil
	if d := Plan(o); d.Kind != Wait || !d.AwaitsOperator {
		t.Fatalf("nothing answering after the grace: %s (operator %v: %s), want a wait for an operator", d.Kind, d.AwaitsOperator, d.Reason)
	}
	o.RecordMissingFor = 5 * time.Second
	if d := Plan(o); d.Kind != Wait || d.AwaitsOperator {
		t.Fatalf("within the grace: %s (operator %v: %s), want a plain wait", d.Kind, d.AwaitsOperator, d.Reason)
	}
	// A higher epoch of another cluster id says nothing of this data;
	// nor does its own cluster answering with a list that names it.
	o.LineEpoch = 0
	if d := Plan(o); d.Kind != Rejoin {
		t.Fatalf("another cluster id's higher epoch: %s (%s), want the rejoin", d.Kind, d.Reason)
	}
	o.LineEpoch, o.MembersKnown, o.MembersClusterID = 2, true, 0x18
	o.Members = []Member{{ID: 0x17, Name: "m2-0", Healthy: true}, {ID: 0x139, Name: "m1-1"}}
	if d := Plan(o); d.Kind != Rejoin {
		t.Fatalf("this data's cluster answering: %s (%s), want the rejoin", d.Kind, d.Reason)
	}
}
