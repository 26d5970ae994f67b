package task

import (
	"fmt"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Review rev15-sim R3: a healthy member remembers every listed peer that
// answered as a healthy voter (rememberListedVoters), and only
// observeKnownHealthy (quorum lost) ever prunes known.seen. Nomad names
// a member after its allocation id, so every replacement (each rolling
// deploy) adds a name that is never removed while the cluster is
// healthy; shareFound caps /status's found voters at 16 before
// foundVoters drops the lapsed ones, so 16 lapsed names that sort first
// hide a voter found a moment ago from the peers.
func TestLapsedListedVotersDoNotCrowdOutAFreshFind(t *testing.T) {
	k := newKit(t, "m1")
	const grace = 30 * time.Second
	k.cl.RecoveryGrace = grace
	m1 := k.member("m1", nil)
	o := planner.Observation{Record: &planner.Record{ClusterID: 0xa, Token: "t", Epoch: 1}, Local: planner.Local{ClusterID: 0xa, Token: "t", Epoch: 1}, MembersKnown: true}
	t0 := time.Now()
	for i := 0; i < 6; i++ { // six rolling deploys of a three-member cluster
		var vs []listedVoter
		for j := 0; j < 3; j++ {
			vs = append(vs, listedVoter{name: fmt.Sprintf("a%02d-%d", i, j), clientURL: fmt.Sprintf("http://127.0.0.1:%d", 1000+i*3+j), clusterID: 0xa, token: "t"})
		}
		m1.known.listedVoters = vs
		m1.rememberListedVoters(&o, t0.Add(time.Duration(i)*time.Hour))
	}
	now := t0.Add(7 * time.Hour)
	m1.known.listedVoters = []listedVoter{{name: "zz", clientURL: "http://127.0.0.1:2000", clusterID: 0xa, token: "t"}}
	m1.rememberListedVoters(&o, now)
	t.Logf("known.seen holds %d entries", len(m1.known.seen))
	found := m1.foundVoters(m1.known.found, now)
	for _, f := range found {
		if f.Name == "zz" {
			return
		}
	}
	t.Fatalf("found voters %+v: the voter that answered just now is not shared (%d lapsed entries kept)", found, len(m1.known.seen)-1)
}
