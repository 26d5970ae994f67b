package planner

import (
	"testing"
	"time"
)

// Review rev15b A1, and its price since rev15c C1: m1 (c2's voter)
// restarts while m2 runs c2 alone (no quorum) beside m0's newer started
// data. A lone runner may be a member cut off through m0's recovery,
// below m0's acknowledged writes (C1), so m1 does not give c2 its quorum
// back; it waits, and 'recover -from m0 -accept-data-loss' frees both
// (naming c2's line: its later writes are set aside, knowingly).
func TestRestartedVoterBesideALoneRunnerWaitsWithAWayOut(t *testing.T) {
	o := rev15ConsulRestoredView("m1")
	o.Local.Revision = 510
	m0 := PeerStatus{Name: "m0", MemberID: 1, Token: "tok3", Epoch: 3, Revision: 700, ForceNewPending: true}
	m2 := PeerStatus{Name: "m2", MemberID: 3, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Running: true, Revision: 510}
	o.Peers = []PeerStatus{m0, m2}
	if d := Plan(o); d.Kind != Wait {
		t.Errorf("m1 beside a lone runner of c2 and m0's newer started data: %s: %s, want a wait", d.Kind, d.Reason)
	}
	stopped1 := PeerStatus{Name: "m1", MemberID: 2, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Revision: 510}
	stopped2 := m2
	stopped2.Running = false
	v := OperatorView{Record: o.Record, NewToken: "tok4", From: "m0", Answered: []PeerStatus{m0, stopped1, stopped2}}
	if _, err := OperatorRecovery(v); err == nil {
		t.Error("recover -from m0 without -accept-data-loss beside c2's line at 510")
	}
	v.AcceptLoss = true
	if _, err := OperatorRecovery(v); err != nil {
		t.Errorf("recover -from m0 -accept-data-loss: %v", err)
	}
}

// Review rev15b (data) A2: the way out m0's wait names, 'recover -from m0', taken
// while c2 (the restored record's cluster) has run and acknowledged
// writes 501..510 of its own line after m0's epoch 3 forked at 500:
// the command compares revisions across the two lines (510 < 700) and
// records the recovery without asking for -accept-data-loss; m1 and m2
// set c2's writes aside for it.
func TestRecoverFromStartedNewerDataAsksBeforeDroppingTheRestoredLine(t *testing.T) {
	m0 := PeerStatus{Name: "m0", MemberID: 1, Token: "tok3", Epoch: 3, Revision: 700, ForceNewPending: true}
	stopped := func(name string, id uint64) PeerStatus {
		return PeerStatus{Name: name, MemberID: id, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Revision: 510}
	}
	rec := &Record{Token: "tok2", Epoch: 2, ClusterID: 0xc2, Seeder: "m0"}
	r, err := OperatorRecovery(OperatorView{Record: rec, NewToken: "tok4", From: "m0", Answered: []PeerStatus{m0, stopped("m1", 2), stopped("m2", 3)}})
	if err == nil {
		t.Errorf("recover -from m0 (no -accept-data-loss) recorded %+v over c2's line at revision 510, which m0's epoch 3 (forked from it) does not hold", r)
	}
}

// Review rev15b (data) D1: Consul lost its state (no record). m0's ForceNewCluster start
// of epoch 3 (token tok3) from its epoch 2 data began (MarkStarted) and
// failed (ForceNewPending, not Unstarted). m1 and m2 came back while m0
// did not answer and run c2 (epoch 2) with a quorum, not yet re-recorded.
// m0 comes back: it starts its data (Rejoin); task's start() drops the
// ForceNew flag (forceNewAllowed: no record) and, since rev15 F2, keeps
// token tok3 epoch 3. If etcd's bootstrap never committed the removal of
// the other members (a clean failure: a port in use fails StartEtcd before
// the WAL is opened), m0 rejoins c2 as its old member while its metadata
// names epoch 3: the epoch is re-recorded over c2's members' epoch 2 data
// (RV14-4), and if the removal did commit, m0 is a second live cluster of
// c2's id beside it. Either way, data whose ForceNewCluster start began
// must not be started without its record beside a quorum of its source.
func TestStartedForceNewWithoutRecordWaitsBesideItsSourceQuorum(t *testing.T) {
	voter := func(name string, id uint64) PeerStatus {
		return PeerStatus{Name: name, MemberID: id, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Running: true, Healthy: true, Revision: 510}
	}
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, DesiredSize: 3, HoldsLock: true, RecoveryGrace: 1,
		Instances:    []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}},
		Local:        Local{Cluster: "c", Name: "m0", Token: "tok3", Epoch: 3, MemberID: 1, Revision: 500, ForceNewPending: true},
		Peers:        []PeerStatus{voter("m1", 2), voter("m2", 3)},
		MembersKnown: true, MembersClusterID: 0xc2,
		Members: []Member{{ID: 1, Name: "m0"}, {ID: 2, Name: "m1", Healthy: true}, {ID: 3, Name: "m2", Healthy: true}}}
	d := Plan(o)
	t.Logf("m0: %s (operator %v): %s", d.Kind, d.AwaitsOperator, d.Reason)
	if d.Kind == Rejoin {
		t.Errorf("m0 starts its begun ForceNew data of epoch 3 without a record beside c2's quorum: %s", d.Reason)
	}
	// What m0, running in c2 with metadata tok3/3, then records; and what
	// m1 does with its c2 data under it after a restart.
	rec := &Record{ClusterID: 0xc2, Token: "tok3", Epoch: 3, Seeder: "m0"}
	a := Observation{ClusterName: "c", Self: Self{Name: "m1"}, DesiredSize: 3, HoldsLock: true, RecoveryGrace: 1,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: rec,
		Local:        Local{Cluster: "c", Name: "m1", Token: "tok2", Epoch: 2, MemberID: 2, ClusterID: 0xc2, Revision: 520},
		Peers:        []PeerStatus{{Name: "m0", MemberID: 1, Token: "tok3", Epoch: 3, ClusterID: 0xc2, Running: true, Healthy: true, Revision: 520}, voter("m2", 3)},
		MembersKnown: true, MembersClusterID: 0xc2,
		Members: []Member{{ID: 1, Name: "m0", Healthy: true}, {ID: 2, Name: "m1"}, {ID: 3, Name: "m2", Healthy: true}}}
	d = Plan(a)
	t.Logf("m1 under the re-recorded epoch 3 of c2: %s: %s", d.Kind, d.Reason)
}

// What m1, running c2 with m2 (a quorum), does once m0 re-recorded its
// Review rev15b (data) D2: no record (Consul lost its state). m0's ForceNewCluster start
// of epoch 3 from its epoch 2 data (c2: m0, m1, m2) began and failed
// before etcd opened the WAL (a port in use): the WAL still lists all
// three. m0 comes back first: Rejoin, DropForceNew keeps tok3/3 (rev15
// F2), etcd runs as c2's old member m0 and waits for a quorum. m1 and m2
// come back: with no record, a peer running epoch 3 is newer than their
// Review rev15b (data) R1b: the automatic path records a recovery from data above a
// snapshot of a newer epoch whose revision is lower (pickRecovery compares
// revisions; nextEpoch records above the snapshot's epoch: sim seed 2470's
// case). The member crashes between writing the record and rewriting its
// metadata; on resume, the new check (plan.go resumeRecovery) waits for an
// operator because the snapshot's epoch is higher, though it is the very
// snapshot the recording decision weighed and passed over.
func TestOwnRecoveryResumesOverTheSnapshotItPassedOver(t *testing.T) {
	rec := &Record{ClusterID: 7, Token: "t", Epoch: 1}
	data := Local{Cluster: "c", Name: "m1", Token: "t", Epoch: 1, MemberID: 2, Revision: 500}
	snap := &SnapshotInfo{Name: "snap-e2", Epoch: 2, Revision: 300}
	base := Observation{ClusterName: "c", Self: Self{Name: "m1"}, Running: true, SelfID: 2, Local: data, Record: rec, HoldsLock: true,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, RecoveryGrace: 30 * time.Second, QuorumLostFor: time.Minute, NewToken: "n",
		LatestSnapshot: snap, SnapshotEpoch: 2}
	d := Plan(base)
	t.Logf("quorum lost: %s: %s", d.Kind, d.Reason)
	if d.Kind != RecoverQuorum || d.From != FromData {
		t.Skipf("the automatic path does not recover from data here: %s", d.Kind)
	}
	t.Logf("recorded %+v", *d.Record)
	o := base
	o.Running, o.SelfID, o.QuorumLostFor = false, 0, 0
	o.Record = d.Record
	o.Peers = []PeerStatus{{Name: "m0"}, {Name: "m2"}}
	r := Plan(o)
	t.Logf("resume: %s (operator %v): %s", r.Kind, r.AwaitsOperator, r.Reason)
	if r.Kind == Wait && r.AwaitsOperator {
		t.Errorf("the member's own recovery, recorded over snapshot %s (epoch 2, revision 300) from data at revision 500, waits for an operator on resume below that same snapshot: %s", snap.Name, r.Reason)
	}
}

// Review rev15b (data) R1c: rev15-sim R1's interleaving with the store's listing failing
// at the resume (a partition between m1 and the store, a cancelled
// context): task/recover.go observeQuorumLoss leaves LatestSnapshot nil
// and sets ListingUnanswered, which resumeRecovery never reads: m1 resumes
// from revision 42 while the store holds the line at 113. pickRecovery
// refuses to decide without the listing (notWithoutListing); the resume
// must too.
func TestResumedRecoveryWaitsWhileTheStoreDoesNotAnswer(t *testing.T) {
	o := ownResumeView(42)
	o.ListingUnanswered = "list snapshots: context deadline exceeded"
	d := Plan(o)
	t.Logf("%s: %s", d.Kind, d.Reason)
	if d.Kind == RecoverQuorum {
		t.Fatalf("resumed the recovery from revision 42 while the store's listing did not answer: %s", d.Reason)
	}
}

// What m2 (running c2 alone after m1's restart, A1) and m0 do once the
