package planner

import (
	"testing"
	"time"
)

// Review rev15c (data) C1: the view of TestVoterWaitsBesideNewerStartedDataUnderARestoredRecord
// (m0 holds epoch 3 data that ran to revision 700 from c2's line at 500;
// Consul restored c2's older record), except that m2 never stopped: cut
// off from m0, Consul and m1, it kept running c2 alone, without a quorum,
// at revision 500, since before m0's recovery. m1 restarts at revision
// 500. Before 04be85b m1 waited for an operator; now peerNewerThanRecord
// skips because m2 "runs the record's incarnation", m1 rejoins, m1+m2 are
// a quorum of c2 again at revision 500, below m0's acknowledged 501..700,
// and c2 takes writes on a second line: any later choice loses one line.
func TestRestoredRecordsLoneRunnerDoesNotRegainAQuorumBelowNewerData(t *testing.T) {
	o := rev15ConsulRestoredView("m1")
	m0 := PeerStatus{Name: "m0", MemberID: 1, Token: "tok3", Epoch: 3, Revision: 700, ForceNewPending: true}
	m2 := PeerStatus{Name: "m2", MemberID: 3, Token: "tok2", Epoch: 2, ClusterID: 0xc2, Running: true, Revision: 500}
	o.Peers = []PeerStatus{m0, m2}
	d := Plan(o)
	t.Logf("m1: %s (operator %v): %s", d.Kind, d.AwaitsOperator, d.Reason)
	if d.Kind == Rejoin {
		t.Errorf("m1 (revision 500) rejoins c2 beside m2 running alone, regaining c2's quorum below m0's epoch 3 data at revision 700: %s", d.Reason)
	}
}

// Review rev15c (data) C4: R1b's same-line rule (s.Epoch >= l.Epoch &&
// s.Revision > l.Revision) compares revisions across lines. m1 recorded
// its own recovery of epoch 2 from its epoch 1 data at revision 500 and
// crashed before starting it. Meanwhile epoch 3 ran: restored from an
// older snapshot (revision 300), it acknowledged writes to 400 and was
// snapshotted there, its members since collected; Consul then restored
// m1's epoch 2 record. Before 04be85b the resume waited below the epoch
// 3 snapshot; now it resumes from epoch 1 data and sets epoch 3's writes
// 301..400 aside, starting an epoch below one that ran.
func TestOwnRecoveryDoesNotResumeBelowALaterEpochsSnapshotAtALowerRevision(t *testing.T) {
	o := ownResumeView(500)
	o.LatestSnapshot, o.SnapshotEpoch = &SnapshotInfo{Name: "snap-e3", Epoch: 3, Revision: 400}, 3
	d := Plan(o)
	t.Logf("%s (operator %v): %s", d.Kind, d.AwaitsOperator, d.Reason)
	if d.Kind != Wait {
		t.Errorf("resumed epoch 2 from epoch 1 data at revision 500 while the store holds epoch 3 (ran after the record) at revision 400: %s: %s", d.Kind, d.Reason)
	}
}

// ownResumeView is m1 under its own recorded recovery of epoch 2 from its
// epoch 1 data at revision rev, never started (the metadata not yet
// rewritten), its peers empty replacements: what resumeRecovery decides.
func ownResumeView(rev int64) Observation {
	return Observation{
		ClusterName: "kit", Self: Self{Name: "m1", PeerURL: "https://m1:2380"}, HoldsLock: true, NewToken: "n", RecoveryGrace: time.Second,
		Local:     Local{Cluster: "kit", Name: "m1", MemberID: 0x20, ClusterID: 0x17, Token: "tok19", Epoch: 1, Revision: rev},
		Record:    &Record{Token: "tok100", Epoch: 2, Seeder: "m1", Source: FromData, LastConfirmedToken: "tok19", LastConfirmedEpoch: 1},
		Instances: []Instance{{Name: "m0b"}, {Name: "m1"}, {Name: "m2b"}},
		Peers:     []PeerStatus{{Name: "m0b"}, {Name: "m2b"}},
	}
}
