package planner

import (
	"strings"
	"testing"
	"time"
)

// The checks that no other planner test sees fail (TestInvariantsHoldOn
// RandomObservations and TestCheckerCatchesBrokenPlanners exercise the
// rest; docs/redesign.md, "The checker", lists which): for each, a view
// it passes and one step away a view it refuses, naming its rule.
func TestEachCheckPassesAndRefuses(t *testing.T) {
	type view struct {
		o Observation
		d Decision
	}
	cases := []struct {
		check  func(Observation, Decision) error
		name   string
		passes func() view
		breaks func(*view) // one step from passes
		want   string
	}{{
		checkRecordedIncarnationRuns, "a running member promoted under a newer record",
		func() view {
			return view{Observation{Running: true, Record: &Record{Token: "a", Epoch: 2}, Local: Local{Token: "a", Epoch: 2}}, Decision{Kind: Promote}}
		},
		func(v *view) { v.o.Record.Epoch = 3 },
		"invariant 5: promote while running epoch 2 against record epoch 3",
	}, {
		checkLockHeld, "a seed without the lock",
		func() view { return view{Observation{HoldsLock: true}, Decision{Kind: Seed}} },
		func(v *view) { v.o.HoldsLock = false },
		"seed without holding the lock",
	}, {
		wrap(checkSeedStartsEmpty), "a seed while running",
		func() view { return view{Observation{Local: Local{Empty: true}}, Decision{Kind: Seed}} },
		func(v *view) { v.o.Running = true },
		"invariant 1: seed with data or while running",
	}, {
		checkSeedBesideKnownVoters, "a seed beside a known voter",
		func() view { return view{Observation{}, Decision{Kind: Seed, Reason: "no record"}} },
		func(v *view) { v.o.KnownHealthy = []string{"m2"} },
		"invariant 10: seed (no record) while m2 of the last known membership answer as voters",
	}, {
		checkSeedTakeover, "a takeover of a seed before the grace",
		func() view {
			return view{Observation{Record: &Record{Token: "a", Epoch: 1, Seeder: "m2"}, RecoveryGrace: 5 * time.Minute, SeederGoneFor: 10 * time.Minute},
				Decision{Kind: Seed, Record: &Record{Token: "b", Epoch: 2}}}
		},
		func(v *view) { v.o.SeederGoneFor = time.Minute },
		"invariant 1: took over the seed of m2",
	}, {
		checkSeedTakeover, "a takeover of a seed while a peer holds data",
		func() view {
			return view{Observation{Record: &Record{Token: "a", Epoch: 1, Seeder: "m2"}, RecoveryGrace: 5 * time.Minute, SeederGoneFor: 10 * time.Minute, Peers: []PeerStatus{{Name: "m3"}}},
				Decision{Kind: Seed, Record: &Record{Token: "b", Epoch: 2}}}
		},
		func(v *view) { v.o.Peers[0].Token = "a" },
		"invariant 1: took over a seed while peer m3 holds data",
	}, {
		wrap(checkRejoinUnderOlderRecord), "data newer than the record started beside a newer peer",
		func() view {
			return view{Observation{Record: &Record{Token: "a", Epoch: 2}, Local: Local{Token: "b", Epoch: 3}, Peers: []PeerStatus{{Name: "m2", Token: "c", Epoch: 3}}}, Decision{Kind: Rejoin}}
		},
		func(v *view) { v.o.Peers[0].Epoch = 4 },
		"invariant 9: starting epoch 3 over an older record while peer m2 holds epoch 4",
	}, {
		checkJoinStartsEmpty, "a join with data",
		func() view { return view{Observation{Local: Local{Empty: true}}, Decision{Kind: JoinAsLearner}} },
		func(v *view) { v.o.Local.Empty = false },
		"invariant 5: join-as-learner with data in the data dir",
	}, {
		wrap(checkJoinOneChange), "a join without a member list",
		func() view { return view{Observation{MembersKnown: true}, Decision{Kind: JoinAsLearner}} },
		func(v *view) { v.o.MembersKnown = false },
		"invariant 3: join without a known member list",
	}, {
		wrap(checkSetAsideHoldsData), "an empty data dir set aside",
		func() view { return view{Observation{}, Decision{Kind: SetAside}} },
		func(v *view) { v.o.Local.Empty = true },
		"invariant 7: set aside an empty data dir",
	}, {
		checkUpdatePeerURL, "another member's peer URL",
		func() view {
			return view{Observation{Running: true, MembersKnown: true, SelfID: 1}, Decision{Kind: UpdatePeerURL, MemberID: 1}}
		},
		func(v *view) { v.d.MemberID = 2 },
		"peer URL update of 2 by 1",
	}, {
		checkPromote, "another member promoted",
		func() view { return view{Observation{Running: true, SelfID: 1}, Decision{Kind: Promote, MemberID: 1}} },
		func(v *view) { v.d.MemberID = 2 },
		"invariant 3: promote of 2 by 1",
	}, {
		checkRecordCluster, "a record write without a record",
		func() view {
			return view{Observation{Running: true, MembersKnown: true}, Decision{Kind: RecordCluster, Record: &Record{Token: "a", Epoch: 1}}}
		},
		func(v *view) { v.d.Record = nil },
		"record-cluster without a record",
	}, {
		checkRecordedEpochGrows, "an older epoch recorded",
		func() view {
			return view{Observation{Record: &Record{Token: "a", Epoch: 3}}, Decision{Kind: RecordCluster, Record: &Record{Token: "a", Epoch: 3}}}
		},
		func(v *view) { v.d.Record.Epoch = 2 },
		"invariant 9: recording epoch 2 over epoch 3",
	}, {
		checkRecordedEpochGrows, "a record that drops the highest epoch",
		func() view {
			return view{Observation{Record: &Record{Token: "a", Epoch: 3, HighestEpoch: 5}}, Decision{Kind: RecordCluster, Record: &Record{Token: "b", Epoch: 4, HighestEpoch: 5}}}
		},
		func(v *view) { v.d.Record.HighestEpoch = 0 },
		"invariant 9: recording epoch 4 (highest 0) over a record that named epoch 5",
	}, {
		checkRecordedClusterID, "another cluster id recorded without its quorum",
		func() view {
			return view{Observation{Record: &Record{Token: "a", Epoch: 2, ClusterID: 1}, Running: true, MembersKnown: true, MembersClusterID: 7, Local: Local{ClusterID: 7}},
				Decision{Kind: RecordCluster, Record: &Record{Token: "a", Epoch: 2, ClusterID: 7}}}
		},
		func(v *view) { v.o.MembersClusterID = 1 },
		"invariant 5: recording cluster 7 over 1",
	}, {
		checkSeedTakeoverByRestore, "a gone seeder's seed taken over while an instance is silent",
		func() view {
			return view{Observation{Record: &Record{Token: "a", Epoch: 1, Seeder: "m2"}, LatestSnapshot: &SnapshotInfo{Name: "s", Epoch: 1}, RecoveryGrace: 5 * time.Minute, SeederGoneFor: 10 * time.Minute, Local: Local{Empty: true}},
				Decision{Kind: RecoverQuorum, From: FromSnapshot, Target: "s", Record: &Record{Token: "b", Epoch: 2}}}
		},
		func(v *view) { v.o.Unreachable = 1 },
		"invariant 4: took over the seed of m2 other than by a restore of the newest snapshot",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := c.passes()
			if err := c.check(v.o, v.d); err != nil {
				t.Fatalf("refused the view it should pass: %v", err)
			}
			c.breaks(&v)
			err := c.check(v.o, v.d)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// wrap gives a check of the observation alone a check's signature.
func wrap(check func(Observation) error) func(Observation, Decision) error {
	return func(o Observation, _ Decision) error { return check(o) }
}
