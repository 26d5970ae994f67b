package planner

import (
	"strings"
	"testing"
	"time"
)

// Review rev18f F4: sim seed 16514's shape (epoch 2 recovered from
// m0-1's epoch-1 data and snapshotted; m0-1 gone) with Consul having lost
// its state and the snapshot store's listing down: LineEpoch is unknown,
// and m1-1's epoch-1 data started to re-record epoch 1, below the newer
// line. It waits for the listing instead (the store answering ends the
// wait: then supersededWithoutRecord or the rejoin decides), and once the
// record has been missing for the grace an operator is paged with the way
// out. Within the grace, with a member of the data's membership answering,
// or with the data's cluster answering, nothing pages anyone.
func TestDataReRecordingItsEpochWaitsForTheListing(t *testing.T) {
	seed := func() Observation {
		return Observation{ClusterName: "c", Self: Self{Name: "m1-1"}, NewToken: "n", DesiredSize: 3,
			RecoveryGrace: 20 * time.Second, RecordMissingFor: 41 * time.Second,
			Local:             Local{Cluster: "c", Name: "m1-1", Token: "tok20", Epoch: 1, ClusterID: 0x18, MemberID: 0x139, Revision: 177},
			Instances:         []Instance{{Name: "m2-0"}, {Name: "m1-1"}, {Name: "m0-2"}},
			Peers:             []PeerStatus{{Name: "m2-0", MemberID: 0x17, Token: "tok20", Epoch: 1, ClusterID: 0x18, Revision: 173}, {Name: "m0-2"}},
			ListingUnanswered: "list snapshots: 503 Service Unavailable"}
	}
	o := seed()
	d := Plan(o)
	if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "listing") || !strings.Contains(d.Reason, "etcd-nomad ") {
		t.Fatalf("no record, the listing down past the grace: %s (operator %v: %s), want a wait for an operator naming the way out", d.Kind, d.AwaitsOperator, d.Reason)
	}
	if bad := (Faults{RejoinLineUnknown: true}).Plan(o); bad.Kind != Rejoin || Check(o, bad) == nil {
		t.Fatalf("RejoinLineUnknown: %s, Check %v; want a rejoin that Check refuses", bad.Kind, Check(o, bad))
	}
	o.RecordMissingFor = 5 * time.Second
	if d := Plan(o); d.Kind != Wait || d.AwaitsOperator {
		t.Fatalf("within the grace: %s (operator %v: %s), want a plain wait", d.Kind, d.AwaitsOperator, d.Reason)
	}
	o = seed()
	o.KnownHealthy = []string{"m0-1"}
	if d := Plan(o); d.Kind != Wait || d.AwaitsOperator || !strings.Contains(d.Reason, "m0-1") {
		t.Fatalf("m0-1 answering: %s (operator %v: %s), want a plain wait for it", d.Kind, d.AwaitsOperator, d.Reason)
	}

	// The same under an older record Consul restored (epoch 1 named,
	// this data of epoch 2): "epochs only grow" would start it.
	o = seed()
	o.RecordMissingFor, o.QuorumLostFor = 0, 41*time.Second
	o.Local.Epoch, o.Local.Token = 2, "tok30"
	o.Peers[0].Epoch, o.Peers[0].Token = 2, "tok30"
	o.Record = &Record{ClusterID: 0x18, Token: "tok20", Epoch: 1, Seeder: "m2-0"}
	d = Plan(o)
	if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "etcd-nomad recover -from m1-1 -accept-data-loss") {
		t.Fatalf("an older record, the listing down past the grace: %s (operator %v: %s), want a wait for an operator", d.Kind, d.AwaitsOperator, d.Reason)
	}
	if bad := (Faults{RejoinLineUnknown: true}).Plan(o); bad.Kind != Rejoin || Check(o, bad) == nil {
		t.Fatalf("RejoinLineUnknown under an older record: %s, Check %v; want a rejoin that Check refuses", bad.Kind, Check(o, bad))
	}

	// What does not wait: the listing answers (as before), the data's
	// cluster answers with a quorum (it serves; a restarted member joins
	// it), a line epoch remembered from an earlier listing (the
	// superseded-line rules decide, as with the listing up).
	for _, tc := range []struct {
		name string
		edit func(*Observation)
		want Kind
	}{
		{"the listing answers", func(o *Observation) { o.ListingUnanswered = "" }, Rejoin},
		{"the data's cluster answers", func(o *Observation) {
			o.MembersKnown, o.MembersClusterID = true, 0x18
			o.Members = []Member{{ID: 0x17, Name: "m2-0", Healthy: true}, {ID: 0x139, Name: "m1-1"}}
		}, Rejoin},
	} {
		o := seed()
		tc.edit(&o)
		if d := Plan(o); d.Kind != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, d.Kind, d.Reason, tc.want)
		}
	}
	o = seed()
	o.LineEpoch = 2
	if d := Plan(o); d.Kind != Wait || !strings.Contains(d.Reason, "epoch 2") {
		t.Errorf("a line epoch remembered from the last listing: %s (%s), want the superseded line's wait", d.Kind, d.Reason)
	}
}

// The limit of the rule above, pinned: a cluster whose members all
// restart under the record that names their incarnation (a host reboot,
// a job restart) starts while the store's listing is down. Waiting there
// would keep every healthy cluster down for as long as its store is, for
// a record Consul restored under a forked line that nothing here can
// tell apart from the current one (review rev18f F4; the superseded line
// is caught there only by a line epoch the member remembers from an
// earlier listing).
func TestAFullRestartUnderItsRecordStartsWhileTheStoreIsDown(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m1-1"}, NewToken: "n", DesiredSize: 3,
		RecoveryGrace: 20 * time.Second, QuorumLostFor: 3 * time.Second,
		Local:             Local{Cluster: "c", Name: "m1-1", Token: "tok20", Epoch: 1, ClusterID: 0x18, MemberID: 0x139, Revision: 177},
		Record:            &Record{ClusterID: 0x18, Token: "tok20", Epoch: 1, Seeder: "m2-0"},
		Instances:         []Instance{{Name: "m2-0"}, {Name: "m1-1"}, {Name: "m0-1"}},
		Peers:             []PeerStatus{{Name: "m2-0", MemberID: 0x17, Token: "tok20", Epoch: 1, ClusterID: 0x18, Revision: 173}, {Name: "m0-1", MemberID: 0x19, Token: "tok20", Epoch: 1, ClusterID: 0x18, Revision: 177}},
		ListingUnanswered: "list snapshots: dial tcp: i/o timeout"}
	if d := Plan(o); d.Kind != Rejoin {
		t.Fatalf("a full restart under the record, the store down: %s (%s), want the rejoin", d.Kind, d.Reason)
	}
}
