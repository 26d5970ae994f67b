package planner

import (
	"strings"
	"testing"
)

// While an outside cluster is migrated in (the record lists its client
// URLs: Record.Migrating), its healthy members, which no instance lists,
// hold no slot: an empty member joins beside them as a learner. An unhealthy unlisted voter still holds its
// slot, and without the migration a full cluster makes a joiner wait for
// a stale member's removal, as before.
func TestMigratingJoinsBesideOutsideMembers(t *testing.T) {
	outside := []Member{
		{ID: 0xa1, Name: "old0", PeerURLs: []string{"http://10.0.0.1:2380"}, Healthy: true},
		{ID: 0xa2, Name: "old1", PeerURLs: []string{"http://10.0.0.2:2380"}, Healthy: true},
		{ID: 0xa3, Name: "old2", PeerURLs: []string{"http://10.0.0.3:2380"}, Healthy: true},
	}
	obs := func(migrating bool, members []Member) Observation {
		var join []string
		if migrating {
			join = []string{"http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379"}
		}
		return Observation{ClusterName: "c", Self: Self{Name: "m0", PeerURL: "http://10.0.1.1:2380"}, DesiredSize: 3, HoldsLock: true,
			Instances: []Instance{{Name: "m0", PeerURL: "http://10.0.1.1:2380"}, {Name: "m1", PeerURL: "http://10.0.1.2:2380"}, {Name: "m2", PeerURL: "http://10.0.1.3:2380"}},
			Record:    &Record{ClusterID: 0xc1, Token: "t", Epoch: 1, Seeder: "migrate", Join: join},
			Local:     Local{Empty: true}, MembersKnown: true, MembersClusterID: 0xc1, LeaderID: 0xa1, Members: members,
			Peers: []PeerStatus{{Name: "m1"}, {Name: "m2"}}}
	}
	if d := Plan(obs(true, outside)); d.Kind != JoinAsLearner {
		t.Fatalf("migrating, three healthy outside members: %s (%s), want join-as-learner", d.Kind, d.Reason)
	}
	if d := Plan(obs(false, outside)); d.Kind != Wait || !strings.Contains(d.Reason, "3 of 3 voters") {
		t.Fatalf("not migrating, three unlisted voters: %s (%s), want a wait for a stale member's removal", d.Kind, d.Reason)
	}
	sick := append([]Member(nil), outside...)
	sick[1].Healthy, sick[2].Healthy = false, false
	sick = append(sick, Member{ID: 0xb1, Name: "m1", PeerURLs: []string{"http://10.0.1.2:2380"}, Healthy: true})
	if d := Plan(obs(true, sick)); d.Kind != Wait || !strings.Contains(d.Reason, "3 of 3 voters") {
		t.Fatalf("migrating, two unhealthy outside members beside a listed voter: %s (%s), want a wait", d.Kind, d.Reason)
	}
}
