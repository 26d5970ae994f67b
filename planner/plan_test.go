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

func TestPlanTable(t *testing.T) {
	rec := &Record{ClusterID: 0xc1, Token: "tok", Epoch: 1, Seeder: "m0"}
	self := Self{Name: "m1", PeerURL: "https://m1:2380"}
	three := members(voter(1, "m0", true), voter(2, "m1", true), voter(3, "m2", true))
	data := Local{Cluster: "c", Name: "m1", MemberID: 2, ClusterID: 0xc1, Token: "tok", Epoch: 1}
	insts := []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}
	cases := []struct {
		name   string
		o      Observation
		kind   Kind
		lock   bool
		reason string
	}{
		{"empty, no record, no lock: take lock", Observation{Self: self, Local: Local{Empty: true}}, Wait, true, "seed"},
		{"empty, no record, lock: seed", Observation{Self: self, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n"}, Seed, false, "seeding"},
		{"empty, no record, peer has data: wait (invariant 8)", Observation{Self: self, Local: Local{Empty: true}, HoldsLock: true, Peers: []PeerStatus{{Name: "m0", Token: "tok", Epoch: 1}}}, Wait, false, "re-record"},
		{"empty, unconfirmed record by other: wait", Observation{Self: self, Local: Local{Empty: true}, Record: &Record{Token: "t", Epoch: 1, Seeder: "m0"}}, Wait, false, "seeder m0"},
		{"empty, unconfirmed record by self: resume seed", Observation{Self: self, Local: Local{Empty: true}, HoldsLock: true, Record: &Record{Token: "t", Epoch: 1, Seeder: "m1"}}, Seed, false, "resuming"},
		{"empty, record, unreachable: wait", Observation{Self: self, Local: Local{Empty: true}, Record: rec}, Wait, false, "unreachable"},
		{"empty, record, room, lock: join as learner", Observation{Self: self, DesiredSize: 3, Local: Local{Empty: true}, Record: rec, HoldsLock: true, MembersKnown: true, Members: members(voter(1, "m0", true))}, JoinAsLearner, false, "learner"},
		{"not in the provider: wait", Observation{Self: Self{Name: "m9"}, Local: Local{Empty: true}, HoldsLock: true}, Wait, false, "not among"},
		{"empty, record, full: wait", Observation{Self: Self{Name: "m3"}, Instances: append(insts, Instance{Name: "m3"}), DesiredSize: 3, Local: Local{Empty: true}, Record: rec, HoldsLock: true, MembersKnown: true, Members: three}, Wait, false, "3 of 3"},
		{"empty, learner in flight: wait", Observation{Self: self, DesiredSize: 3, Local: Local{Empty: true}, Record: rec, HoldsLock: true, MembersKnown: true, Members: members(voter(1, "m0", true), Member{ID: 3, Name: "m2", Learner: true})}, Wait, false, "catching up"},
		{"empty, own old identity dead: remove it", Observation{Self: self, DesiredSize: 3, Local: Local{Empty: true}, Record: rec, HoldsLock: true, MembersKnown: true, LeaderID: 1, Members: members(voter(1, "m0", true), voter(2, "m1", false), voter(3, "m2", true))}, RemoveMember, false, "stale"},
		{"empty, own old identity but below quorum: wait", Observation{Self: self, DesiredSize: 3, Local: Local{Empty: true}, Record: rec, HoldsLock: true, MembersKnown: true, Members: members(voter(1, "m0", true), voter(2, "m1", false), voter(3, "m2", false))}, Wait, false, "below quorum"},
		{"empty, added not started: resume join", Observation{Self: self, DesiredSize: 3, Local: Local{Empty: true}, Record: rec, MembersKnown: true, Members: members(voter(1, "m0", true), Member{ID: 9, PeerURLs: []string{"https://m1:2380"}, Learner: true})}, ResumeJoin, false, "already added"},
		{"added learner never starts: remove it", Observation{Self: self, DesiredSize: 3, Local: Local{Empty: true}, Record: rec, HoldsLock: true, MembersKnown: true, StartFailures: MaxStartFailures, Members: members(voter(1, "m0", true), Member{ID: 9, PeerURLs: []string{"https://m1:2380"}, Learner: true})}, RemoveMember, false, "failed"},
		{"data of record: rejoin", Observation{Self: self, Local: data, Record: rec}, Rejoin, false, "local data"},
		{"data, no record: rejoin to re-record", Observation{Self: self, Local: data}, Rejoin, false, "re-record"},
		{"data of another cluster name: set aside", Observation{Self: self, Local: Local{Cluster: "other", Name: "m1", Token: "tok", Epoch: 1}}, SetAside, false, "belongs to cluster \"other\""},
		{"no record, peer runs another incarnation: keep the data (invariant 9)", Observation{Self: self, Local: data, Peers: []PeerStatus{{Name: "m0", Token: "new", Epoch: 1, Running: true}}}, Wait, false, "another incarnation"},
		{"data of other token, same epoch: keep it (invariant 9)", Observation{Self: self, Local: Local{Cluster: "c", Name: "m1", Token: "old", Epoch: 1}, Record: rec}, Wait, false, "an operator must choose"},
		{"data of other token, same epoch, the recorded cluster answers and no peer holds it: set aside", Observation{Self: self, Local: Local{Cluster: "c", Name: "m1", Token: "old", Epoch: 1}, Record: rec, MembersKnown: true, MembersClusterID: 0xc1, Members: members(voter(1, "m0", true))}, SetAside, false, "belongs to"},
		{"data of other token, same epoch, a peer holds it: keep it", Observation{Self: self, Local: Local{Cluster: "c", Name: "m1", Token: "old", Epoch: 1}, Record: rec, MembersKnown: true, MembersClusterID: 0xc1, Members: members(voter(1, "m0", true)), Peers: []PeerStatus{{Name: "m2", Token: "old", Epoch: 1, Running: true}}}, Wait, false, "an operator must choose"},
		{"data of other token, older epoch: set aside", Observation{Self: self, Local: Local{Cluster: "c", Name: "m1", Token: "old", Epoch: 1}, Record: &Record{ClusterID: 5, Token: "tok", Epoch: 2}, Peers: []PeerStatus{{Name: "m0", Token: "tok", Epoch: 2, Running: true, Healthy: true}}}, SetAside, false, "belongs to"},
		{"data newer than the record: rejoin to re-record (invariant 9)", Observation{Self: self, Local: Local{Cluster: "c", Name: "m1", Token: "new", Epoch: 3, MemberID: 2, ClusterID: 0xc1}, Record: rec}, Rejoin, false, "epochs only grow"},
		{"no record, removed from own cluster: set aside", Observation{Self: self, Local: data, MembersKnown: true, MembersClusterID: 0xc1, Members: members(voter(1, "m0", true))}, SetAside, false, "removed"},
		{"no record, member list of another cluster: rejoin", Observation{Self: self, Local: data, MembersKnown: true, MembersClusterID: 0xd2, Members: members(voter(1, "m0", true))}, Rejoin, false, "re-record"},
		{"data of old epoch: set aside", Observation{Self: self, Local: Local{Cluster: "c", Name: "m1", Token: "tok", Epoch: 1}, Record: &Record{ClusterID: 5, Token: "tok", Epoch: 2}, Peers: []PeerStatus{{Name: "m0", Token: "tok", Epoch: 2, Running: true, Healthy: true}}}, SetAside, false, "epoch 2"},
		{"data of old epoch, the newer one not running with a quorum: keep it", Observation{Self: self, Local: Local{Cluster: "c", Name: "m1", Token: "tok", Epoch: 1}, Record: &Record{ClusterID: 5, Token: "tok2", Epoch: 2}, Peers: []PeerStatus{{Name: "m0", Token: "tok2", Epoch: 2}}}, Wait, false, "until it does"},
		{"data of old epoch, newer than the snapshot, the newer epoch held nowhere: an operator chooses", Observation{Self: self, Local: Local{Cluster: "c", Name: "m1", Token: "tok", Epoch: 1, Revision: 50}, Record: &Record{ClusterID: 5, Token: "tok2", Epoch: 2}, Peers: []PeerStatus{{Name: "m0"}}, LatestSnapshot: &SnapshotInfo{Name: "s1", Revision: 40, Epoch: 1}}, Wait, false, "an operator must"},
		{"data without metadata: set aside", Observation{Self: self, Local: Local{}, Record: rec}, SetAside, false, "without etcd-nomad metadata"},
		{"data of a removed member: set aside", Observation{Self: self, Local: data, Record: rec, MembersKnown: true, Members: members(voter(1, "m0", true))}, SetAside, false, "removed"},
		{"unreadable: set aside", Observation{Self: self, Local: Local{Unreadable: "EACCES"}}, SetAside, false, "EACCES"},
		{"running learner, lock: promote", Observation{Self: self, Running: true, SelfID: 2, Local: data, Record: rec, HoldsLock: true, MembersKnown: true, Members: members(voter(1, "m0", true), Member{ID: 2, Name: "m1", PeerURLs: []string{"https://m1:2380"}, Learner: true})}, Promote, false, "promoting"},
		{"running at a new address (adopted data): update the peer URL", Observation{Self: self, Running: true, SelfID: 2, LeaderID: 1, Local: data, Record: rec, HoldsLock: true, MembersKnown: true, Members: members(voter(1, "m0", true), Member{ID: 2, Name: "m1", PeerURLs: []string{"https://old:2380"}, Healthy: true}, voter(3, "m2", true))}, UpdatePeerURL, false, "updating"},
		{"running, record lost: re-record", Observation{Self: self, Running: true, SelfID: 2, Local: data, HoldsLock: true, MembersKnown: true, Members: three}, RecordCluster, false, "re-recording"},
		{"running, record lost, no quorum, a peer silent: wait", Observation{Self: self, Running: true, SelfID: 2, Local: data, HoldsLock: true, Unreachable: 1}, Wait, false, "not re-recording"},
		{"running, record lost, no quorum, every instance answers: re-record", Observation{Self: self, Running: true, SelfID: 2, Local: data, HoldsLock: true}, RecordCluster, false, "re-recording"},
		{"empty everywhere, no record, a snapshot: restore it", Observation{Self: self, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n", RecoveryGrace: time.Minute, LatestSnapshot: &SnapshotInfo{Name: "s1", Revision: 50, Epoch: 2}}, RecoverQuorum, false, "instead of seeding"},
		{"running, record older: re-record (invariant 9)", Observation{Self: self, Running: true, SelfID: 2, Local: Local{Cluster: "c", Name: "m1", MemberID: 2, ClusterID: 0xc1, Token: "new", Epoch: 2}, Record: rec, HoldsLock: true, MembersKnown: true, Members: three}, RecordCluster, false, "epochs only grow"},
		{"running, unconfirmed: confirm", Observation{Self: self, Running: true, SelfID: 2, Local: data, HoldsLock: true, MembersKnown: true, Members: three, Record: &Record{Token: "tok", Epoch: 1, Seeder: "m1"}}, RecordCluster, false, "confirming"},
		{"running, removed: set aside", Observation{Self: self, Running: true, SelfID: 2, Local: data, Record: rec, MembersKnown: true, Members: members(voter(1, "m0", true))}, SetAside, false, "no longer"},
		{"running leader, stale member: remove", Observation{Self: self, Running: true, SelfID: 2, LeaderID: 2, Local: data, Record: rec, HoldsLock: true, MembersKnown: true, StaleAfter: time.Second,
			Members: members(voter(1, "m0", true), voter(2, "m1", true), voter(3, "m2", true), Member{ID: 4, Name: "m3", Healthy: true, AbsentFor: time.Minute})}, RemoveMember, false, "absent"},
		{"running follower, stale member: leader handles it", Observation{Self: self, Running: true, SelfID: 2, LeaderID: 1, Local: data, Record: rec, HoldsLock: true, MembersKnown: true, StaleAfter: time.Second,
			Members: members(voter(1, "m0", true), voter(2, "m1", true), voter(3, "m2", true), Member{ID: 4, Name: "m3", Healthy: true, AbsentFor: time.Minute})}, Wait, false, "another voter"},
		{"running, stale leader only choice: lowest healthy acts", Observation{Self: self, Running: true, SelfID: 2, LeaderID: 4, Local: data, Record: rec, HoldsLock: true, MembersKnown: true, StaleAfter: time.Second,
			Members: members(voter(2, "m1", true), voter(3, "m2", true), voter(5, "m4", true), Member{ID: 4, Name: "m3", Healthy: true, AbsentFor: time.Minute})}, RemoveMember, false, "absent"},
		{"running an old incarnation: set aside", Observation{Self: self, Running: true, SelfID: 2, LeaderID: 1, Local: data, Record: &Record{ClusterID: 7, Token: "restored", Epoch: 2, Seeder: "m0"}, MembersKnown: true, Members: three, Peers: []PeerStatus{{Name: "m0", Token: "restored", Epoch: 2, Running: true, Healthy: true}}}, SetAside, false, "epoch 2"},
		{"running while another seeds the next epoch: keep it", Observation{Self: self, Running: true, SelfID: 2, LeaderID: 1, Local: data, Record: &Record{ClusterID: 0, Token: "restored", Epoch: 2, Seeder: "m0"}, MembersKnown: true, Members: three}, Wait, false, "being seeded by m0"},
		{"stopped while another seeds the next epoch: keep the data", Observation{Self: self, Local: data, Record: &Record{ClusterID: 0, Token: "restored", Epoch: 2, Seeder: "m0"}}, Wait, false, "keeping"},
		{"running the unconfirmed recorded incarnation without quorum, every instance answers: confirm it", Observation{Self: self, Running: true, SelfID: 2, Local: data, HoldsLock: true, Record: &Record{Token: "tok", Epoch: 1, Seeder: "m9"}, Peers: []PeerStatus{{Name: "m0"}, {Name: "m2"}}}, RecordCluster, false, "so that its quorum loss can be recovered"},
		{"running the unconfirmed recorded incarnation without quorum, a peer silent: wait", Observation{Self: self, Running: true, SelfID: 2, Local: data, HoldsLock: true, Unreachable: 1, Record: &Record{Token: "tok", Epoch: 1, Seeder: "m9"}}, Wait, false, "no quorum"},
		{"running, healthy: wait", Observation{Self: self, Running: true, SelfID: 2, LeaderID: 1, Local: data, Record: rec, MembersKnown: true, Members: three}, Wait, false, "healthy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.ClusterName = "c"
			if c.o.Instances == nil {
				c.o.Instances = insts
			}
			d := Plan(c.o)
			if d.Kind != c.kind || d.NeedsLock != c.lock || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("got %s (needs lock %v): %q; want %s (needs lock %v) with %q", d.Kind, d.NeedsLock, d.Reason, c.kind, c.lock, c.reason)
			}
			if err := Check(c.o, d); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLeaderNeverChosenWhileAnotherStale(t *testing.T) {
	o := Observation{Self: Self{Name: "m1"}, Running: true, SelfID: 2, LeaderID: 4, Local: Local{Cluster: "c", Name: "m1", Token: "t", Epoch: 1, MemberID: 2},
		Record: &Record{ClusterID: 1, Token: "t", Epoch: 1}, HoldsLock: true, MembersKnown: true, StaleAfter: time.Second,
		Members: members(voter(2, "m1", true), voter(3, "m2", true), voter(5, "m4", true), voter(6, "m5", true),
			Member{ID: 4, Name: "m3", Healthy: true, AbsentFor: time.Minute}, Member{ID: 7, Name: "m6", Healthy: true, AbsentFor: time.Minute})}
	d := Plan(o)
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
	if d := PlanLeave(o); d.Kind != RemoveMember || d.MemberID != 2 {
		t.Fatalf("healthy 3 -> 2: got %+v", d)
	}
	o.Members = members(voter(1, "m0", true), voter(2, "m1", true), voter(3, "m2", false))
	if d := PlanLeave(o); d.Kind != Wait || !strings.Contains(d.Reason, "below quorum") {
		t.Fatalf("leaving would leave 1 healthy of 2: got %+v", d)
	}
	o.Members = members(voter(2, "m1", true))
	if d := PlanLeave(o); d.Kind != Wait {
		t.Fatalf("last voter must not remove itself: got %+v", d)
	}
	o = base
	o.Members = members(voter(1, "m0", true), voter(2, "m1", true), voter(3, "m2", true))
	for _, d := range []Decision{PlanLeave(o)} {
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
	d := Plan(o)
	if d.Kind != ReplaceInstance || d.Target != "m2" {
		t.Fatalf("want replacement of m2, got %+v", d)
	}
	o.ReplacementInFlight = true
	if d := Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "already in flight") {
		t.Fatalf("second replacement while one is in flight: got %+v", d)
	}
	o.ReplacementInFlight = false
	o.Members[2].UnhealthyFor = 10 * time.Second
	if d := Plan(o); d.Kind != Wait {
		t.Fatalf("replaced before ReplaceAfter: got %+v", d)
	}
	o.Members[2].UnhealthyFor = time.Minute
	o.LeaderID = 2
	if d := Plan(o); d.Kind != Wait {
		t.Fatalf("a follower replaced an instance: got %+v", d)
	}
}

func TestRecoverQuorum(t *testing.T) {
	rec := &Record{ClusterID: 7, Token: "t", Epoch: 1}
	data := Local{Cluster: "c", Name: "m1", Token: "t", Epoch: 1, MemberID: 2, Revision: 500}
	base := Observation{ClusterName: "c", Self: Self{Name: "m1"}, Running: true, SelfID: 2, Local: data, Record: rec, HoldsLock: true,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, RecoveryGrace: 30 * time.Second, QuorumLostFor: time.Minute, NewToken: "n"}
	d := Plan(base)
	if d.Kind != RecoverQuorum || d.From != FromData || d.Record.Epoch != 2 || d.Record.Token != "n" {
		t.Fatalf("lone survivor: got %+v", d)
	}
	o := base
	o.QuorumLostFor = 10 * time.Second
	if d := Plan(o); d.Kind != Wait {
		t.Fatalf("before the grace period: got %+v", d)
	}
	o = base
	o.Peers = []PeerStatus{{Name: "m2", Token: "t", Epoch: 1, Revision: 900}}
	if d := Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "member m2 recovers") {
		t.Fatalf("a peer holds newer data: got %+v", d)
	}
	o = base
	o.LatestSnapshot = &SnapshotInfo{Name: "s", Revision: 800, Epoch: 1}
	if d := Plan(o); d.Kind != RecoverQuorum || d.From != FromSnapshot || d.Target != "s" {
		t.Fatalf("the snapshot is newer than every survivor: got %+v", d)
	}
	o = base
	o.LatestSnapshot = &SnapshotInfo{Name: "s", Revision: 100, Epoch: 1}
	if d := Plan(o); d.Kind != RecoverQuorum || d.From != FromData {
		t.Fatalf("survivor data beats an older snapshot: got %+v", d)
	}
	o = base
	o.HoldsLock = false
	if d := Plan(o); d.Kind != Wait || !d.NeedsLock {
		t.Fatalf("recovery without the lock: got %+v", d)
	}
	// Every data dir wiped: nothing running, empty, a snapshot exists.
	o = Observation{ClusterName: "c", Self: Self{Name: "m0"}, Local: Local{Empty: true}, Record: rec, HoldsLock: true,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}}, RecoveryGrace: 30 * time.Second, QuorumLostFor: time.Minute, NewToken: "n",
		Peers: []PeerStatus{{Name: "m1"}}, LatestSnapshot: &SnapshotInfo{Name: "s", Revision: 42, Epoch: 1}}
	if d := Plan(o); d.Kind != RecoverQuorum || d.From != FromSnapshot {
		t.Fatalf("all wiped: got %+v", d)
	}
	for _, obs := range []Observation{base, o} {
		if err := Check(obs, Plan(obs)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNoRecoveryWhileAnInstanceIsSilent(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m1"}, Running: true, SelfID: 2, HoldsLock: true,
		Local: Local{Cluster: "c", Name: "m1", Token: "t", Epoch: 1, MemberID: 2, Revision: 500}, Record: &Record{ClusterID: 7, Token: "t", Epoch: 1},
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, RecoveryGrace: 30 * time.Second, QuorumLostFor: time.Minute, NewToken: "n", Unreachable: 1}
	if d := Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "do not answer") {
		t.Fatalf("recovery during a possible partition: got %+v", d)
	}
	o.Unreachable = 0
	o.Peers = []PeerStatus{{Name: "m0", Token: "t", Epoch: 1, Healthy: true}}
	if d := Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "healthy") {
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
	d := Plan(base)
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
		if d := Plan(o); d.Kind != Wait {
			t.Errorf("%s: got %+v, want a wait", name, d)
		}
	}
	// A peer with newer epoch 1 data takes over instead; an empty member
	// with only a snapshot left recovers from it.
	o := base
	o.Peers = []PeerStatus{{Name: "m3", Token: "t1", Epoch: 1, Revision: 900}}
	if d := Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "member m3 recovers") {
		t.Fatalf("a peer holds newer data: got %+v", d)
	}
	o = base
	o.Local = Local{Empty: true}
	o.LatestSnapshot = &SnapshotInfo{Name: "s", Revision: 42, Epoch: 1}
	if d := Plan(o); d.Kind != RecoverQuorum || d.From != FromSnapshot || d.Record.Epoch != 3 {
		t.Fatalf("only a snapshot left: got %+v", d)
	}
}

// TestLivenessFindings pins the decisions that the whole-system simulation
// found missing (make sim from seed 1000): each observation kept the
// cluster waiting for good before its fix.
func TestLivenessFindings(t *testing.T) {
	self := Self{Name: "m0", PeerURL: "https://m0:2380"}
	insts := []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}
	cases := []struct {
		name   string
		o      Observation
		kind   Kind
		reason string
	}{
		{
			// sim seeds 41358, 43370: the others (empty) name m0 to
			// restore the newest snapshot of the confirmed epoch 4, whose
			// quorum is lost; m0 kept its epoch-3 data waiting for epoch 4
			// to run.
			name: "older data kept for a newer epoch without a quorum: its holder recovers when chosen",
			o: Observation{Self: self, HoldsLock: true, NewToken: "n", RecoveryGrace: 1, QuorumLostFor: 2, Peers: []PeerStatus{{Name: "m1"}, {Name: "m2"}},
				Local:  Local{Cluster: "c", Name: "m0", MemberID: 1, ClusterID: 0xc1, Token: "tokA", Epoch: 3, Revision: 418, Learner: true},
				Record: &Record{ClusterID: 0xc1, Token: "tokB", Epoch: 4, Seeder: "m9"}, LatestSnapshot: &SnapshotInfo{Name: "s9", Revision: 431, Epoch: 4}},
			kind: RecoverQuorum, reason: "from snapshot s9",
		},
		{
			// sim seed 21345: Consul restored an empty seed record of
			// epoch 2 whose seeder was replaced; m0 and m1 hold epoch 1.
			name: "an empty seed's gone seeder beside data: taken over from the best data",
			o: Observation{Self: self, HoldsLock: true, NewToken: "n", RecoveryGrace: 1, SeederGoneFor: 2, Peers: []PeerStatus{{Name: "m1", Token: "tokA", Epoch: 1, Revision: 101}, {Name: "m2"}},
				Local:  Local{Cluster: "c", Name: "m0", MemberID: 1, ClusterID: 0xc1, Token: "tokA", Epoch: 1, Revision: 103},
				Record: &Record{Token: "tokB", Epoch: 2, Seeder: "m9"}},
			kind: RecoverQuorum, reason: "recovering epoch 3 from this member's data",
		},
		{
			// sim seeds 23155, 43442: the seed of tokA ran twice (every
			// copy of the first was lost, Consul restored its unconfirmed
			// record, it resumed), then Consul restored the first's
			// confirmed record: nobody could join.
			name: "the record names another cluster id of this incarnation: record the one with a quorum",
			o: Observation{Self: self, Running: true, SelfID: 1, LeaderID: 1, HoldsLock: true, MembersKnown: true, MembersClusterID: 0xc2,
				Members: members(voter(1, "m0", true), voter(2, "m1", true)), Peers: []PeerStatus{{Name: "m1", Token: "tokA", Epoch: 1, Running: true, Healthy: true}, {Name: "m2"}},
				Local:  Local{Cluster: "c", Name: "m0", MemberID: 1, ClusterID: 0xc2, Token: "tokA", Epoch: 1},
				Record: &Record{ClusterID: 0xc1, Token: "tokA", Epoch: 1, Seeder: "m0"}},
			kind: RecordCluster, reason: "recording cluster c2",
		},
		{
			// sim seeds 11741, 11929 and six others: Consul restored the
			// unconfirmed record of a recovery whose seeder is gone for
			// good, while the older epoch runs with a quorum.
			name: "a newer unconfirmed record whose seeder is gone, beside a live quorum: an operator chooses",
			o: Observation{Self: self, Running: true, SelfID: 1, LeaderID: 1, MembersKnown: true, MembersClusterID: 0xc2, RecoveryGrace: 1, SeederGoneFor: 2,
				Members: members(voter(1, "m0", true), voter(2, "m1", true)), Peers: []PeerStatus{{Name: "m1", Token: "tokA", Epoch: 2, Running: true, Healthy: true}, {Name: "m2"}},
				Local:  Local{Cluster: "c", Name: "m0", MemberID: 1, ClusterID: 0xc2, Token: "tokA", Epoch: 2},
				Record: &Record{Token: "tokB", Epoch: 3, Seeder: "m9", Source: FromData, LastConfirmedToken: "tokZ", LastConfirmedEpoch: 1}},
			kind: Wait, reason: "an operator must choose",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.ClusterName = "c"
			if c.o.Instances == nil {
				c.o.Instances = insts
			}
			d := Plan(c.o)
			if d.Kind != c.kind || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("got %s %q; want %s with %q", d.Kind, d.Reason, c.kind, c.reason)
			}
			if err := Check(c.o, d); err != nil {
				t.Fatalf("the decision fails the checker: %v", err)
			}
		})
	}
}
