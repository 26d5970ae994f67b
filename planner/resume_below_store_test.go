package planner

import (
	"testing"
	"time"
)

// Review rev15-sim R1 (sim seed 1018653): an operator recorded
// 'recover -from m1' (no -accept-data-loss) from m1's data of epoch 1 at
// revision 42 while the old cluster's other two voters were briefly
// without a leader. They got their quorum back (Nomad had collected
// their allocations while they served), went on to revision 113, and a
// snapshot with its deltas reached the store. Once they were stopped, m1
// resumed the recovery from its data at revision 42: the store's newer
// copy of the same line is never compared (resumeRecovery ->
// fenceForceNew checks peers only; laterWrites only bounds records with
// an accepted bound).
func TestResumedRecoveryFromDataWaitsBelowANewerSnapshot(t *testing.T) {
	o := Observation{
		ClusterName: "kit", Self: Self{Name: "m1", PeerURL: "https://m1:2380"}, HoldsLock: true, NewToken: "n", RecoveryGrace: time.Second,
		Local:          Local{Cluster: "kit", Name: "m1", MemberID: 0x20, ClusterID: 0x17, Token: "tok19", Epoch: 1, Revision: 42},
		Record:         &Record{Token: "tok100", Epoch: 2, Seeder: "m1", Source: FromData, LastConfirmedToken: "tok19", LastConfirmedEpoch: 1, Operator: true},
		Instances:      []Instance{{Name: "m0b"}, {Name: "m1"}, {Name: "m2b"}},
		Peers:          []PeerStatus{{Name: "m0b"}, {Name: "m2b"}},
		LatestSnapshot: &SnapshotInfo{Name: "snap-204", Epoch: 1, Revision: 113},
	}
	d := Plan(o)
	t.Logf("%s: %s", d.Kind, d.Reason)
	if d.Kind != Wait {
		t.Fatalf("resumed the recovery from revision 42 while the store holds the same line at revision 113: %s: %s", d.Kind, d.Reason)
	}
}
