package planner

import "testing"

// A SetAside names why in a typed field (the set-aside folder's tag), not
// only in its prose.
func TestSetAsideSaysWhy(t *testing.T) {
	base := func() Observation {
		return Observation{ClusterName: "c", Self: Self{Name: "m0"}, Instances: []Instance{{Name: "m0"}}}
	}
	for name, c := range map[string]struct {
		change func(*Observation)
		want   AsideReason
	}{
		"unreadable":       {func(o *Observation) { o.Local.Unreadable = "bad json" }, AsideUnreadable},
		"another cluster":  {func(o *Observation) { o.Local = Local{Cluster: "other", Token: "t", Epoch: 1} }, AsideForeign},
		"without metadata": {func(o *Observation) { o.Local = Local{} }, AsideForeign},
		"removed while running": {func(o *Observation) {
			o.Local = Local{Cluster: "c", Token: "t", Epoch: 1, MemberID: 5, ClusterID: 9}
			o.Record = &Record{ClusterID: 9, Token: "t", Epoch: 1, Seeder: "m0"}
			o.Running, o.SelfID, o.MembersKnown, o.MembersClusterID = true, 5, true, 9
			o.Members = []Member{{ID: 6, Name: "m1", Healthy: true}}
		}, AsideRemoved},
	} {
		o := base()
		c.change(&o)
		if d := Plan(o); d.Kind != SetAside || d.Aside != c.want {
			t.Errorf("%s: %s (aside %q: %s), want a set-aside tagged %q", name, d.Kind, d.Aside, d.Reason, c.want)
		}
	}
}
