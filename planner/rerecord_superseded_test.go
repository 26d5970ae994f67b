package planner

import (
	"strings"
	"testing"
	"time"
)

// Review rev18f F5: m1-1 and m2-0 run epoch 1 (cluster id 18) with a
// quorum again (a partition healed after epoch 2 was recovered from
// m0-1's data of the same line, snapshotted, and lost with m0-1), and
// Consul lost its state. m1-1 re-recorded epoch 1: the record then makes
// the superseded line the authoritative one, and epoch 2's writes, in the
// store only, are abandoned without anyone choosing it. It keeps serving
// unrecorded instead: within the grace it waits for a member of the newer
// line to re-record it, then it asks an operator (keep this line: delete
// the newer epoch's snapshots; keep the newer one: restore it).
func TestARunningMemberDoesNotReRecordASupersededEpoch(t *testing.T) {
	seed := func() Observation {
		return Observation{ClusterName: "c", Self: Self{Name: "m1-1"}, NewToken: "n", DesiredSize: 3,
			Running: true, SelfID: 0x139, HoldsLock: true,
			MembersKnown: true, MembersClusterID: 0x18, LeaderID: 0x17,
			Members:          []Member{{ID: 0x17, Name: "m2-0", Healthy: true}, {ID: 0x139, Name: "m1-1", Healthy: true}},
			RecoveryGrace:    20 * time.Second,
			RecordMissingFor: 41 * time.Second,
			Local:            Local{Cluster: "c", Name: "m1-1", Token: "tok20", Epoch: 1, ClusterID: 0x18, MemberID: 0x139, Revision: 300},
			Instances:        []Instance{{Name: "m2-0"}, {Name: "m1-1"}, {Name: "m0-2"}},
			Peers: []PeerStatus{{Name: "m2-0", MemberID: 0x17, Token: "tok20", Epoch: 1, ClusterID: 0x18, Revision: 300, Running: true, Healthy: true},
				{Name: "m0-2"}},
			SnapshotEpoch: 2, LineEpoch: 2}
	}
	o := seed()
	d := Plan(o)
	if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "epoch 2") || !strings.Contains(d.Reason, "etcd-nomad ") {
		t.Fatalf("no record, the store holding epoch 2 of this line: %s (operator %v: %s), want a wait for an operator", d.Kind, d.AwaitsOperator, d.Reason)
	}
	bad := (Faults{RerecordSupersededLine: true}).Plan(o)
	if bad.Kind != RecordCluster || Check(o, bad) == nil || !strings.Contains(Check(o, bad).Error(), "invariant 9") {
		t.Fatalf("RerecordSupersededLine: %s, Check %v; want a re-record that Check refuses", bad.Kind, Check(o, bad))
	}
	o.RecordMissingFor = 5 * time.Second
	if d := Plan(o); d.Kind != Wait || d.AwaitsOperator {
		t.Fatalf("within the grace: %s (operator %v: %s), want a plain wait", d.Kind, d.AwaitsOperator, d.Reason)
	}

	// Under an older record Consul restored: epoch 1 recorded, this
	// line runs epoch 2, the store holds epoch 3 of it.
	o = seed()
	o.Local.Epoch, o.Local.Token, o.Peers[0].Epoch, o.Peers[0].Token = 2, "tok30", 2, "tok30"
	o.Record = &Record{ClusterID: 0x18, Token: "tok20", Epoch: 1, Seeder: "m2-0"}
	o.RecordMissingFor, o.LineEpoch, o.SnapshotEpoch = 0, 3, 3
	d = Plan(o)
	if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "epoch 3") {
		t.Fatalf("an older record, the store holding epoch 3 of this line: %s (operator %v: %s), want a wait for an operator", d.Kind, d.AwaitsOperator, d.Reason)
	}
	if bad := (Faults{RerecordSupersededLine: true}).Plan(o); bad.Kind != RecordCluster || Check(o, bad) == nil {
		t.Fatalf("RerecordSupersededLine under an older record: %s, Check %v; want a re-record that Check refuses", bad.Kind, Check(o, bad))
	}

	// As before: no newer epoch of this line in the store, one of
	// another cluster id (a restore's), an epoch the record carries
	// ('recover -keep-running' abandoned it), or the listing down (a
	// running quorum re-records; see rerecordSuperseded).
	for _, tc := range []struct {
		name string
		edit func(*Observation)
	}{
		{"no newer epoch of this line", func(o *Observation) { o.LineEpoch = 1 }},
		{"another cluster id's higher epoch", func(o *Observation) { o.LineEpoch = 0 }},
		{"the listing down", func(o *Observation) { o.LineEpoch, o.SnapshotEpoch, o.ListingUnanswered = 0, 0, "503" }},
	} {
		o := seed()
		tc.edit(&o)
		if d := Plan(o); d.Kind != RecordCluster || d.Record.Epoch != 1 {
			t.Errorf("%s: %s (%s), want epoch 1 re-recorded", tc.name, d.Kind, d.Reason)
		}
	}
	o = seed()
	o.Local.Epoch, o.Local.Token, o.Peers[0].Epoch, o.Peers[0].Token = 2, "tok30", 2, "tok30"
	o.Record = &Record{ClusterID: 0x18, Token: "tok20", Epoch: 1, Seeder: "m2-0", HighestEpoch: 3}
	o.RecordMissingFor, o.LineEpoch = 0, 3
	if d := Plan(o); d.Kind != RecordCluster || d.Record.Epoch != 2 || d.Record.top() != 3 {
		t.Errorf("an epoch the record carries: %s %+v (%s), want epoch 2 re-recorded carrying 3", d.Kind, d.Record, d.Reason)
	}
}

// Sim seed 1531 (review rev18f F5 without two clusters): m2-1 recovered
// epoch 2 from its epoch-1 data (ForceNewCluster keeps cluster id 16 and
// drops every other member) and runs it alone with a quorum; m0-2, an
// epoch-1 learner that recovery dropped, still runs, and its member
// list is epoch 2's (same cluster id), which counts m2-1 as a fellow
// voter. Consul lost its state before epoch 2 was confirmed, so no
// snapshot of it exists (a member saves only under a confirmed record),
// and m0-2 re-recorded epoch 1 (step 1324) over the running epoch 2.
func TestADroppedMemberDoesNotReRecordItsEpoch(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m0-2"}, NewToken: "n", DesiredSize: 3,
		Running: true, SelfID: 0x34c, HoldsLock: true,
		MembersKnown: true, MembersClusterID: 0x16, LeaderID: 0x680,
		Members:          []Member{{ID: 0x680, Name: "m2-1", Healthy: true}},
		RecoveryGrace:    20 * time.Second,
		RecordMissingFor: time.Second,
		Local:            Local{Cluster: "c", Name: "m0-2", Token: "tok19", Epoch: 1, ClusterID: 0x16, MemberID: 0x34c, Revision: 302, Learner: true},
		Instances:        []Instance{{Name: "m0-2"}, {Name: "m1-4"}, {Name: "m2-1"}},
		Peers: []PeerStatus{{Name: "m2-1", MemberID: 0x680, Token: "tok957", Epoch: 2, ClusterID: 0x16, Revision: 345, Running: true, Healthy: true},
			{Name: "m1-4"}}}
	if d := Plan(o); d.Kind != Wait || d.AwaitsOperator || !strings.Contains(d.Reason, "no longer names member 34c") {
		t.Fatalf("dropped by the answering membership: %s (operator %v: %s), want a plain wait for that cluster to re-record", d.Kind, d.AwaitsOperator, d.Reason)
	}
	bad := (Faults{RerecordRemoved: true}).Plan(o)
	if bad.Kind != RecordCluster || Check(o, bad) == nil {
		t.Fatalf("RerecordRemoved: %s, Check %v; want a re-record of epoch 1 that Check refuses", bad.Kind, Check(o, bad))
	}
	// A member the answering list names re-records as before.
	o.Members = append(o.Members, Member{ID: 0x34c, Name: "m0-2", Healthy: true})
	o.Peers[0].Epoch, o.Peers[0].Token = 1, "tok19"
	if d := Plan(o); d.Kind != RecordCluster || d.Record.Epoch != 1 {
		t.Errorf("named by the answering list: %s (%s), want epoch 1 re-recorded", d.Kind, d.Reason)
	}
}
