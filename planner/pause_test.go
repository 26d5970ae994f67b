package planner

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// While paused, a lost quorum is not recovered automatically, but the
// recovery an operator recorded ('etcd-nomad recover -from m1') is
// carried out by its source — and by no one else.
func TestPauseLetsOnlyTheOperatorsRecoveryThrough(t *testing.T) {
	const pause = "paused by ops since 2026-11-01T00:00:00Z"
	m1 := Local{Cluster: "c", Name: "m1", MemberID: 2, ClusterID: 0xc1, Token: "tokA", Epoch: 1, Revision: 500}
	lost := Observation{ClusterName: "c", Self: Self{Name: "m1"}, Running: true, SelfID: 2, HoldsLock: true, NewToken: "n",
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, RecoveryGrace: 1, QuorumLostFor: 2, Local: m1,
		Record: &Record{ClusterID: 0xc1, Token: "tokA", Epoch: 1, Seeder: "m0"},
		Peers:  []PeerStatus{{Name: "m0", Token: "tokA", Epoch: 1, Revision: 400}, {Name: "m2"}}}
	if d := unguarded.Plan(lost); d.Kind != RecoverQuorum {
		t.Fatalf("unpaused: %s (%s), want an automatic recovery", d.Kind, d.Reason)
	}
	lost.Paused = pause
	if d := unguarded.Plan(lost); d.Kind != Wait || !strings.Contains(d.Reason, "paused (") || !strings.Contains(d.Reason, "recover-quorum") {
		t.Fatalf("paused: %s (%s), want a wait naming the held recovery", d.Kind, d.Reason)
	}

	op := &Record{Token: "tokOp", Epoch: 2, Seeder: "m1", Source: FromData, LastConfirmedToken: "tokA", LastConfirmedEpoch: 1, Operator: true}
	source := lost
	source.Record = op
	if d := unguarded.Plan(source); d.Kind != RecoverQuorum || d.From != FromData || d.Record.Token != "tokOp" {
		t.Fatalf("the operator's source, paused: %s (%s), want it to resume the recorded recovery", d.Kind, d.Reason)
	}
	source.HoldsLock = false
	if d := unguarded.Plan(source); !d.NeedsLock {
		t.Fatalf("the operator's source without the lock: %s (%s), want it to take the lock", d.Kind, d.Reason)
	}
	// The same record, written by a member (not an operator), waits.
	auto := *op
	auto.Operator = false
	source.HoldsLock, source.Record = true, &auto
	if d := unguarded.Plan(source); d.Kind != Wait {
		t.Fatalf("a member's recorded recovery, paused: %s (%s), want a wait", d.Kind, d.Reason)
	}
	// Another member never acts on the operator's record while paused.
	other := lost
	other.Self, other.Local, other.SelfID = Self{Name: "m0"}, Local{Cluster: "c", Name: "m0", MemberID: 1, ClusterID: 0xc1, Token: "tokA", Epoch: 1, Revision: 400}, 1
	other.Record = op
	other.Peers = []PeerStatus{{Name: "m1", Token: "tokA", Epoch: 1, Revision: 500}, {Name: "m2"}}
	if d := unguarded.Plan(other); d.Kind != Wait {
		t.Fatalf("another member under the operator's record, paused: %s (%s), want a wait", d.Kind, d.Reason)
	}
}

// An operator's recovery is refused, saying why, whenever the automatic
// path's fencing would refuse it; accepted, it records the next epoch from
// the chosen data, and that record is what the source resumes.
func TestOperatorRecoveryRefusals(t *testing.T) {
	rec := &Record{ClusterID: 0xc1, Token: "tokA", Epoch: 2, Seeder: "m0"}
	a := func(name string, rev int64) PeerStatus {
		return PeerStatus{Name: name, Token: "tokA", Epoch: 2, Running: true, Revision: rev}
	}
	cases := []struct {
		name string
		v    OperatorView
		want string // refusal text; "" accepts
	}{
		{"no record", OperatorView{From: "m1"}, "no cluster record"},
		{"silent instance", OperatorView{Record: rec, From: "m1", Answered: []PeerStatus{a("m1", 9)}, Silent: []string{"m2", "m0"}}, "m0, m2 do not answer"},
		{"quorum answers", OperatorView{Record: rec, From: "m1", Answered: []PeerStatus{a("m1", 9), {Name: "m0", Token: "tokA", Epoch: 2, Running: true, Healthy: true}}}, "member m0 answers as a healthy voter"},
		{"unknown source", OperatorView{Record: rec, From: "m7", Answered: []PeerStatus{a("m1", 9)}}, "m7 is not among"},
		{"empty source", OperatorView{Record: rec, From: "m1", Answered: []PeerStatus{{Name: "m1"}}}, "holds no data"},
		{"learner source", OperatorView{Record: rec, From: "m1", Answered: []PeerStatus{{Name: "m1", Token: "tokA", Epoch: 2, Learner: true}}}, "learner"},
		{"newer epoch elsewhere", OperatorView{Record: rec, From: "m1", Answered: []PeerStatus{a("m1", 9), {Name: "m2", Token: "tokB", Epoch: 3}}}, "m2 holds epoch 3"},
		{"same incarnation newer elsewhere", OperatorView{Record: rec, From: "m1", Answered: []PeerStatus{a("m1", 9), a("m2", 10)}}, "m2 holds the same incarnation at revision 10"},
		// Data the new epoch would set aside silently.
		{"older epoch at a higher revision elsewhere", OperatorView{Record: rec, From: "m1", Answered: []PeerStatus{a("m1", 9), {Name: "m2", Token: "tokO", Epoch: 1, Revision: 50}}},
			"would set aside the data of m2 (token tokO epoch 1, revision 50)"},
		{"another incarnation of the same epoch", OperatorView{Record: rec, From: "m1", Answered: []PeerStatus{a("m1", 9), {Name: "m2", Token: "tokX", Epoch: 2, Revision: 3}}},
			"would set aside the data of m2 (token tokX epoch 2, revision 3)"},
		{"accepted", OperatorView{Record: rec, From: "m1", Answered: []PeerStatus{a("m1", 9), a("m2", 8), {Name: "m0"}}, NewToken: "tokN"}, ""},
		{"older epoch at a lower revision", OperatorView{Record: rec, From: "m1", Answered: []PeerStatus{a("m1", 9), {Name: "m2", Token: "tokO", Epoch: 1, Revision: 5}}, NewToken: "tokN"}, ""},
		{"set aside, accepted", OperatorView{Record: rec, From: "m1", Answered: []PeerStatus{a("m1", 9), {Name: "m2", Token: "tokX", Epoch: 2, Revision: 3}}, NewToken: "tokN", AcceptLoss: true}, ""},
	}
	for _, c := range cases {
		got, err := OperatorRecovery(c.v)
		if c.want != "" {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: got %+v, %v; want a refusal containing %q", c.name, got, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: refused: %v", c.name, err)
		}
		// What the command saw of the source's line is recorded (and of
		// each peer's line): laterWrites compares with it.
		if len(got.Accepted) < 2 || got.Accepted[0] != (AcceptedLine{Token: "tokA", Epoch: 2, Revision: 9}) || got.AcceptedRevision == 0 {
			t.Fatalf("%s: record %+v does not name the source's line as seen", c.name, got)
		}
		got.Accepted, got.AcceptedRevision = nil, 0
		want := Record{Token: "tokN", Epoch: 3, Seeder: "m1", Source: FromData, LastConfirmedToken: "tokA", LastConfirmedEpoch: 2, Operator: true}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: record %+v, want %+v", c.name, got, want)
		}
		// The source resumes it, paused or not.
		o := Observation{ClusterName: "c", Self: Self{Name: "m1"}, Running: true, SelfID: 2, HoldsLock: true, Paused: "paused by ops",
			Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: &got,
			Local: Local{Cluster: "c", Name: "m1", MemberID: 2, ClusterID: 0xc1, Token: "tokA", Epoch: 2, Revision: 9},
			Peers: []PeerStatus{a("m2", 8), {Name: "m0"}}}
		if d := unguarded.Plan(o); d.Kind != RecoverQuorum || d.Record.Token != "tokN" {
			t.Fatalf("the source under the operator's record: %s (%s)", d.Kind, d.Reason)
		}
	}
}

// An operator's recovery from a snapshot: refused where OperatorRecovery
// refuses (no record, silent instances, a quorum, an unknown seeder) and
// over data newer than the snapshot unless the operator accepts the loss;
// the seeder then restores the snapshot the operator chose, paused or not,
// even where the store holds a newer one (the automatic path restores the
// newest).
func TestOperatorSnapshotRecovery(t *testing.T) {
	rec := &Record{ClusterID: 0xc1, Token: "tokA", Epoch: 2, Seeder: "m0"}
	snap := &SnapshotInfo{Name: "s-old", Revision: 50, Epoch: 2}
	a := func(name string, rev int64) PeerStatus {
		return PeerStatus{Name: name, Token: "tokA", Epoch: 2, Running: true, Revision: rev}
	}
	cases := []struct {
		name string
		v    OperatorView
		want string // refusal text; "" accepts
	}{
		{"no snapshot", OperatorView{Record: rec, From: "m1", Answered: []PeerStatus{{Name: "m1"}}}, "no snapshot chosen"},
		{"no record", OperatorView{From: "m1", Snapshot: snap}, "no cluster record"},
		{"silent instance", OperatorView{Record: rec, From: "m1", Snapshot: snap, Answered: []PeerStatus{{Name: "m1"}}, Silent: []string{"m2"}}, "m2 do not answer"},
		{"quorum answers", OperatorView{Record: rec, From: "m1", Snapshot: snap, Answered: []PeerStatus{{Name: "m1"}, {Name: "m0", Token: "tokA", Epoch: 2, Healthy: true}}}, "member m0 answers as a healthy voter"},
		{"unknown seeder", OperatorView{Record: rec, From: "m7", Snapshot: snap, Answered: []PeerStatus{{Name: "m1"}}}, "m7 is not among"},
		{"newer revision", OperatorView{Record: rec, From: "m1", Snapshot: snap, Answered: []PeerStatus{{Name: "m1"}, a("m2", 51)}}, "m2 (epoch 2, revision 51) hold data newer than snapshot s-old"},
		{"newer epoch", OperatorView{Record: rec, From: "m1", Snapshot: snap, Answered: []PeerStatus{{Name: "m1"}, {Name: "m0", Token: "tokB", Epoch: 3, Revision: 5}}}, "m0 (epoch 3, revision 5)"},
		{"older data", OperatorView{Record: rec, From: "m1", Snapshot: snap, Answered: []PeerStatus{a("m1", 40), a("m2", 50), {Name: "m0"}}, NewToken: "tokN"}, ""},
		{"loss accepted", OperatorView{Record: rec, From: "m1", Snapshot: snap, AcceptLoss: true, Answered: []PeerStatus{a("m1", 40), a("m2", 70), {Name: "m0"}}, NewToken: "tokN"}, ""},
	}
	for _, c := range cases {
		got, err := OperatorSnapshotRecovery(c.v)
		if c.want != "" {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: got %+v, %v; want a refusal containing %q", c.name, got, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: refused: %v", c.name, err)
		}
		// Accepted: the highest revision of data the command saw, per
		// line: the snapshot's (by its epoch), and tokA's.
		accepted := snap.Revision
		var tokA int64
		for _, p := range c.v.Answered {
			accepted = max(accepted, p.Revision)
			if p.Token == "tokA" {
				tokA = max(tokA, p.Revision)
			}
		}
		want := Record{Token: "tokN", Epoch: 3, Seeder: "m1", Source: SnapshotSource("s-old"), LastConfirmedToken: "tokA", LastConfirmedEpoch: 2, Operator: true, SourceRevision: 50,
			Accepted: []AcceptedLine{{Epoch: 2, Revision: 50}, {Token: "tokA", Epoch: 2, Revision: tokA}}, AcceptedRevision: min(50, tokA)}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: record %+v, want %+v", c.name, got, want)
		}
		// The seeder restores the chosen snapshot, paused, although the
		// store holds a newer one, as long as the command accepted what
		// it holds; beyond that, its writes came after the record (a
		// cluster the command did not see served on: sim seeds 417, 722,
		// 940 with collectRunning) and the seeder waits for the operator.
		o := Observation{ClusterName: "c", Self: Self{Name: "m1"}, HoldsLock: true, Paused: "paused by ops", RecoveryGrace: time.Minute,
			Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: &got, Local: Local{Empty: true},
			LatestSnapshot: &SnapshotInfo{Name: "s-new", Revision: 60, Epoch: 2},
			Peers:          []PeerStatus{{Name: "m2"}, {Name: "m0"}}}
		d := Plan(o)
		if accepted < o.LatestSnapshot.Revision {
			if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "s-new") {
				t.Fatalf("%s: the seeder under the operator's record (accepted %d) beside s-new (60): %s (%s), want a wait naming s-new", c.name, accepted, d.Kind, d.Reason)
			}
		} else if d.Kind != RecoverQuorum || d.Snapshot != "s-old" || d.Record.Token != "tokN" {
			t.Fatalf("%s: the seeder under the operator's record: %s %s (%s)", c.name, d.Kind, d.Snapshot, d.Reason)
		}
		// Without the operator's mark, the seeder's own restore gives
		// way to the newest snapshot.
		auto := got
		auto.Operator = false
		o.Record, o.Paused = &auto, ""
		if d := Plan(o); d.Kind != RecoverQuorum || d.Snapshot != "s-new" {
			t.Fatalf("%s: an automatic restore record with a newer snapshot stored: %s %s (%s)", c.name, d.Kind, d.Snapshot, d.Reason)
		}
	}
}
