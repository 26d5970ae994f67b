package planner

import (
	"strings"
	"testing"
)

// Sim seed 41704 (two live clusters at step 1492): m1-2 rejoined epoch 2
// (step 1350) and its Nomad client was disconnected (1368): every
// observation failed ("list instances: nomad unreachable"), and m2-3,
// an epoch-2 voter Nomad collected while it ran (1100), had failed since
// 1108; a partition (1318) hid m2-3 from the rest. m0-3 recovered epoch 3
// (1441) and confirmed it (1450); the partition healed (1492) and m2-3
// with m1-2 gave epoch 2 its quorum back beside epoch 3. The observation
// is what m1-2 reads after step 1450 without the provider: its data, its
// server (no quorum), the record.
func TestABlindMemberStopsOnceARecoveryReplacedItsEpoch(t *testing.T) {
	seed := func() Observation {
		return Observation{ClusterName: "c", Self: Self{Name: "m1-2"}, Running: true, SelfID: 0x324,
			Local:  Local{Cluster: "c", Name: "m1-2", Token: "tok773", Epoch: 2, ClusterID: 0x30b, MemberID: 0x324, Revision: 1000278},
			Record: &Record{ClusterID: 0x46f, Token: "tok1130", Epoch: 3, Seeder: "m0-3", Source: "snapshot:snap-1065"},
		}
	}
	o := seed()
	if d := PlanUnobserved(o); d.Kind != StopSuperseded || !strings.Contains(d.Reason, "epoch 3") {
		t.Fatalf("blind, no quorum, epoch 3 confirmed: %s (%s), want %s", d.Kind, d.Reason, StopSuperseded)
	}
	if d := (Faults{RunBlindBesideNewerEpoch: true}).PlanUnobserved(o); d.Kind != Wait {
		t.Fatalf("with RunBlindBesideNewerEpoch: %s (%s), want a wait", d.Kind, d.Reason)
	}

	for _, c := range []struct {
		why    string
		change func(*Observation)
	}{
		// A recovery recorded, not confirmed, may never start (its
		// seeder lost, Consul restored its record, 'recover
		// -keep-running' abandoned it): the old incarnation may be the
		// one that comes back.
		{"the newer epoch is not confirmed", func(o *Observation) { o.Record.ClusterID = 0 }},
		// Its own recovery, recorded: resumeRecovery restarts it as the
		// new epoch once the provider answers.
		{"this member recorded the newer epoch", func(o *Observation) { o.Record.Seeder = "m1-2" }},
		// With a quorum the old incarnation serves: a record alone does
		// not stop a serving quorum (settles decides once the provider
		// answers).
		{"its incarnation has a quorum", func(o *Observation) { o.MembersKnown = true }},
		// Consul restored an older record, or the record is its own.
		{"the record names an older epoch", func(o *Observation) {
			o.Record = &Record{ClusterID: 0x17, Token: "tok19", Epoch: 1, Seeder: "m0-0"}
		}},
		{"the record names its own epoch", func(o *Observation) {
			o.Record = &Record{ClusterID: 0x30b, Token: "tok773", Epoch: 2, Seeder: "m0-2", HighestEpoch: 3}
		}},
		{"no record", func(o *Observation) { o.Record = nil }},
		{"no metadata", func(o *Observation) { o.Local.Token = "" }},
		{"not running", func(o *Observation) { o.Running = false }},
		// Review rev18g R4: an operator's pause holds every stop back.
		{"paused", func(o *Observation) { o.Paused = "by ops: maintenance" }},
	} {
		o := seed()
		c.change(&o)
		if d := PlanUnobserved(o); d.Kind != Wait {
			t.Errorf("%s: %s (%s), want a wait", c.why, d.Kind, d.Reason)
		}
	}
}
