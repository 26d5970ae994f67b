package task

import (
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Sim seed 1004733 with CollectRunning: m2-3 found m0-2, listed, serving
// cluster 465 (epoch 3) as the record named it. Consul lost its state and
// m2-3, finding m0-2 again without a record, remembered it as a word (a
// peer's); its peers' words for m0-2 replaced its own find too. Nomad
// collected m0-2 while it served, then Consul restored an older record
// (epoch 2, cluster 2f5): narrowPeersWord stopped every answer from
// extending the word, every member dropped m0-2 one grace later, and the
// replacement m0-3 recovered epoch 3 again beside it. A voter this member
// found for a cluster it knew stays its own find: neither a find without
// a record nor a peer's later word makes it a word.
func TestAFirstHandVoterStaysFirstHandWithoutARecord(t *testing.T) {
	k := newKit(t, "m1")
	m1 := k.member("m1", nil)
	now := time.Now()
	url := "http://127.0.0.1:1"
	m1.known.listedVoters = []listedVoter{{name: "m0", clientURL: url, clusterID: 0x465, token: "tok1113"}}
	m1.rememberListedVoters(&planner.Observation{Record: &planner.Record{ClusterID: 0x465, Token: "tok1113", Epoch: 3}, Local: planner.Local{Empty: true}}, now)
	if e := m1.known.seen["m0"]; e.probe.peers {
		t.Fatalf("found under the record naming its cluster: %+v, want its own find", e)
	}
	// Consul lost its state: m0 answers again, listed, without a record.
	m1.rememberListedVoters(&planner.Observation{Local: planner.Local{Empty: true}}, now.Add(time.Second))
	if e := m1.known.seen["m0"]; e.probe.peers || !e.at.Equal(now.Add(time.Second)) {
		t.Fatalf("found again without a record: %+v, want its own find, at the new answer", e)
	}
	// A peer names m0 for cluster 465 with a later answer.
	m1.takeFoundVoters([]status.FoundVoter{{Name: "m0", ClientURLs: []string{url}, ClusterIDs: []uint64{0x465}, Leader: true, AgoMillis: 0}}, now.Add(2*time.Second))
	e := m1.known.seen["m0"]
	if e.probe.peers || !e.at.Equal(now.Add(2*time.Second)) {
		t.Fatalf("after a peer's later word: %+v, want its own find with the word's time", e)
	}
	// Consul restores an older record (another cluster id): its own find
	// is not narrowed as a word.
	m1.narrowPeersWord(&planner.Observation{Record: &planner.Record{ClusterID: 0x2f5, Token: "tok752", Epoch: 2}, Local: planner.Local{Empty: true}}, []uint64{0x2f5})
	if e := m1.known.seen["m0"]; e.probe.unknown || e.probe.peers {
		t.Fatalf("under the older record Consul restored: %+v, want its own find, not a word of an unknown cluster", e)
	}
}
