package planner

import (
	"strings"
	"testing"
	"time"
)

// liveMember is m1, a voter of the cluster that runs with a quorum (token
// tokA, epoch 2, cluster c1), under record rec; stopped, it holds that
// data without running.
func liveMember(rec *Record, running bool) Observation {
	o := Observation{
		ClusterName: "c", DesiredSize: 3, StaleAfter: 30 * time.Second, RecoveryGrace: 20 * time.Second,
		Self:      Self{Name: "m1", PeerURL: "https://m1:2380"},
		Instances: []Instance{{Name: "m1", PeerURL: "https://m1:2380"}, {Name: "m2", PeerURL: "https://m2:2380"}, {Name: "m3", PeerURL: "https://m3:2380"}},
		Local:     Local{Cluster: "c", Name: "m1", Token: "tokA", Epoch: 2, MemberID: 1, ClusterID: 0xc1, Revision: 500},
		Record:    rec,
		Peers: []PeerStatus{
			{Name: "m2", MemberID: 2, Token: "tokA", Epoch: 2, Running: true, Healthy: true, Revision: 500, ClusterID: 0xc1},
			{Name: "m3", MemberID: 3, Token: "tokA", Epoch: 2, Running: true, Healthy: true, Revision: 500, ClusterID: 0xc1},
		},
		MembersKnown: true, MembersClusterID: 0xc1, LeaderID: 2,
		Members: []Member{
			{ID: 1, Name: "m1", PeerURLs: []string{"https://m1:2380"}, Healthy: running},
			{ID: 2, Name: "m2", PeerURLs: []string{"https://m2:2380"}, Healthy: true},
			{ID: 3, Name: "m3", PeerURLs: []string{"https://m3:2380"}, Healthy: true},
		},
	}
	if running {
		o.Running, o.SelfID = true, 1
	}
	return o
}

// TestAdoptEpochOfTheRecordedLiveCluster: once an operator recorded the
// live cluster as a newer epoch (OperatorRecordLive), its members, running
// or stopped, adopt that epoch in their metadata, and once adopted go on
// as before (a healthy voter waits, a stopped one rejoins). Pinned on the
// planner without Check's refusal, so that each refusal below is the
// planner's own rule.
func TestAdoptEpochOfTheRecordedLiveCluster(t *testing.T) {
	rec := &Record{ClusterID: 0xc1, Token: "tokA", Epoch: 4, Seeder: "m2"}
	for _, running := range []bool{true, false} {
		o := liveMember(rec, running)
		d := unguarded.Plan(o)
		if d.Kind != AdoptEpoch || d.Record == nil || *d.Record != *rec || d.Name != "m1" {
			t.Fatalf("running %v: got %s (%s), want adopt-epoch of %+v", running, d.Kind, d.Reason, *rec)
		}
		if err := Check(o, d); err != nil {
			t.Fatalf("running %v: the checker refuses the adoption: %v", running, err)
		}
		// While paused too: a metadata write changes nothing else.
		o.Paused = "paused by ops"
		if d := unguarded.Plan(o); d.Kind != AdoptEpoch {
			t.Fatalf("running %v, paused: got %s (%s), want adopt-epoch", running, d.Kind, d.Reason)
		}
		o.Paused = ""
		o.Local.Epoch = 4
		for i := range o.Peers {
			o.Peers[i].Epoch = 4
		}
		want := Wait
		if !running {
			want = Rejoin
		}
		if d := unguarded.Plan(o); d.Kind != want {
			t.Fatalf("running %v, adopted: got %s (%s), want %s", running, d.Kind, d.Reason, want)
		}
	}
}

// TestAdoptEpochRefusals: never the epoch of a record that names another
// cluster id or token, an unconfirmed one, or one not newer than the data.
func TestAdoptEpochRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  Record
		// unknownID: the data's metadata names no cluster id (written
		// before etcd was ready), as an unconfirmed record names none.
		unknownID bool
	}{
		{"another cluster id", Record{ClusterID: 0xd2, Token: "tokA", Epoch: 4, Seeder: "m2"}, false},
		{"another token", Record{ClusterID: 0xc1, Token: "tokB", Epoch: 4, Seeder: "m2"}, false},
		{"unconfirmed", Record{Token: "tokA", Epoch: 4, Seeder: "m2"}, false},
		{"unconfirmed, over data naming no cluster id", Record{Token: "tokA", Epoch: 4, Seeder: "m2"}, true},
		{"an older epoch", Record{ClusterID: 0xc1, Token: "tokA", Epoch: 1, Seeder: "m2"}, false},
		{"the same epoch", Record{ClusterID: 0xc1, Token: "tokA", Epoch: 2, Seeder: "m2"}, false},
	} {
		for _, running := range []bool{true, false} {
			rec := tc.rec
			o := liveMember(&rec, running)
			if tc.unknownID {
				o.Local.ClusterID = 0
			}
			if d := unguarded.Plan(o); d.Kind == AdoptEpoch {
				t.Errorf("%s, running %v: adopted epoch %d (%s)", tc.name, running, rec.Epoch, d.Reason)
			}
			// The checker refuses it too, whoever decides it.
			d := Decision{Kind: AdoptEpoch, Name: "m1", Record: &rec}
			if err := Check(o, d); err == nil {
				t.Errorf("%s, running %v: the checker lets a member adopt epoch %d of %+v over data of token %s epoch %d cluster %x", tc.name, running, rec.Epoch, rec, o.Local.Token, o.Local.Epoch, o.Local.ClusterID)
			}
		}
	}
}

// recordLiveView is what 'etcd-nomad recover -record-live' sees in the
// case it exists for: Consul restored an unconfirmed record of epoch 3
// (tokB, seeded by m9, gone for good) while m1..m3 run tokA epoch 2
// (cluster c1) with a quorum; m4 is a fresh member with no data.
func recordLiveView() OperatorView {
	return OperatorView{
		Record: &Record{Token: "tokB", Epoch: 3, Seeder: "m9", Source: FromData, LastConfirmedToken: "tokA", LastConfirmedEpoch: 2},
		Answered: []PeerStatus{
			{Name: "m2", MemberID: 2, Token: "tokA", Epoch: 2, Running: true, Healthy: true, Revision: 500, ClusterID: 0xc1},
			{Name: "m1", MemberID: 1, Token: "tokA", Epoch: 2, Running: true, Healthy: true, Revision: 500, ClusterID: 0xc1},
			{Name: "m3", MemberID: 3, Token: "tokA", Epoch: 2, Running: false, Revision: 480, ClusterID: 0xc1},
			{Name: "m4"},
		},
		NewToken: "tokNew",
	}
}

func TestOperatorRecordLive(t *testing.T) {
	rec, err := OperatorRecordLive(recordLiveView())
	if err != nil {
		t.Fatal(err)
	}
	want := Record{ClusterID: 0xc1, Token: "tokA", Epoch: 4, Seeder: "m1"}
	if rec != want {
		t.Fatalf("got %+v, want %+v", rec, want)
	}
	// Epochs only grow: above every member's epoch too.
	v := recordLiveView()
	v.Answered[2].Epoch = 7
	if rec, err := OperatorRecordLive(v); err != nil || rec.Epoch != 8 {
		t.Fatalf("a member at epoch 7: got %+v, %v; want epoch 8", rec, err)
	}
	// The record it writes is one the members adopt (and the checker
	// lets them).
	o := liveMember(&rec, true)
	if d := Plan(o); d.Kind != AdoptEpoch {
		t.Fatalf("a member under the written record: got %s (%s), want adopt-epoch", d.Kind, d.Reason)
	}
}

// TestOperatorRecordLiveRefusals: each part of the fence refuses, and
// says why, naming the members.
func TestOperatorRecordLiveRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*OperatorView)
		want   string
	}{
		{"no record", func(v *OperatorView) { v.Record = nil }, "no cluster record"},
		{"a confirmed record", func(v *OperatorView) { v.Record.ClusterID = 0xd2 }, "the record is confirmed"},
		{"a silent instance", func(v *OperatorView) { v.Silent = []string{"m5"} }, "instance(s) m5 do not answer"},
		{"no quorum", func(v *OperatorView) {
			for i := range v.Answered {
				v.Answered[i].Healthy = false
			}
		}, "no member answers as a healthy voter"},
		{"a member of another token", func(v *OperatorView) {
			v.Answered[2].Token = "tokB"
		}, "member(s) m3 (token tokB epoch 2, cluster c1) hold data of another incarnation"},
		{"a member of another cluster id", func(v *OperatorView) {
			v.Answered[2].ClusterID = 0xd2
		}, "member(s) m3 (token tokA epoch 2, cluster d2) hold data of another incarnation"},
		{"a member of the record's epoch", func(v *OperatorView) {
			v.Answered[3] = PeerStatus{Name: "m4", Token: "tokB", Epoch: 3}
		}, "member(s) m4 (token tokB epoch 3, cluster 0) hold data of another incarnation"},
		{"the record names the live cluster", func(v *OperatorView) { v.Record.Token = "tokA" }, "already names the cluster that runs"},
	} {
		v := recordLiveView()
		tc.change(&v)
		rec, err := OperatorRecordLive(v)
		if err == nil {
			t.Errorf("%s: recorded %+v", tc.name, rec)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want it to say %q", tc.name, err, tc.want)
		}
	}
}
