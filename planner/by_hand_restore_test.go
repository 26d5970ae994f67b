package planner

import "testing"

// 'etcd-nomad snapshot restore' replaces the running cluster on purpose
// (README: restore one stopped member, start it, the others set their
// data aside and join it): its record is marked ByHand and its installed
// data starts beside the old quorum, while the same data under a record
// a member or 'recover' wrote waits (TestInstalledRestoreDoesNotStartBesideAQuorum).
// Without the mark the documented restore never starts (integration
// TestSnapshotSaveAndRestore timed out with m0 waiting).
func TestRestoreByHandStartsBesideTheQuorumItReplaces(t *testing.T) {
	voter := func(name string) PeerStatus {
		return PeerStatus{Name: name, Token: "tok1", Epoch: 1, ClusterID: 0xc1, Running: true, Healthy: true, Revision: 150}
	}
	for _, byHand := range []bool{true, false} {
		rec := &Record{Token: "tok2", Epoch: 2, Seeder: "m0", Source: SnapshotSource("snap-1-100"), ByHand: byHand}
		o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, DesiredSize: 3, HoldsLock: true, RecoveryGrace: 1,
			Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: rec,
			Local:        Local{Cluster: "c", Name: "m0", Token: "tok2", Epoch: 2, Revision: 100, Unstarted: true},
			Peers:        []PeerStatus{voter("m1"), voter("m2")},
			MembersKnown: true, MembersClusterID: 0xc1, Members: []Member{{ID: 1, Name: "m0"}, {ID: 2, Name: "m1", Healthy: true}, {ID: 3, Name: "m2", Healthy: true}}}
		d := Plan(o)
		t.Logf("by hand %v: %s: %s", byHand, d.Kind, d.Reason)
		start := Decision{Kind: Rejoin, Name: "m0", Reason: "start the installed restore"}
		err := Check(o, start)
		if byHand {
			if d.Kind != Rejoin {
				t.Errorf("the restore written by hand does not start beside the quorum it replaces: %s: %s", d.Kind, d.Reason)
			}
			if err != nil {
				t.Errorf("the checker refuses starting the restore written by hand: %v", err)
			}
			continue
		}
		if d.Kind == Rejoin || err == nil {
			t.Errorf("an installed restore not written by hand starts beside the quorum (plan %s, checker %v)", d.Kind, err)
		}
	}
}
