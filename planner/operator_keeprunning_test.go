package planner

import (
	"reflect"
	"strings"
	"testing"
)

// Review of the operator model (session 13, F4): a cluster that runs with
// a quorum beside an unconfirmed record of another incarnation (Consul
// brought a restore record back, or an operator's restore was recorded
// while the old cluster regained its quorum) waits for good: its members
// keep their data (invariant 9), the record's seeder never starts beside
// a quorum (invariant 10), and 'recover' refuses beside a quorum. 'recover
// -keep-running' records the running cluster in its place, only while a
// quorum of the instances answers as its healthy voters.
func TestKeepRunningRecordsTheClusterAQuorumAnswersFor(t *testing.T) {
	restore := &Record{Token: "tokR", Epoch: 4, Seeder: "m0", Source: SnapshotSource("s3"), LastConfirmedToken: "tok3", LastConfirmedEpoch: 3, Operator: true,
		SourceRevision: 280, Accepted: []AcceptedLine{{Epoch: 3, Revision: 280}, {Token: "tok3", Epoch: 3, Revision: 300}}, AcceptedRevision: 280}
	voter := func(name string, healthy bool) PeerStatus {
		return PeerStatus{Name: name, Token: "tok3", Epoch: 3, ClusterID: 0xc3, Running: true, Healthy: healthy, Revision: 400}
	}
	v := OperatorView{Record: restore, Answered: []PeerStatus{voter("m0", true), voter("m1", true), voter("m2", false)}}
	got, err := OperatorKeepRunning(v)
	if err != nil {
		t.Fatalf("two of three healthy voters of tok3 beside the unconfirmed restore record: %v", err)
	}
	if want := (Record{ClusterID: 0xc3, Token: "tok3", Epoch: 3, Seeder: "m0", HighestEpoch: 4}); !reflect.DeepEqual(got, want) {
		t.Fatalf("record: %+v, want %+v", got, want)
	}
	// Members under it run on: nothing is set aside, nothing waits.
	o := Observation{ClusterName: "c", Self: Self{Name: "m0"}, Running: true, SelfID: 1, MembersKnown: true, MembersClusterID: 0xc3, LeaderID: 1, DesiredSize: 3,
		Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: &got,
		Local:   Local{Cluster: "c", Name: "m0", Token: "tok3", Epoch: 3, MemberID: 1, ClusterID: 0xc3, Revision: 400},
		Members: []Member{{ID: 1, Name: "m0", Healthy: true}, {ID: 2, Name: "m1", Healthy: true}, {ID: 3, Name: "m2", Healthy: true}},
		Peers:   []PeerStatus{voter("m1", true), voter("m2", true)}}
	if d := Plan(o); d.Kind != Wait || d.AwaitsOperator {
		t.Fatalf("the leader under the kept record: %s (%s)", d.Kind, d.Reason)
	}
	// Before it, the wait names the command.
	o.Record = restore
	if d := Plan(o); d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "recover -keep-running") {
		t.Fatalf("the restore's seeder serving tok3 with a quorum: %s (%s); want a wait for the operator naming recover -keep-running", d.Kind, d.Reason)
	}
	o.Self.Name, o.Local.Name, o.SelfID, o.Peers = "m1", "m1", 2, []PeerStatus{voter("m0", true), voter("m2", true)}
	if d := Plan(o); d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "recover -keep-running") {
		t.Fatalf("a member beside the seeder serving tok3: %s (%s); want a wait for the operator naming recover -keep-running", d.Kind, d.Reason)
	}

	for _, c := range []struct {
		what string
		v    OperatorView
		want string
	}{
		{"no quorum", OperatorView{Record: restore, Answered: []PeerStatus{voter("m0", true), voter("m1", false), voter("m2", false)}}, "no quorum of a running cluster answers (1 of 3"},
		{"a silent instance counts", OperatorView{Record: restore, Answered: []PeerStatus{voter("m0", true), voter("m1", false)}, Silent: []string{"m2"}}, "no quorum"},
		{"silent beside a quorum", OperatorView{Record: restore, Answered: []PeerStatus{voter("m0", true), voter("m1", true)}, Silent: []string{"m2"}}, "m2 do not answer"},
		{"two incarnations healthy", OperatorView{Record: restore, Answered: []PeerStatus{voter("m0", true), voter("m1", true), {Name: "m2", Token: "tokX", Epoch: 3, ClusterID: 0xc9, Healthy: true}}}, "2 incarnations"},
		{"the record's incarnation started", OperatorView{Record: restore, Answered: []PeerStatus{voter("m0", true), voter("m1", true), {Name: "m2", Token: "tokR", Epoch: 4, Revision: 281}}}, "m2 holds data of the recorded epoch 4"},
		{"newer data", OperatorView{Record: restore, Answered: []PeerStatus{voter("m0", true), voter("m1", true), {Name: "m2", Token: "tokY", Epoch: 5, Revision: 9}}}, "newer than the running cluster's epoch 3"},
		{"confirmed record", OperatorView{Record: &Record{ClusterID: 0xc5, Token: "tok5", Epoch: 5, Seeder: "m2"}, Answered: []PeerStatus{voter("m0", true), voter("m1", true), voter("m2", true)}}, "confirmed"},
		{"already recorded", OperatorView{Record: &Record{Token: "tok3", Epoch: 3, Seeder: "m0"}, Answered: []PeerStatus{voter("m0", true), voter("m1", true), voter("m2", true)}}, "already names the running cluster"},
		{"no record", OperatorView{Answered: []PeerStatus{voter("m0", true)}}, "no cluster record"},
	} {
		if rec, err := OperatorKeepRunning(c.v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %+v, %v; want a refusal containing %q", c.what, rec, err, c.want)
		}
	}
	// The broken fence records a cluster one healthy voter answers for.
	if _, err := (Faults{KeepWithoutQuorum: true}).OperatorKeepRunning(OperatorView{Record: restore, Answered: []PeerStatus{voter("m0", true), voter("m1", false), voter("m2", false)}}); err != nil {
		t.Fatalf("with KeepWithoutQuorum: %v; want the record written", err)
	}
}
