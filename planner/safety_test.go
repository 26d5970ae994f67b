package planner

import (
	"strings"
	"testing"
)

// TestSafetyReviewDefects pins each planner defect of the safety review
// with the observation that exposed it: the fixed planner
// decides safely, and the planner with the fix switched off (Faults)
// decides what the review saw, so each case fails if its fix is reverted.
func TestSafetyReviewDefects(t *testing.T) {
	self := Self{Name: "m1", PeerURL: "https://m1:2380"}
	insts := []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}
	three := members(voter(1, "m0", true), voter(2, "m1", true), voter(3, "m2", true))
	epoch2 := Local{Cluster: "c", Name: "m1", MemberID: 2, ClusterID: 0xc1, Token: "tokB", Epoch: 2, Revision: 500}
	cases := []struct {
		name   string
		fault  Faults
		o      Observation
		good   Kind
		reason string
		bad    Kind
	}{
		{
			name:  "defect 1: second seed after a lost record while a peer does not answer",
			fault: Faults{SeedWhileSilent: true},
			o:     Observation{Self: self, Local: Local{Empty: true}, HoldsLock: true, NewToken: "rogue", Unreachable: 1},
			good:  Wait, reason: "do not answer", bad: Seed,
		},
		{
			name:  "defect 1: running data set aside for the rogue seed's unconfirmed record",
			fault: Faults{SetAsideOnUnconfirmed: true},
			o: Observation{Self: self, Running: true, SelfID: 2, MembersKnown: true, Members: three, LeaderID: 1,
				Local: Local{Cluster: "c", Name: "m1", MemberID: 2, ClusterID: 0xc1, Token: "tokA", Epoch: 1}, Record: &Record{Token: "rogue", Epoch: 1, Seeder: "m5"}},
			good: Wait, reason: "an operator must choose", bad: SetAside,
		},
		{
			name:  "defect 3: a running epoch-2 member re-records over an epoch-1 record (Consul restore)",
			fault: Faults{ObeyOlderRecord: true},
			o: Observation{Self: self, Running: true, SelfID: 2, MembersKnown: true, Members: three, LeaderID: 1, HoldsLock: true,
				Local: epoch2, Record: &Record{ClusterID: 0xc1, Token: "tokA", Epoch: 1, Seeder: "m0"}},
			good: RecordCluster, reason: "epochs only grow", bad: SetAside,
		},
		{
			name:  "defect 3: a member that missed the recovery does not re-record its older epoch",
			fault: Faults{ObeyOlderRecord: true},
			o: Observation{Self: self, Running: true, SelfID: 2, HoldsLock: true,
				Local: Local{Cluster: "c", Name: "m1", MemberID: 2, ClusterID: 0xc1, Token: "tokA", Epoch: 1}, Peers: []PeerStatus{{Name: "m0", Token: "tokB", Epoch: 2, Running: true}}},
			good: Wait, reason: "newer than this member's epoch", bad: RecordCluster,
		},
		{
			name:  "defect 4: a learner never seeds a recovery, even on a revision tie it would win",
			fault: Faults{LearnerSource: true},
			o: Observation{Self: Self{Name: "m0", PeerURL: "https://m0:2380"}, Running: true, SelfID: 1, HoldsLock: true, NewToken: "n", RecoveryGrace: 1, QuorumLostFor: 2,
				Local:  Local{Cluster: "c", Name: "m0", MemberID: 1, ClusterID: 0xc1, Token: "tokA", Epoch: 1, Revision: 300, Learner: true},
				Record: &Record{ClusterID: 0xc1, Token: "tokA", Epoch: 1, Seeder: "m0"},
				Peers:  []PeerStatus{{Name: "m1", Token: "tokA", Epoch: 1, Revision: 300}}},
			good: Wait, reason: "member m1 recovers", bad: RecoverQuorum,
		},
		{
			name:  "defect 7: a second takeover recovers from the last confirmed incarnation",
			fault: Faults{TakeoverFromPrevEpoch: true},
			o: Observation{Self: Self{Name: "m0", PeerURL: "https://m0:2380"}, HoldsLock: true, NewToken: "n", RecoveryGrace: 1, SeederGoneFor: 2,
				Local:  Local{Cluster: "c", Name: "m0", MemberID: 1, ClusterID: 0xc1, Token: "tokA", Epoch: 1, Revision: 900},
				Record: &Record{Token: "tokC", Epoch: 3, Seeder: "m9", Source: FromData, LastConfirmedToken: "tokA", LastConfirmedEpoch: 1}},
			good: RecoverQuorum, reason: "this member's data", bad: Wait,
		},
		{
			// sim seeds 431, 440, 533 (seed), 150 (restore): the seeder
			// started epoch 1, others joined, it lost its disk, Consul
			// restored the unconfirmed record; the member holding the
			// incarnation was down.
			name:  "resumed own seed while an instance does not answer",
			fault: Faults{ResumeWhileSilent: true},
			o:     Observation{Self: self, Local: Local{Empty: true}, HoldsLock: true, Unreachable: 1, Record: &Record{Token: "tokA", Epoch: 1, Seeder: "m1"}},
			good:  Wait, reason: "do not answer", bad: Seed,
		},
		{
			name:  "resumed own restore while an instance does not answer",
			fault: Faults{ResumeWhileSilent: true},
			o: Observation{Self: self, Local: Local{Empty: true}, HoldsLock: true, Unreachable: 1, RecoveryGrace: 1,
				Record: &Record{Token: "tokC", Epoch: 3, Seeder: "m1", Source: FromSnapshot + ":s1"}},
			good: Wait, reason: "do not answer", bad: RecoverQuorum,
		},
		{
			// sim seeds 428, 473: a ForceNewCluster recovery keeps the
			// cluster id, so after Consul restored the epoch-1 record
			// the epoch-3 member list passed the cluster id check.
			name:  "no join under a record older than a peer's epoch",
			fault: Faults{JoinUnderNewer: true},
			o: Observation{Self: self, DesiredSize: 3, Local: Local{Empty: true}, HoldsLock: true, MembersKnown: true, MembersClusterID: 0xc1, Members: members(voter(1, "m0", true)),
				Record: &Record{ClusterID: 0xc1, Token: "tokA", Epoch: 1, Seeder: "m0"}, Peers: []PeerStatus{{Name: "m0", Token: "tokC", Epoch: 3, Running: true, Healthy: true}}},
			good: Wait, reason: "not joining until then", bad: JoinAsLearner,
		},
		{
			// sim seeds 84, 577: the seed of epoch 1 ran and was
			// snapshotted; every copy was lost and Consul restored the
			// unconfirmed seed record.
			name:  "resumed empty seed abandons the store's snapshots",
			fault: Faults{ResumeOverNewerSnapshot: true},
			o: Observation{Self: self, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n", RecoveryGrace: 1, Peers: []PeerStatus{{Name: "m0"}, {Name: "m2"}},
				Record: &Record{Token: "tokA", Epoch: 1, Seeder: "m1"}, LatestSnapshot: &SnapshotInfo{Name: "s9", Revision: 30, Epoch: 1}},
			good: RecoverQuorum, reason: "restoring it as epoch 2 instead", bad: Seed,
		},
		{
			// sim seed 150: the restored epoch 3 ran and was snapshotted
			// (s9) before its copies were lost.
			name:  "resumed restore of an older snapshot than the newest",
			fault: Faults{ResumeOverNewerSnapshot: true},
			o: Observation{Self: self, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n", RecoveryGrace: 1, Peers: []PeerStatus{{Name: "m0"}, {Name: "m2"}},
				Record: &Record{Token: "tokC", Epoch: 3, Seeder: "m1", Source: FromSnapshot + ":s1"}, LatestSnapshot: &SnapshotInfo{Name: "s9", Revision: 1000156, Epoch: 3}},
			good: RecoverQuorum, reason: "restoring it as epoch 4 instead", bad: RecoverQuorum,
		},
		{
			// sim seeds 176, 497, 508: every copy lost, Consul lost its
			// state, a new epoch 1 (tokB) was seeded and took writes, then
			// Consul restored the old epoch-1 record (tokA).
			name:  "no recovery beside another incarnation of the record's epoch",
			fault: Faults{RecoverBesideOtherIncarnation: true},
			o: Observation{Self: self, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n", RecoveryGrace: 1, QuorumLostFor: 2, Instances: []Instance{{Name: "m1"}, {Name: "m2"}},
				Record: &Record{ClusterID: 0xc1, Token: "tokA", Epoch: 1, Seeder: "m0"}, LatestSnapshot: &SnapshotInfo{Name: "s9", Revision: 107, Epoch: 1},
				Peers: []PeerStatus{{Name: "m2", Token: "tokB", Epoch: 1, Revision: 121}}},
			good: Wait, reason: "an operator must choose", bad: RecoverQuorum,
		},
		{
			// sim seed 548: the takeover of epoch 2 (tokC) beside peers
			// holding another epoch-2 incarnation (tokB).
			name:  "no takeover beside another incarnation of the record's epoch",
			fault: Faults{RecoverBesideOtherIncarnation: true},
			o: Observation{Self: self, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n", RecoveryGrace: 1, SeederGoneFor: 2, Instances: []Instance{{Name: "m1"}, {Name: "m2"}},
				Record: &Record{Token: "tokC", Epoch: 2, Seeder: "m9", Source: FromSnapshot + ":s1", LastConfirmedToken: "tokA", LastConfirmedEpoch: 1}, LatestSnapshot: &SnapshotInfo{Name: "s9", Revision: 1000488, Epoch: 2},
				Peers: []PeerStatus{{Name: "m2", Token: "tokB", Epoch: 2, Revision: 1000494}}},
			good: Wait, reason: "an operator must choose", bad: RecoverQuorum,
		},
		{
			// sim seeds 46 and 32 others: the seeder m9 recorded the seed
			// and its allocation was replaced (new name) before it
			// confirmed; nobody ever resumed it.
			name:  "an empty seed whose seeder is gone for good is taken over",
			fault: Faults{NoSeedTakeover: true},
			o: Observation{Self: Self{Name: "m0", PeerURL: "https://m0:2380"}, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n", RecoveryGrace: 1, SeederGoneFor: 2,
				Record: &Record{Token: "tokA", Epoch: 1, Seeder: "m9"}, Peers: []PeerStatus{{Name: "m1"}, {Name: "m2"}}},
			good: Seed, reason: "seeding epoch 2 in its place", bad: Wait,
		},
		{
			name:  "an empty seed whose seeder is gone is not taken over while an instance is silent",
			fault: Faults{SeedWhileSilent: true},
			o: Observation{Self: Self{Name: "m0", PeerURL: "https://m0:2380"}, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n", RecoveryGrace: 1, SeederGoneFor: 2, Unreachable: 1,
				Record: &Record{Token: "tokA", Epoch: 1, Seeder: "m9"}, Peers: []PeerStatus{{Name: "m1"}}},
			good: Wait, reason: "do not answer", bad: Wait,
		},
		{
			// sim seeds 1643, 1955, 2199: a ForceNewCluster recovery of
			// epoch 2 from m0's data was confirmed, then m0 stopped for
			// good with its disk; m1's epoch-1 data (revision 301) was
			// set aside and the next recovery restored a snapshot at 292.
			name:  "older data is kept while the confirmed newer epoch shows no quorum",
			fault: Faults{SetAsideBeforeNewerRuns: true},
			o: Observation{Self: self, Local: Local{Cluster: "c", Name: "m1", MemberID: 2, ClusterID: 0xc1, Token: "tokA", Epoch: 1, Revision: 301}, RecoveryGrace: 1, QuorumLostFor: 2,
				Record: &Record{ClusterID: 0xc1, Token: "tokB", Epoch: 2, Seeder: "m9", Source: FromData}, Peers: []PeerStatus{{Name: "m0"}, {Name: "m2"}}, LatestSnapshot: &SnapshotInfo{Name: "s7", Revision: 292, Epoch: 1}},
			good: Wait, reason: "an operator must choose", bad: SetAside,
		},
		{
			// sim seed 1906: the same, with m2's epoch-2 data (revision
			// 163) not yet set aside when m1 recovered from a snapshot
			// at 128.
			name:  "no recovery from a source older than data of an older epoch",
			fault: Faults{RecoverBelowOlderData: true},
			o: Observation{Self: self, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n", RecoveryGrace: 1, QuorumLostFor: 2, Instances: []Instance{{Name: "m1"}, {Name: "m2"}},
				Record: &Record{ClusterID: 0xc1, Token: "tokB", Epoch: 3, Seeder: "m0", Source: FromData}, LatestSnapshot: &SnapshotInfo{Name: "s5", Revision: 128, Epoch: 2},
				Peers: []PeerStatus{{Name: "m2", Token: "tokA", Epoch: 2, Revision: 163}}},
			good: Wait, reason: "an operator must choose", bad: RecoverQuorum,
		},
		{
			// sim seeds 4976, 5861, 6319: Consul restored the epoch-2
			// recovery record of a seeder gone since, while m2 runs the
			// epoch 3 that followed it.
			name:  "no takeover of a restored older recovery while a peer holds a newer epoch",
			fault: Faults{TakeoverBesideNewer: true},
			o: Observation{Self: self, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n", RecoveryGrace: 1, SeederGoneFor: 2, Instances: []Instance{{Name: "m1"}, {Name: "m2"}},
				Record: &Record{Token: "tokB", Epoch: 2, Seeder: "m9", Source: FromData, LastConfirmedToken: "tokA", LastConfirmedEpoch: 1}, LatestSnapshot: &SnapshotInfo{Name: "s9", Revision: 1000330, Epoch: 3},
				Peers: []PeerStatus{{Name: "m2", Token: "tokC", Epoch: 3, Revision: 1000332, Running: true}}},
			good: Wait, reason: "re-records before any recovery", bad: RecoverQuorum,
		},
		{
			// sim seeds 40941, 48966: Consul restored m1's old recovery
			// record (epoch 2 from its epoch-1 data) while the epoch-1
			// cluster it recovered from runs again with a quorum.
			name:  "no resumed recovery from data beside a quorum",
			fault: Faults{ResumeBesideQuorum: true},
			o: Observation{Self: self, Running: true, SelfID: 2, MembersKnown: true, MembersClusterID: 0xc1, Members: three, LeaderID: 1, HoldsLock: true,
				Local:  Local{Cluster: "c", Name: "m1", MemberID: 2, ClusterID: 0xc1, Token: "tokA", Epoch: 1, Revision: 43},
				Record: &Record{Token: "tokB", Epoch: 2, Seeder: "m1", Source: FromData, LastConfirmedToken: "tokA", LastConfirmedEpoch: 1}},
			good: Wait, reason: "not restarting as a new cluster beside it", bad: RecoverQuorum,
		},
		{
			// sim seed 40941: m1 lost its disk after recording the
			// recovery and joined a new epoch 1 (tokC) seeded after
			// Consul lost its state; then the old record came back.
			name:  "no resumed recovery from data of another incarnation",
			fault: Faults{ResumeBesideQuorum: true},
			o: Observation{Self: self, HoldsLock: true, Peers: []PeerStatus{{Name: "m0"}, {Name: "m2"}},
				Local:  Local{Cluster: "c", Name: "m1", MemberID: 2, ClusterID: 0xd4, Token: "tokC", Epoch: 1, Revision: 300},
				Record: &Record{Token: "tokB", Epoch: 2, Seeder: "m1", Source: FromData, LastConfirmedToken: "tokA", LastConfirmedEpoch: 1}},
			good: Wait, reason: "a recovery it cannot carry out", bad: RecoverQuorum,
		},
		{
			// sim seed 48966: the same restored record; the epoch-1
			// cluster took writes (revision 62) before losing its quorum
			// again, while m1 was down at revision 56.
			name:  "no resumed recovery from data older than a peer's",
			fault: Faults{ResumeBesideQuorum: true},
			o: Observation{Self: self, HoldsLock: true, Peers: []PeerStatus{{Name: "m0", Token: "tokA", Epoch: 1, Revision: 62, Running: true}, {Name: "m2"}},
				Local:  Local{Cluster: "c", Name: "m1", MemberID: 2, ClusterID: 0xc1, Token: "tokA", Epoch: 1, Revision: 56},
				Record: &Record{Token: "tokB", Epoch: 2, Seeder: "m1", Source: FromData, LastConfirmedToken: "tokA", LastConfirmedEpoch: 1}},
			good: Wait, reason: "not resuming it from older data", bad: RecoverQuorum,
		},
		{
			// sim seed 39512: Consul restored m1's old restore record
			// (epoch 3, unconfirmed) while the epoch 2 it restored
			// later runs with a quorum.
			name:  "own unconfirmed record sets no data of a quorum aside",
			fault: Faults{SettleOnOwnRecord: true},
			o: Observation{Self: self, Running: true, SelfID: 2, MembersKnown: true, MembersClusterID: 0xc1, Members: three, LeaderID: 1,
				Local: epoch2, Record: &Record{Token: "tokC", Epoch: 3, Seeder: "m1", Source: FromSnapshot + ":s1"}},
			good: Wait, reason: "an operator must choose", bad: SetAside,
		},
		{
			// sim seed 49383: the takeover of epoch 3 (carrying epoch 1
			// as the last confirmed) would restore a snapshot of epoch 2
			// at 1000147 while m0 holds that epoch 2 at 1000161: Consul
			// had restored the epoch-3 record over the confirmed epoch 2.
			name:  "no takeover below data of an epoch the record skipped",
			fault: Faults{RecoverBesideSkippedEpoch: true},
			o: Observation{Self: Self{Name: "m0", PeerURL: "https://m0:2380"}, HoldsLock: true, NewToken: "n", RecoveryGrace: 1, SeederGoneFor: 2, Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}},
				Local:          Local{Cluster: "c", Name: "m0", MemberID: 1, ClusterID: 0xc2, Token: "tokB", Epoch: 2, Revision: 1000161},
				Record:         &Record{Token: "tokC", Epoch: 3, Seeder: "m9", Source: FromSnapshot + ":s1", LastConfirmedToken: "tokA", LastConfirmedEpoch: 1},
				LatestSnapshot: &SnapshotInfo{Name: "s9", Revision: 1000147, Epoch: 2}, Peers: []PeerStatus{{Name: "m1"}, {Name: "m2"}}},
			good: Wait, reason: "an operator must choose", bad: RecoverQuorum,
		},
		{
			name:  "defect 9: no join while the record is unconfirmed",
			fault: Faults{JoinUnconfirmed: true},
			o: Observation{Self: self, DesiredSize: 3, Local: Local{Empty: true}, HoldsLock: true, MembersKnown: true, Members: members(voter(1, "m0", true)),
				Record: &Record{Token: "tokA", Epoch: 1, Seeder: "m0"}},
			good: Wait, reason: "not confirmed", bad: JoinAsLearner,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.ClusterName = "c"
			if c.o.Instances == nil {
				c.o.Instances = insts
			}
			d := unguarded.Plan(c.o)
			if d.Kind != c.good || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("fixed planner: got %s %q; want %s with %q", d.Kind, d.Reason, c.good, c.reason)
			}
			if err := Check(c.o, d); err != nil {
				t.Fatalf("fixed planner's decision fails the checker: %v", err)
			}
			if bd := c.fault.Plan(c.o); bd.Kind != c.bad {
				t.Fatalf("with the fix switched off: got %s %q; want %s (the case no longer shows the defect)", bd.Kind, bd.Reason, c.bad)
			}
		})
	}
}

// TestLeaveKeepsMembershipOnlyWithQuorum: a leaving member whose
// replacement inherits its data stops without removal only while the
// others keep a quorum; otherwise it must go through removal (invariant 12).
func TestLeaveKeepsMembershipOnlyWithQuorum(t *testing.T) {
	base := Observation{Self: Self{Name: "m0"}, Running: true, SelfID: 1, MembersKnown: true, HoldsLock: true, DataInherited: true, DesiredSize: 3}
	healthy := base
	healthy.Members = members(voter(1, "m0", true), voter(2, "m1", true), voter(3, "m2", true))
	if d := unguarded.PlanLeave(healthy); d.Kind != KeepMembership {
		t.Fatalf("3 healthy voters, data inherited: got %s %q, want %s", d.Kind, d.Reason, KeepMembership)
	}
	oneDown := base
	oneDown.Members = members(voter(1, "m0", true), voter(2, "m1", false), voter(3, "m2", true))
	if d := unguarded.PlanLeave(oneDown); d.Kind == KeepMembership || d.Kind == RemoveMember {
		t.Fatalf("another voter down, data inherited: got %s %q; stopping now would cost quorum", d.Kind, d.Reason)
	}
	notInherited := healthy
	notInherited.DataInherited = false
	if d := unguarded.PlanLeave(notInherited); d.Kind != RemoveMember {
		t.Fatalf("data not inherited: got %s %q, want %s", d.Kind, d.Reason, RemoveMember)
	}
}
