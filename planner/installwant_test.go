package planner

import "testing"

func TestInstallWant(t *testing.T) {
	o := Observation{
		Local:          Local{Token: "a", Revision: 40},
		Peers:          []PeerStatus{{Token: "a", Revision: 55}, {Revision: 99}},
		LatestSnapshot: &SnapshotInfo{Name: "s1", Revision: 70},
	}
	d := Decision{Kind: RecoverQuorum, From: FromSnapshot, Snapshot: "s1", Record: &Record{Token: "new"}}
	cases := []struct {
		name string
		d    Decision
		cur  *Record
		want int64
	}{
		{"new recovery: the chain end the planner compared", d, &Record{Token: "old"}, 70},
		{"restore with no record: the chain end", d, nil, 70},
		{"resumed recovery: every member's data it sets aside", d, &Record{Token: "new"}, 55},
		{"operator's restore: what its command verified", d, &Record{Token: "new", Operator: true, SourceRevision: 64}, 64},
		{"another snapshot than the newest, recorded by an operator", Decision{Snapshot: "s0", Record: &Record{Token: "new"}}, &Record{Token: "new", Operator: true}, 0},
	}
	for _, c := range cases {
		if got := InstallWant(o, c.d, c.cur); got != c.want {
			t.Errorf("%s: InstallWant = %d, want %d", c.name, got, c.want)
		}
	}
}
