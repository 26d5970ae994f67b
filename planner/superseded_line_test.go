package planner

import (
	"strings"
	"testing"
	"time"
)

// Sim seed 16514 of the 100 M run (two live clusters): epoch 2, a recovery
// from m0-1's data (ForceNewCluster keeps cluster id 18), ran alone on
// m0-1, which Nomad had collected while it served, and was snapshotted;
// Consul was then restored to the record of epoch 1. m1-1 and m2-0 hold
// epoch 1's data, which that record names, and rejoined: epoch 1 had its
// quorum again beside epoch 2. The observation is m1-1's at step 868.
func TestDataOfASupersededIncarnationDoesNotRejoin(t *testing.T) {
	seed := func() Observation {
		return Observation{ClusterName: "c", Self: Self{Name: "m1-1"}, NewToken: "n", DesiredSize: 3,
			RecoveryGrace: 20 * time.Second, QuorumLostFor: 41 * time.Second,
			Local:          Local{Cluster: "c", Name: "m1-1", Token: "tok20", Epoch: 1, ClusterID: 0x18, MemberID: 0x139, Revision: 177},
			Instances:      []Instance{{Name: "m2-0"}, {Name: "m1-1"}, {Name: "m0-2"}},
			Peers:          []PeerStatus{{Name: "m2-0", MemberID: 0x17, Token: "tok20", Epoch: 1, ClusterID: 0x18, Revision: 173}, {Name: "m0-2"}},
			Record:         &Record{ClusterID: 0x18, Token: "tok20", Epoch: 1, Seeder: "m2-0"},
			KnownHealthy:   []string{"m0-1"},
			LatestSnapshot: &SnapshotInfo{Name: "snap-359", Epoch: 1, Revision: 127},
			RefusedSnapshot: &RefusedSnapshot{Name: "snap-536", Epoch: 2, Revision: 240, BaseRevision: 200,
				Why: "of another incarnation: cluster id 18, epoch 2 (the record's: 18, 1)"},
			SnapshotEpoch: 2, LineEpoch: 2}
	}
	o := seed()
	if d := Plan(o); d.Kind == Rejoin || d.Kind == RecoverQuorum || !strings.Contains(d.Reason, "m0-1") {
		t.Fatalf("while epoch 2 serves on m0-1: %s (%s), want a wait beside it", d.Kind, d.Reason)
	}
	if err := Check(o, (Faults{RejoinSupersededLine: true}).Plan(o)); err == nil || !strings.Contains(err.Error(), "invariant 9") {
		t.Fatalf("the planner with RejoinSupersededLine: Check says %v, want invariant 9", err)
	}

	// m0-1 stopped (its client reconnected): epoch 2's snapshot reaches
	// further than any data, and only an operator may take it.
	o.KnownHealthy = nil
	if d := Plan(o); d.Kind != Wait || !d.AwaitsOperator {
		t.Fatalf("below epoch 2's snapshot, nothing answering: %s (operator %v: %s), want a wait for an operator", d.Kind, d.AwaitsOperator, d.Reason)
	}

	// The newer line's snapshot reaches no further than this data by
	// revision, but the lines forked and their revisions do not compare
	// (review rev18f F1: the newer line's writes after the fork would be
	// lost): the stopped member asks an operator, holding the lock or
	// not, rather than recover itself (and never waits silently for a
	// recovery no running member is left to make: review rev17a F1).
	o.RefusedSnapshot.Revision, o.RefusedSnapshot.BaseRevision = 177, 177
	for _, lock := range []bool{false, true} {
		o.HoldsLock = lock
		if d := Plan(o); d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "recover -from m1-1 -accept-data-loss") {
			t.Fatalf("the best source by revision, lock %v: %s (operator %v: %s), want a wait for an operator naming both ways", lock, d.Kind, d.AwaitsOperator, d.Reason)
		}
		bad := (Faults{RecoverAcrossLines: true}).Plan(o)
		if lock && (bad.Kind != RecoverQuorum || Check(o, bad) == nil) {
			t.Fatalf("RecoverAcrossLines: %s, Check %v; want a recovery from data that Check refuses", bad.Kind, Check(o, bad))
		}
	}

	// Before the grace it waits; with automatic recovery off, for an
	// operator.
	o.QuorumLostFor = 5 * time.Second
	if d := Plan(o); d.Kind != Wait || d.AwaitsOperator {
		t.Fatalf("before the grace: %s (operator %v: %s), want a plain wait", d.Kind, d.AwaitsOperator, d.Reason)
	}
	o.RecoveryGrace = 0
	if d := Plan(o); d.Kind != Wait || !d.AwaitsOperator {
		t.Fatalf("recovery off: %s (operator %v: %s), want a wait for an operator", d.Kind, d.AwaitsOperator, d.Reason)
	}

	// What does not say this incarnation was superseded holds nothing
	// back (review rev17a): a higher epoch under another cluster id (a
	// restore, or an earlier life of the job put back), an epoch the
	// record carries ('recover -keep-running' recorded this incarnation
	// over it), or this data's cluster answering with a quorum.
	for _, tc := range []struct {
		name string
		edit func(*Observation)
	}{
		{"another cluster id's higher epoch", func(o *Observation) { o.LineEpoch, o.SnapshotEpoch = 0, 5 }},
		{"an epoch the record carries", func(o *Observation) { o.Record.HighestEpoch = 2 }},
		{"this data's cluster answering", func(o *Observation) {
			o.MembersKnown, o.MembersClusterID = true, 0x18
			o.Members = []Member{{ID: 0x17, Name: "m2-0", Healthy: true}, {ID: 0x139, Name: "m1-1"}, {ID: 0x154, Name: "m0-1", Healthy: true}}
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
