package planner

import (
	"strings"
	"testing"
)

// A member never re-records an epoch its data never ran (review
// rv14-data, TestRV14PendingDataWithoutARecordDoesNotRerecordItsUnstartedEpoch).
// RV14-4 (Consul loses its state beside pending data): the seeder's
// metadata names tok3/epoch 3 while its data is still tok2's (member 1 of
// cluster c2, which got its quorum back). With no record, the pending
// data starts as a plain member (task's start drops the ForceNew flag
// only, act.go: the metadata keeps tok3/3), it re-records the record as
// tok3 epoch 3 of cluster c2, and c2's other members then set their
// running data aside for "epoch 3": the whole quorum of c2 but m0 stops.
func TestAnEpochThatNeverRanIsNeverRerecorded(t *testing.T) {
	members := []Member{{ID: 1, Name: "m0", Healthy: true}, {ID: 2, Name: "m1", Healthy: true}, {ID: 3, Name: "m2", Healthy: true}}
	voter := func(name string, id uint64) PeerStatus {
		return PeerStatus{Name: name, MemberID: id, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Running: true, Healthy: true, Revision: 600}
	}
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, DesiredSize: 3, HoldsLock: true, RecoveryGrace: 1,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}},
		Local:     Local{Cluster: "c", Name: "m0", Token: "tok3", Epoch: 3, MemberID: 1, Revision: 500, ForceNewPending: true},
		Peers:     []PeerStatus{voter("m1", 2), voter("m2", 3)}, MembersKnown: true, MembersClusterID: 0xc2, Members: members}
	d := Plan(o)
	t.Logf("m0 stopped, no record: %s: %s", d.Kind, d.Reason)
	// Started as a member of c2 (flag dropped, metadata tok3/3, cluster id
	// written by completeMeta).
	run := o
	run.Running, run.SelfID, run.LeaderID = true, 1, 2
	run.Local = Local{Cluster: "c", Name: "m0", Token: "tok3", Epoch: 3, MemberID: 1, ClusterID: 0xc2}
	rd := Plan(run)
	t.Logf("m0 running in c2, no record: %s %+v: %s", rd.Kind, rd.Record, rd.Reason)
	if rd.Kind != Wait || strings.Contains(rd.Reason, "a planner bug") {
		t.Errorf("m0 running in c2 with metadata of an epoch c2 never ran: %s: %s, want a wait that leaves the re-record to c2's voters", rd.Kind, rd.Reason)
	}
	if err := Check(run, Decision{Kind: RecordCluster, Name: "m0", Record: &Record{ClusterID: 0xc2, Token: "tok3", Epoch: 3, Seeder: "m0"}}); err == nil {
		t.Error("the checker lets m0 re-record tok3 epoch 3, which its own cluster's voters run as epoch 2")
	}
	// m1, running c2 with no record, re-records it (m0's epoch 3 is
	// metadata its cluster never ran, not a newer copy).
	m1 := Observation{ClusterName: "c", Self: Self{Name: "m1"}, DesiredSize: 3, HoldsLock: true, RecoveryGrace: 1, Running: true, SelfID: 2, LeaderID: 2,
		Instances:    o.Instances,
		Local:        Local{Cluster: "c", Name: "m1", Token: "tok2", Epoch: 2, MemberID: 2, ClusterID: 0xc2},
		Peers:        []PeerStatus{{Name: "m0", MemberID: 1, Token: "tok3", Epoch: 3, ClusterID: 0xc2, Running: true, Healthy: true, Revision: 601}, voter("m2", 3)},
		MembersKnown: true, MembersClusterID: 0xc2, Members: members}
	if md := Plan(m1); md.Kind != RecordCluster || md.Record.Token != "tok2" || md.Record.Epoch != 2 || md.Record.ClusterID != 0xc2 {
		t.Errorf("m1 running c2 with no record: %s %+v: %s, want it to re-record tok2 epoch 2 of c2", md.Kind, md.Record, md.Reason)
	}
	if rd.Kind != RecordCluster {
		return
	}
	// m1, running c2 under that record.
	m1 = Observation{ClusterName: "c", Self: Self{Name: "m1"}, DesiredSize: 3, HoldsLock: false, RecoveryGrace: 1, Running: true, SelfID: 2, LeaderID: 2,
		Instances: o.Instances, Record: rd.Record,
		Local:        Local{Cluster: "c", Name: "m1", Token: "tok2", Epoch: 2, MemberID: 2, ClusterID: 0xc2},
		Peers:        []PeerStatus{{Name: "m0", MemberID: 1, Token: "tok3", Epoch: 3, ClusterID: 0xc2, Running: true, Healthy: true, Revision: 601}, voter("m2", 3)},
		MembersKnown: true, MembersClusterID: 0xc2, Members: members}
	md := Plan(m1)
	t.Logf("m1 running c2 under record %+v: %s: %s", *rd.Record, md.Kind, md.Reason)
	if md.Kind == SetAside {
		t.Errorf("m1 sets aside its running data of cluster c2 (the cluster m0 runs in) because m0's never-started metadata re-recorded tok3 epoch 3: %s", md.Reason)
	}
}
