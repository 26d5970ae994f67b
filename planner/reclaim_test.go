package planner

import (
	"reflect"
	"strings"
	"testing"
)

func TestMaintenance(t *testing.T) {
	const mib = 1 << 20
	sized := func(m Member, size, inUse int64) Member { m.DBSize, m.DBSizeInUse = size, inUse; return m }
	// m1 (id 2) leads; m0 and m2 follow.
	base := func() Observation {
		return Observation{ClusterName: "c", Self: Self{Name: "m1"}, Running: true, SelfID: 2, LeaderID: 2, HoldsLock: true, DesiredSize: 3,
			Instances: []Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, MembersKnown: true, MembersClusterID: 0xc1,
			Members: members(sized(voter(1, "m0", true), 16*mib, 15*mib), sized(voter(2, "m1", true), 16*mib, 15*mib), sized(voter(3, "m2", true), 16*mib, 15*mib)),
			Local:   Local{Cluster: "c", Name: "m1", MemberID: 2, ClusterID: 0xc1, Token: "t", Epoch: 1},
			Record:  &Record{ClusterID: 0xc1, Token: "t", Epoch: 1, Seeder: "m0"},
			Quota:   16 * mib, DefragRatio: 0.5, DefragMinSize: 8 * mib}
	}
	cases := []struct {
		name   string
		edit   func(*Observation)
		kind   Kind
		reason string
		check  func(Decision) bool
	}{
		{"nothing to do", func(o *Observation) {}, Wait, "nothing to do", nil},
		{"NOSPACE: compact, followers first, leader last, disarm", func(o *Observation) { o.NoSpace = true }, ReclaimSpace, "NOSPACE",
			func(d Decision) bool {
				return d.Compact && d.Disarm && reflect.DeepEqual(d.Defrag, []uint64{1, 3, 2}) && d.DisarmBelow == 15099494
			}},
		{"NOSPACE already below the mark: disarm only", func(o *Observation) {
			o.NoSpace = true
			for i := range o.Members {
				o.Members[i].DBSize = 4 * mib
			}
		}, ReclaimSpace, "disarming", func(d Decision) bool { return d.Disarm && !d.Compact && len(d.Defrag) == 0 }},
		{"NOSPACE without the lock", func(o *Observation) { o.NoSpace, o.HoldsLock = true, false }, Wait, "taking the lock", func(d Decision) bool { return d.NeedsLock }},
		{"NOSPACE, a member unhealthy", func(o *Observation) { o.NoSpace = true; o.Members[0].Healthy = false }, Wait, "m0 is unhealthy", func(d Decision) bool { return !d.NeedsLock }},
		{"NOSPACE, one voter short", func(o *Observation) { o.NoSpace = true; o.DesiredSize = 4 }, Wait, "3 of 4 voters", nil},
		{"NOSPACE on a follower", func(o *Observation) { o.NoSpace = true; o.LeaderID = 1 }, Wait, "nothing to do", nil},
		{"NOSPACE paused", func(o *Observation) { o.NoSpace = true; o.Paused = "paused by ops" }, Wait, "paused (", nil},
		{"fragmented follower", func(o *Observation) { o.Members[2] = sized(o.Members[2], 16*mib, 4*mib) }, ReclaimSpace, "fragmented: m2",
			func(d Decision) bool { return !d.Compact && !d.Disarm && reflect.DeepEqual(d.Defrag, []uint64{3}) }},
		{"fragmented but small", func(o *Observation) {
			o.Members[2] = sized(o.Members[2], 16*mib, 4*mib)
			o.DefragMinSize = 32 * mib
		}, Wait, "nothing to do", nil},
		{"fragmentation off", func(o *Observation) { o.Members[2] = sized(o.Members[2], 16*mib, 4*mib); o.DefragRatio = 0 }, Wait, "nothing to do", nil},
		{"fragmented while a learner catches up", func(o *Observation) {
			o.Members[2] = sized(o.Members[2], 16*mib, 4*mib)
			o.Members = append(o.Members, Member{ID: 9, Name: "m3", Learner: true, Healthy: true})
		}, Wait, "m3 is a learner", nil},
	}
	for _, c := range cases {
		o := base()
		c.edit(&o)
		d := unguarded.Plan(o)
		if d.Kind != c.kind || !strings.Contains(d.Reason, c.reason) || c.check != nil && !c.check(d) {
			t.Errorf("%s: got %s %+v (%s)", c.name, d.Kind, d, d.Reason)
		}
		if err := Check(o, d); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
