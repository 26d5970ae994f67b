package planner

import (
	"strings"
	"testing"
	"time"
)

func members(ms ...Member) []Member { return ms }

func voter(id uint64, name string, healthy bool) Member {
	return Member{ID: id, Name: name, PeerURLs: []string{"https://" + name + ":2380"}, Healthy: healthy}
}

// The decision table lives in testdata/plan_*.txt (TestScripts).

func TestLeaderNeverChosenWhileAnotherStale(t *testing.T) {
	o := Observation{Self: Self{Name: "m1"}, Running: true, SelfID: 2, LeaderID: 4, Local: Local{Cluster: "c", Name: "m1", Token: "t", Epoch: 1, MemberID: 2},
		Record: &Record{ClusterID: 1, Token: "t", Epoch: 1}, HoldsLock: true, MembersKnown: true, StaleAfter: time.Second,
		Members: members(voter(2, "m1", true), voter(3, "m2", true), voter(5, "m4", true), voter(6, "m5", true),
			Member{ID: 4, Name: "m3", Healthy: true, AbsentFor: time.Minute}, Member{ID: 7, Name: "m6", Healthy: true, AbsentFor: time.Minute})}
	d := unguarded.Plan(o)
	if d.Kind != RemoveMember || d.MemberID != 7 {
		t.Fatalf("want removal of non-leader 7, got %+v", d)
	}
}

func TestPlanLeave(t *testing.T) {
	rec := &Record{ClusterID: 1, Token: "t", Epoch: 1}
	data := Local{Cluster: "c", Name: "m1", Token: "t", Epoch: 1, MemberID: 2}
	base := Observation{ClusterName: "c", Self: Self{Name: "m1"}, Running: true, SelfID: 2, LeaderID: 1, Local: data, Record: rec, HoldsLock: true, MembersKnown: true, DesiredSize: 2}
	o := base
	o.Members = members(voter(1, "m0", true), voter(2, "m1", true), voter(3, "m2", true))
	if d := unguarded.PlanLeave(o); d.Kind != RemoveMember || d.MemberID != 2 {
		t.Fatalf("healthy 3 -> 2: got %+v", d)
	}
	o.Members = members(voter(1, "m0", true), voter(2, "m1", true), voter(3, "m2", false))
	if d := unguarded.PlanLeave(o); d.Kind != Wait || !strings.Contains(d.Reason, "below quorum") {
		t.Fatalf("leaving would leave 1 healthy of 2: got %+v", d)
	}
	o.Members = members(voter(2, "m1", true))
	if d := unguarded.PlanLeave(o); d.Kind != Wait {
		t.Fatalf("last voter must not remove itself: got %+v", d)
	}
	o = base
	o.Members = members(voter(1, "m0", true), voter(2, "m1", true), voter(3, "m2", true))
	for _, d := range []Decision{unguarded.PlanLeave(o)} {
		if err := Check(o, d); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReplaceInstance(t *testing.T) {
	rec := &Record{ClusterID: 1, Token: "t", Epoch: 1}
	sick := voter(3, "m2", false)
	sick.UnhealthyFor = time.Minute
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, Running: true, SelfID: 1, LeaderID: 1, HoldsLock: true, MembersKnown: true,
		Local: Local{Cluster: "c", Name: "m0", Token: "t", Epoch: 1, MemberID: 1}, Record: rec, ReplaceAfter: 30 * time.Second, DesiredSize: 3,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}},
		Members:   members(voter(1, "m0", true), voter(2, "m1", true), sick)}
	d := unguarded.Plan(o)
	if d.Kind != ReplaceInstance || d.Instance != "m2" {
		t.Fatalf("want replacement of m2, got %+v", d)
	}
	o.ReplacementInFlight = true
	if d := unguarded.Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "already in flight") {
		t.Fatalf("second replacement while one is in flight: got %+v", d)
	}
	o.ReplacementInFlight = false
	o.Members[2].UnhealthyFor = 10 * time.Second
	if d := unguarded.Plan(o); d.Kind != Wait {
		t.Fatalf("replaced before ReplaceAfter: got %+v", d)
	}
	o.Members[2].UnhealthyFor = time.Minute
	o.LeaderID = 2
	if d := unguarded.Plan(o); d.Kind != Wait {
		t.Fatalf("a follower replaced an instance: got %+v", d)
	}
}

func TestRecoverQuorum(t *testing.T) {
	rec := &Record{ClusterID: 7, Token: "t", Epoch: 1}
	data := Local{Cluster: "c", Name: "m1", Token: "t", Epoch: 1, MemberID: 2, Revision: 500}
	base := Observation{ClusterName: "c", Self: Self{Name: "m1"}, Running: true, SelfID: 2, Local: data, Record: rec, HoldsLock: true,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, RecoveryGrace: 30 * time.Second, QuorumLostFor: time.Minute, NewToken: "n"}
	d := unguarded.Plan(base)
	if d.Kind != RecoverQuorum || d.From != FromData || d.Record.Epoch != 2 || d.Record.Token != "n" {
		t.Fatalf("lone survivor: got %+v", d)
	}
	o := base
	o.QuorumLostFor = 10 * time.Second
	if d := unguarded.Plan(o); d.Kind != Wait {
		t.Fatalf("before the grace period: got %+v", d)
	}
	o = base
	o.Peers = []PeerStatus{{Name: "m2", Token: "t", Epoch: 1, Revision: 900}}
	if d := unguarded.Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "member m2 recovers") {
		t.Fatalf("a peer holds newer data: got %+v", d)
	}
	o = base
	o.LatestSnapshot = &SnapshotInfo{Name: "s", Revision: 800, Epoch: 1}
	if d := unguarded.Plan(o); d.Kind != RecoverQuorum || d.From != FromSnapshot || d.Snapshot != "s" {
		t.Fatalf("the snapshot is newer than every survivor: got %+v", d)
	}
	o = base
	o.LatestSnapshot = &SnapshotInfo{Name: "s", Revision: 100, Epoch: 1}
	if d := unguarded.Plan(o); d.Kind != RecoverQuorum || d.From != FromData {
		t.Fatalf("survivor data beats an older snapshot: got %+v", d)
	}
	o = base
	o.HoldsLock = false
	if d := unguarded.Plan(o); d.Kind != Wait || !d.NeedsLock {
		t.Fatalf("recovery without the lock: got %+v", d)
	}
	// Every data dir wiped: nothing running, empty, a snapshot exists.
	o = Observation{ClusterName: "c", Self: Self{Name: "m0"}, Local: Local{Empty: true}, Record: rec, HoldsLock: true,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}}, RecoveryGrace: 30 * time.Second, QuorumLostFor: time.Minute, NewToken: "n",
		Peers: []PeerStatus{{Name: "m1"}}, LatestSnapshot: &SnapshotInfo{Name: "s", Revision: 42, Epoch: 1}}
	if d := unguarded.Plan(o); d.Kind != RecoverQuorum || d.From != FromSnapshot {
		t.Fatalf("all wiped: got %+v", d)
	}
	for _, obs := range []Observation{base, o} {
		if err := Check(obs, unguarded.Plan(obs)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNoRecoveryWhileAnInstanceIsSilent(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m1"}, Running: true, SelfID: 2, HoldsLock: true,
		Local: Local{Cluster: "c", Name: "m1", Token: "t", Epoch: 1, MemberID: 2, Revision: 500}, Record: &Record{ClusterID: 7, Token: "t", Epoch: 1},
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, RecoveryGrace: 30 * time.Second, QuorumLostFor: time.Minute, NewToken: "n", Unreachable: 1}
	if d := unguarded.Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "do not answer") {
		t.Fatalf("recovery during a possible partition: got %+v", d)
	}
	o.Unreachable = 0
	o.Peers = []PeerStatus{{Name: "m0", Token: "t", Epoch: 1, Healthy: true}}
	if d := unguarded.Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "healthy") {
		t.Fatalf("recovery while a peer is healthy: got %+v", d)
	}
}

// A recovery recorded by a seeder that never comes back (its instance is
// gone, with its data) is taken over after the grace period from the best
// data of the epoch before, as epoch N+1; never while the seeder is still
// listed, before the grace, or while a peer holds the seeder's new epoch.
func TestTakeOverRecoveryOfAGoneSeeder(t *testing.T) {
	rec := &Record{Token: "t2", Epoch: 2, Seeder: "m0", Source: FromData} // unconfirmed
	old := Local{Cluster: "c", Name: "m1", Token: "t1", Epoch: 1, MemberID: 2, Revision: 500}
	base := Observation{ClusterName: "c", Self: Self{Name: "m1"}, Local: old, Record: rec, HoldsLock: true,
		Instances: []Instance{{Name: "m1"}, {Name: "m3"}}, Peers: []PeerStatus{{Name: "m3"}},
		RecoveryGrace: 30 * time.Second, SeederGoneFor: time.Minute, NewToken: "t3"}
	d := unguarded.Plan(base)
	if d.Kind != RecoverQuorum || d.From != FromData || d.Record.Epoch != 3 || d.Record.Token != "t3" || d.Record.Seeder != "m1" {
		t.Fatalf("seeder gone for good, this member holds epoch 1 data: got %+v", d)
	}
	if err := Check(base, d); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]Observation{
		"seeder still listed": func() Observation {
			o := base
			o.Instances = append([]Instance{{Name: "m0"}}, o.Instances...)
			return o
		}(),
		"before the grace":   func() Observation { o := base; o.SeederGoneFor = 10 * time.Second; return o }(),
		"an instance silent": func() Observation { o := base; o.Unreachable = 1; return o }(),
		"a peer holds the new epoch": func() Observation {
			o := base
			o.Peers = []PeerStatus{{Name: "m3", Token: "t2", Epoch: 2}}
			return o
		}(),
	} {
		if d := unguarded.Plan(o); d.Kind != Wait {
			t.Errorf("%s: got %+v, want a wait", name, d)
		}
	}
	// A peer with newer epoch 1 data takes over instead; an empty member
	// with only a snapshot left recovers from it.
	o := base
	o.Peers = []PeerStatus{{Name: "m3", Token: "t1", Epoch: 1, Revision: 900}}
	if d := unguarded.Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "member m3 recovers") {
		t.Fatalf("a peer holds newer data: got %+v", d)
	}
	o = base
	o.Local = Local{Empty: true}
	o.LatestSnapshot = &SnapshotInfo{Name: "s", Revision: 42, Epoch: 1}
	if d := unguarded.Plan(o); d.Kind != RecoverQuorum || d.From != FromSnapshot || d.Record.Epoch != 3 {
		t.Fatalf("only a snapshot left: got %+v", d)
	}
}

// The liveness findings of the simulation live in testdata/liveness.txt
// (TestScripts).
