package planner

import (
	"testing"
	"time"
)

// Review rev15-sim R2 (sim seed 17915): an operator recorded a restore of
// snap-173 (revision 94) by m0 while Nomad had collected m1 and m2, which
// still served cluster 17 as its quorum (the command sees only listed
// instances). m0, stopped with its data of cluster 17 (revision 82),
// probes its last known membership: m1 answers as a healthy voter
// (KnownHealthy). The set-aside for its own restore record (settles ->
// quorumAnswers) reads only the member list and the listed peers' /status:
// m0 sets its data aside beside the quorum, and the restore then starts
// a second cluster at revision 94 while cluster 17 has gone on.
func TestOwnRestoreKeepsDataWhileAKnownMemberServes(t *testing.T) {
	o := Observation{
		ClusterName: "kit", Self: Self{Name: "m0", PeerURL: "https://m0:2380"}, NewToken: "n", RecoveryGrace: time.Second,
		Local:        Local{Cluster: "kit", Name: "m0", MemberID: 0x16, ClusterID: 0x17, Token: "tok19", Epoch: 1, Revision: 82},
		Record:       &Record{Token: "tok232", Epoch: 2, Seeder: "m0", Source: SnapshotSource("snap-173"), LastConfirmedToken: "tok19", LastConfirmedEpoch: 1, Operator: true, SourceRevision: 94},
		Instances:    []Instance{{Name: "m0"}, {Name: "m1b"}, {Name: "m2c"}},
		Peers:        []PeerStatus{{Name: "m1b"}, {Name: "m2c"}},
		KnownHealthy: []string{"m1 (https://m1:2379)"},
	}
	for _, lock := range []bool{false, true} {
		o.HoldsLock = lock
		d := Plan(o)
		t.Logf("lock %v: %s: %s", lock, d.Kind, d.Reason)
		if d.Kind != Wait {
			t.Fatalf("lock %v: %s beside a known member serving cluster 17 with a quorum: %s", lock, d.Kind, d.Reason)
		}
	}
}
