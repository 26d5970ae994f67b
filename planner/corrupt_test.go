package planner

import (
	"reflect"
	"strings"
	"testing"
)

func TestCorrupt(t *testing.T) {
	// m1 (id 2) is this member; m0 (id 1) leads; m2 (id 3) follows.
	base := func() Observation {
		return Observation{ClusterName: "c", Self: Self{Name: "m1"}, Running: true, SelfID: 2, LeaderID: 1, HoldsLock: true, DesiredSize: 3,
			Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, MembersKnown: true, MembersClusterID: 0xc1,
			Members: members(voter(1, "m0", true), voter(2, "m1", true), voter(3, "m2", true)),
			Local:   Local{Cluster: "c", Name: "m1", MemberID: 2, ClusterID: 0xc1, Token: "t", Epoch: 1},
			Record:  &Record{ClusterID: 0xc1, Token: "t", Epoch: 1, Seeder: "m0"}}
	}
	alarmed := func(o *Observation) {
		o.Corrupt, o.CorruptAlarms = "etcd's CORRUPT alarm names this member", []uint64{2}
	}
	stopped := func(o *Observation) {
		o.Running, o.SelfID, o.Members[1].Healthy = false, 0, false
		o.Corrupt = "start failed etcd's initial check: found data inconsistency with peers"
	}
	cases := []struct {
		name   string
		edit   func(*Observation)
		kind   Kind
		reason string
		check  func(Decision) bool
	}{
		{"healthy", func(o *Observation) {}, Wait, "nothing to do", nil},
		{"alarm names this member", alarmed, SetAside, "2 healthy voter(s) hold good copies", nil},
		{"alarm, no lock needed", func(o *Observation) { alarmed(o); o.HoldsLock = false }, SetAside, "found corrupt", nil},
		{"alarm, another voter down: the quorum would go", func(o *Observation) { alarmed(o); o.Members[2].Healthy = false }, Wait, "only 1 healthy voter(s)", nil},
		{"alarm, one member cluster: the last copy", func(o *Observation) {
			alarmed(o)
			o.Members, o.DesiredSize = o.Members[1:2], 1
		}, Wait, "below the quorum 1 of 1", nil},
		{"alarms name both followers (the leader's data differs)", func(o *Observation) {
			alarmed(o)
			o.CorruptAlarms = []uint64{2, 3}
		}, Wait, "only 1 healthy voter(s)", nil},
		{"five voters, two accused", func(o *Observation) {
			alarmed(o)
			o.Members = append(o.Members, voter(4, "m3", true), voter(5, "m4", true))
			o.CorruptAlarms = []uint64{2, 5}
		}, SetAside, "3 healthy voter(s)", nil},
		{"alarm, no member list", func(o *Observation) { alarmed(o); o.MembersKnown = false }, Wait, "member list unreachable", nil},
		{"alarm, paused", func(o *Observation) { alarmed(o); o.Paused = "paused by ops" }, Wait, "paused (", nil},
		{"initial check failed", stopped, SetAside, "initial check", nil},
		{"initial check failed, then the quorum went: start it", func(o *Observation) { stopped(o); o.MembersKnown = false }, Rejoin, "", nil},
		{"initial check failed, another voter down", func(o *Observation) { stopped(o); o.Members[0].Healthy = false }, Wait, "only 1 healthy voter(s)", nil},
		{"initial check failed, record of another epoch", func(o *Observation) {
			stopped(o)
			o.Record = &Record{ClusterID: 0xc1, Token: "u", Epoch: 2, Seeder: "m0"}
		}, Wait, "", func(d Decision) bool { return !strings.Contains(d.Reason, "corrupt") }},
		{"leader disarms a removed member's alarm", func(o *Observation) { o.LeaderID, o.CorruptAlarms = 2, []uint64{7} }, DisarmCorrupt, "no longer in the membership",
			func(d Decision) bool { return reflect.DeepEqual(d.Alarms, []uint64{7}) }},
		{"leader keeps the alarm of no majority (member 0)", func(o *Observation) { o.LeaderID, o.CorruptAlarms = 2, []uint64{0} }, Wait, "nothing to do", nil},
		{"leader keeps a present member's alarm", func(o *Observation) { o.LeaderID, o.CorruptAlarms = 2, []uint64{3} }, Wait, "nothing to do", nil},
		{"a follower leaves alarms to the leader", func(o *Observation) { o.CorruptAlarms = []uint64{7} }, Wait, "nothing to do", nil},
	}
	for _, c := range cases {
		o := base()
		c.edit(&o)
		d := Plan(o)
		if d.Kind != c.kind || !strings.Contains(d.Reason, c.reason) || c.check != nil && !c.check(d) {
			t.Errorf("%s: got %s %+v (%s)", c.name, d.Kind, d, d.Reason)
		}
		if err := Check(o, d); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// The checker catches the planner that sets the last good copy aside.
	o := base()
	alarmed(&o)
	o.Members[2].Healthy = false
	if err := Check(o, Faults{SetAsideLastGood: true}.Plan(o)); err == nil {
		t.Error("the checker let the last good copy be set aside")
	}
}
