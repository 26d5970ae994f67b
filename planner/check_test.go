package planner

import (
	"strings"
	"testing"
	"time"
)

// The checks, and the rules inside checks, that no other planner test
// sees fail (a coverage run of the planner tests found them; the
// randomized checker and the broken planners of invariants_test.go
// exercise the rest, see docs/redesign.md, "The checker"): for each, a
// view it passes and, one field away, a view it refuses, naming its rule.
func TestEachCheckPassesAndRefuses(t *testing.T) {
	type view = checkView
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
		wrap(checkRejoinSupersededLine), "own data started below a newer epoch of its line",
		func() view {
			return view{Observation{Record: &Record{Token: "a", Epoch: 1, ClusterID: 7}, Local: Local{Token: "a", Epoch: 1, ClusterID: 7}, LineEpoch: 1}, Decision{Kind: Rejoin}}
		},
		func(v *view) { v.o.LineEpoch = 2 },
		"invariant 9: starting data of epoch 1 (cluster id 7) under a record of epoch 1 (top 1) while the store holds a snapshot of its cluster id at epoch 2",
	}, {
		wrap(checkRejoinSupersededLine), "data above an older record started below a newer epoch of its line",
		func() view {
			return view{Observation{Record: &Record{Token: "a", Epoch: 1, ClusterID: 7}, Local: Local{Token: "b", Epoch: 2, ClusterID: 7}, LineEpoch: 2}, Decision{Kind: Rejoin}}
		},
		func(v *view) { v.o.LineEpoch = 3 },
		"invariant 9: starting data of epoch 2 (cluster id 7) under a record of epoch 1 (top 1) while the store holds a snapshot of its cluster id at epoch 3",
	}, {
		wrap(checkRejoinSupersededLine), "data without a record started below a newer epoch of its line",
		func() view {
			return view{Observation{Local: Local{Token: "a", Epoch: 1, ClusterID: 7}, LineEpoch: 1}, Decision{Kind: Rejoin}}
		},
		func(v *view) { v.o.LineEpoch = 2 },
		"invariant 9: starting data of epoch 1 (cluster id 7) under no record while the store holds a snapshot of its cluster id at epoch 2",
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
				Decision{Kind: RecoverQuorum, From: FromSnapshot, Snapshot: "s", Record: &Record{Token: "b", Epoch: 2}}}
		},
		func(v *view) { v.o.Unreachable = 1 },
		"invariant 4: took over the seed of m2 other than by a restore of the newest snapshot",
	}, {
		// The rules below sit in checks the planner tests exercise, but
		// none of those tests sees them fail.
		wrap(checkSetAsideForRecord), "the recorded incarnation's data set aside, not removed",
		func() view {
			return view{Observation{ClusterName: "c", Local: Local{Cluster: "c", Token: "a", Epoch: 2, MemberID: 5}, Record: &Record{Token: "a", Epoch: 2, ClusterID: 1}, MembersKnown: true}, Decision{Kind: SetAside}}
		},
		func(v *view) { v.o.Members = []Member{{ID: 5, Name: "m1"}} },
		"set aside data of the recorded incarnation that was not removed",
	}, {
		wrap(checkSetAsideForOwnRecovery), "data set aside for the own restore while an instance is silent",
		func() view {
			return view{Observation{Local: Local{Token: "a", Epoch: 1}, Record: &Record{Token: "b", Epoch: 2, Seeder: "m1", Source: SnapshotSource("s")}, Peers: []PeerStatus{{Name: "m2"}}}, Decision{Kind: SetAside}}
		},
		func(v *view) { v.o.Unreachable = 1 },
		"invariant 10: set aside data of epoch 1 for this member's own unconfirmed record while 1 instance(s) do not answer",
	}, {
		wrap(checkSetAsideForOwnRecovery), "data set aside for the own restore beside a healthy peer",
		func() view {
			return view{Observation{Local: Local{Token: "a", Epoch: 1}, Record: &Record{Token: "b", Epoch: 2, Seeder: "m1", Source: SnapshotSource("s")}, Peers: []PeerStatus{{Name: "m2"}}}, Decision{Kind: SetAside}}
		},
		func(v *view) { v.o.Peers[0].Healthy = true },
		"invariant 10: set aside data of epoch 1 for this member's own unconfirmed record while peer m2 is a healthy voter",
	}, {
		checkRemoveMember, "a removal without a member list",
		func() view { return removal() },
		func(v *view) { v.o.MembersKnown = false },
		"invariant 2: remove without a known member list",
	}, {
		checkRemoveMember, "a removal of a member not in the list",
		func() view { return removal() },
		func(v *view) { v.d.MemberID = 9 },
		"remove of unknown member 9",
	}, {
		checkReplaceInstance, "a replacement of a member not unhealthy long enough",
		func() view {
			return view{Observation{Members: []Member{{ID: 1, Name: "a", Healthy: true}, {ID: 2, Name: "b", Healthy: true}, {ID: 3, Name: "c", UnhealthyFor: 10 * time.Minute}}, ReplaceAfter: 5 * time.Minute, Instances: []Instance{{Name: "c"}}},
				Decision{Kind: ReplaceInstance, MemberID: 3, Instance: "c"}}
		},
		func(v *view) { v.o.Members[2].UnhealthyFor = time.Minute },
		"replacement of c, which is healthy or not unhealthy long enough",
	}, {
		checkRerecord, "a new epoch recorded by a member not running",
		func() view {
			return view{Observation{Running: true, Record: &Record{Token: "a", Epoch: 2}}, Decision{Kind: RecordCluster, Record: &Record{Token: "b", Epoch: 3}}}
		},
		func(v *view) { v.o.Running = false },
		"invariant 9: re-recording epoch 3 without this incarnation's quorum",
	}, {
		checkRerecord, "a new epoch recorded below a peer's",
		func() view {
			return view{Observation{Running: true, Record: &Record{Token: "a", Epoch: 2}, Peers: []PeerStatus{{Name: "m2", Token: "z", Epoch: 3}}}, Decision{Kind: RecordCluster, Record: &Record{Token: "b", Epoch: 3}}}
		},
		func(v *view) { v.o.Peers[0].Epoch = 4 },
		"invariant 9: re-recording epoch 3 while peer m2 holds epoch 4",
	}, {
		wrap(checkResumedRecoveryFromData), "a resumed recovery from data beside a healthy peer",
		func() view { return resumedFromData() },
		func(v *view) { v.o.Peers[0].Healthy = true },
		"invariant 10: resumed the recovery of epoch 3 from data while peer m2 is a healthy voter",
	}, {
		wrap(checkResumedRecoveryFromData), "a resumed recovery from data while an instance is silent",
		func() view { return resumedFromData() },
		func(v *view) { v.o.Unreachable = 1 },
		"invariant 10: resumed the recovery of epoch 3 from data while 1 instance(s) do not answer",
	}, {
		wrap(checkResumedRecoveryFromData), "a resumed recovery from data below a peer's copy",
		func() view { return resumedFromData() },
		func(v *view) { v.o.Peers[0].Revision = 11 },
		"invariant 4: resumed the recovery of epoch 3 from revision 10 while peer m2 holds revision 11",
	}, {
		wrap(checkResumedRecoveryFromData), "a resumed recovery from data of another incarnation",
		func() view { return resumedFromData() },
		func(v *view) { v.o.Record.LastConfirmedEpoch, v.o.Record.LastConfirmedToken = 1, "x" },
		"invariant 4: resumed the recovery of epoch 3 from data of token x epoch 1 with data of token a epoch 2",
	}, {
		wrap(checkResumedRestore), "a resumed restore beside a newer snapshot",
		func() view { return resumedRestore() },
		func(v *view) { v.o.LatestSnapshot.Name = "t" },
		"invariant 4: resumed the restore of snapshot:s while the store holds a newer snapshot t",
	}, {
		wrap(checkResumedRestore), "a resumed restore while a peer holds it",
		func() view { return resumedRestore() },
		func(v *view) { v.o.Peers[0].Token = "b" },
		"invariant 1: resumed the restore of epoch 3 while peer m2 holds it",
	}, {
		wrap(checkResumedRestore), "a resumed restore beside another incarnation of its epoch",
		func() view { return resumedRestore() },
		func(v *view) { v.o.Peers[0].Token, v.o.Peers[0].Epoch = "z", 3 },
		"invariant 1: resumed the restore of epoch 3 while peer m2 holds another incarnation of epoch 3",
	}, {
		wrap(checkResumedRestore), "a resumed restore below a snapshot of its epoch outside the lineage",
		func() view { return resumedRestore() },
		func(v *view) { v.o.SnapshotEpoch = 3 },
		"invariant 4: resumed the restore of snapshot:s (epoch 3) while the store holds a snapshot of epoch 3, taken after the record",
	}, {
		checkSeedTakeoverByRestore, "a gone seeder's seed taken over while a peer holds data",
		func() view {
			return view{Observation{Record: &Record{Token: "a", Epoch: 1, Seeder: "m2"}, LatestSnapshot: &SnapshotInfo{Name: "s", Epoch: 1}, RecoveryGrace: 5 * time.Minute, SeederGoneFor: 10 * time.Minute, Local: Local{Empty: true}, Peers: []PeerStatus{{Name: "m3"}}},
				Decision{Kind: RecoverQuorum, From: FromSnapshot, Snapshot: "s", Record: &Record{Token: "b", Epoch: 2}}}
		},
		func(v *view) { v.o.Peers[0].Token = "z" },
		"invariant 4: took over a seed while peer m3 holds data",
	}, {
		checkOwnRecordAbandoned, "the own seed abandoned for a snapshot not the newest",
		func() view { return ownAbandoned() },
		func(v *view) { v.d.Snapshot = "t" },
		"invariant 4: recovery over this member's own unconfirmed record",
	}, {
		checkOwnRecordAbandoned, "the own seed abandoned while a peer holds data",
		func() view { return ownAbandoned() },
		func(v *view) { v.o.Peers[0].Token = "z" },
		"invariant 1: restore over this member's own record while peer m2 holds data",
	}, {
		checkRestoreWithoutRecord, "a restore with no record at the newest snapshot's epoch",
		func() view { return noRecordRestore() },
		func(v *view) { v.d.Record.Epoch = 1 },
		"invariant 8: recovery with no record other than a restore of the newest snapshot as a newer epoch",
	}, {
		checkRestoreWithoutRecord, "a restore with no record over this member's data",
		func() view { return noRecordRestore() },
		func(v *view) { v.o.Local.Empty = false },
		"invariant 8: restore with no record while this member holds data",
	}, {
		checkRestoreWithoutRecord, "a restore with no record while a peer holds data",
		func() view { return noRecordRestore() },
		func(v *view) { v.o.Peers[0].Token = "z" },
		"invariant 8: restore with no record while peer m2 holds data",
	}, {
		checkRecoveryEpoch, "a recovery under a record older than a peer",
		func() view {
			return view{Observation{Record: &Record{Token: "a", Epoch: 2}, Peers: []PeerStatus{{Name: "m2", Token: "a", Epoch: 2}}}, Decision{Kind: RecoverQuorum, Record: &Record{Token: "b", Epoch: 3}}}
		},
		func(v *view) { v.o.Peers[0].Epoch = 3 },
		"invariant 9: recovery over record epoch 2 while peer m2 holds epoch 3",
	}, {
		recoverySourceCheck, "a recovery over this member's own unconfirmed record",
		func() view { return takeover() },
		func(v *view) { v.o.Self.Name = "m2" },
		"invariant 4: recovery over an unconfirmed record",
	}, {
		recoverySourceCheck, "a takeover while a peer holds the recovery's data",
		func() view { return takeover() },
		func(v *view) { v.o.Peers = []PeerStatus{{Name: "m3", Token: "a"}} },
		"invariant 4: took over while peer m3 holds data of epoch 3",
	}, {
		fromHighestCheck, "a recovery from a snapshot not the newest",
		func() view { return fromData() },
		func(v *view) { v.d.From, v.d.Snapshot = FromSnapshot, "s" },
		"invariant 4: recovery from a snapshot that is not the newest",
	}, {
		fromHighestCheck, "a recovery from no known source",
		func() view { return fromData() },
		func(v *view) { v.d.From = "tape" },
		`invariant 4: recovery from "tape"`,
	}, {
		wrap(checkRejoinData), "a rejoin without verified data",
		func() view { return rejoin() },
		func(v *view) { v.o.Local.Token = "" },
		"invariant 5: rejoin without verified data",
	}, {
		wrap(checkRejoinData), "a rejoin of a removed member's data",
		func() view { return rejoin() },
		func(v *view) { v.o.Members = nil },
		"invariant 5: starting the data of removed member 5",
	}, {
		checkOperatorAccepted, "the operator's restore sets aside more than it accepted",
		func() view {
			return view{Observation{ClusterName: "c", Local: Local{Cluster: "c", Token: "a", Epoch: 2, Revision: 10},
				Record: &Record{Operator: true, Token: "b", Epoch: 3, Seeder: "m1", Accepted: []AcceptedLine{{Token: "a", Epoch: 2, Revision: 10}}}},
				Decision{Kind: SetAside, Aside: AsideForeign, Name: "m1"}}
		},
		func(v *view) { v.o.Local.Revision = 11 },
		"invariant 4: set aside its data of token a at revision 11 for the operator's restore, which accepted that line up to 10",
	}, {
		pendingForceNewCheck, "a pending ForceNewCluster start beside a known voter",
		func() view { return pendingForceNew() },
		func(v *view) { v.o.KnownHealthy = []string{"m3"} },
		"invariant 10: started the pending ForceNewCluster recovery of epoch 3 while m3 of the last known membership answer as voters",
	}, {
		pendingForceNewCheck, "a pending ForceNewCluster start below a peer's copy of its source",
		func() view { return pendingForceNew() },
		func(v *view) { v.o.Peers[0].Revision = 11 },
		"invariant 4: started the pending ForceNewCluster recovery of epoch 3 from revision 10 while peer m2 holds its source at revision 11",
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

// The views the table's cases start from.

type checkView = struct {
	o Observation
	d Decision
}

func removal() checkView {
	return checkView{Observation{MembersKnown: true, Members: []Member{{ID: 1, Name: "a", Healthy: true}, {ID: 2, Name: "b", Healthy: true}, {ID: 3, Name: "c", Healthy: true}}, LeaderID: 1, SelfID: 1},
		Decision{Kind: RemoveMember, MemberID: 3}}
}

func resumedFromData() checkView {
	return checkView{Observation{Record: &Record{Token: "b", Epoch: 3, Seeder: "m1", Source: FromData}, Local: Local{Token: "a", Epoch: 2, Revision: 10}, Peers: []PeerStatus{{Name: "m2", Token: "a", Epoch: 2, Revision: 10}}},
		Decision{Kind: RecoverQuorum, From: FromData, Record: &Record{Token: "b", Epoch: 3}}}
}

func resumedRestore() checkView {
	return checkView{Observation{Record: &Record{Token: "b", Epoch: 3, Seeder: "m1", Source: SnapshotSource("s")}, LatestSnapshot: &SnapshotInfo{Name: "s", Epoch: 2}, Peers: []PeerStatus{{Name: "m2"}}},
		Decision{Kind: RecoverQuorum, From: FromSnapshot, Snapshot: "s", Record: &Record{Token: "b", Epoch: 3}}}
}

func ownAbandoned() checkView {
	return checkView{Observation{Record: &Record{Token: "a", Epoch: 2, Seeder: "m1"}, LatestSnapshot: &SnapshotInfo{Name: "s", Epoch: 1}, Local: Local{Empty: true}, Peers: []PeerStatus{{Name: "m2"}}},
		Decision{Kind: RecoverQuorum, From: FromSnapshot, Snapshot: "s", Record: &Record{Token: "b", Epoch: 3}}}
}

func noRecordRestore() checkView {
	return checkView{Observation{LatestSnapshot: &SnapshotInfo{Name: "s", Epoch: 1}, RecoveryGrace: 5 * time.Minute, RecordMissingFor: 10 * time.Minute, Local: Local{Empty: true}, Peers: []PeerStatus{{Name: "m2"}}},
		Decision{Kind: RecoverQuorum, From: FromSnapshot, Snapshot: "s", Record: &Record{Token: "b", Epoch: 2}}}
}

func takeover() checkView {
	return checkView{Observation{Self: Self{Name: "m1"}, Record: &Record{Token: "a", Epoch: 3, Seeder: "m2", Source: FromData}, RecoveryGrace: 5 * time.Minute, SeederGoneFor: 10 * time.Minute},
		Decision{Kind: RecoverQuorum}}
}

func fromData() checkView {
	return checkView{Observation{ClusterName: "c", Local: Local{Cluster: "c", Token: "a", Epoch: 2, Revision: 10}}, Decision{Kind: RecoverQuorum, From: FromData}}
}

func rejoin() checkView {
	return checkView{Observation{ClusterName: "c", Local: Local{Cluster: "c", Token: "a", Epoch: 2, MemberID: 5}, Record: &Record{Token: "a", Epoch: 2}, MembersKnown: true, Members: []Member{{ID: 5, Name: "m1"}}},
		Decision{Kind: Rejoin}}
}

func pendingForceNew() checkView {
	return checkView{Observation{Record: &Record{Token: "b", Epoch: 3, Seeder: "m1", Source: FromData}, Local: Local{ForceNewPending: true, Token: "b", Epoch: 3, Revision: 10}, Peers: []PeerStatus{{Name: "m2", Token: "x", Epoch: 2, Revision: 10}}},
		Decision{Kind: Rejoin}}
}

// The checks that take more than the observation and the decision, as
// the table calls them.

func recoverySourceCheck(o Observation, _ Decision) error {
	_, _, err := checkedRecoverySource(o)
	return err
}

func fromHighestCheck(o Observation, d Decision) error {
	_, err := checkRecoveryFromHighest(o, d, 2, "a")
	return err
}

func pendingForceNewCheck(o Observation, _ Decision) error { return checkPendingForceNew(o, "m1") }
