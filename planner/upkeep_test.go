package planner

import "testing"

// leaderView is a running leader of the confirmed incarnation the record
// names, with a healthy quorum, every upkeep job configured and due.
func leaderView() Observation {
	return Observation{
		Running: true, MembersKnown: true, SelfID: 1, LeaderID: 1,
		Local:   Local{Token: "tokA", Epoch: 2},
		Record:  &Record{ClusterID: 9, Token: "tokA", Epoch: 2, Seeder: "m0"},
		Members: []Member{{ID: 1, Name: "m0", Healthy: true}, {ID: 2, Name: "m1", Healthy: true}, {ID: 3, Name: "m2"}},
		Upkeep: UpkeepState{CA: true, CACheckDue: true, Summary: true, Access: true, AccessDue: true, CACertDue: true,
			Snapshots: true, SnapshotDue: true, Deltas: true, PruneDue: true},
	}
}

func TestPlanUpkeepOfALeader(t *testing.T) {
	want := Upkeep{CheckCA: true, ClearForceNew: true, PublishSummary: true, ReconcileAccess: true, PublishCACert: true,
		Snapshot: true, RecordDeltas: true, PruneAsides: true}
	if u := PlanUpkeep(leaderView()); u != want {
		t.Fatalf("upkeep of a leader with everything due:\n got %+v\nwant %+v", u, want)
	}
	for name, c := range map[string]struct {
		change func(*Observation)
		want   Upkeep
	}{
		"a follower": {func(o *Observation) { o.LeaderID = 2 },
			Upkeep{CheckCA: true, ClearForceNew: true, PruneAsides: true}},
		"stopped": {func(o *Observation) { o.Running, o.MembersKnown = false, false },
			Upkeep{}},
		"nothing due": {func(o *Observation) {
			o.Upkeep = UpkeepState{CA: true, Summary: true, Access: true, Snapshots: true, Deltas: true}
		},
			Upkeep{ClearForceNew: true, PublishSummary: true, RecordDeltas: true}},
		// Consul lost its state: the CA and its certificate go back at
		// once, due or not; nothing summarises a cluster without a record.
		"record gone, nothing due": {func(o *Observation) {
			o.Record = nil
			o.Upkeep = UpkeepState{CA: true, Summary: true, Access: true}
		}, Upkeep{CheckCA: true, ClearForceNew: true, PublishCACert: true}},
		"member list unknown": {func(o *Observation) { o.MembersKnown = false },
			Upkeep{CheckCA: true, ClearForceNew: true, PublishCACert: true}},
		"a full snapshot first": {func(o *Observation) { o.Upkeep.WantFullSnapshot = true },
			Upkeep{CheckCA: true, ClearForceNew: true, PublishSummary: true, ReconcileAccess: true, PublishCACert: true, Snapshot: true, PruneAsides: true}},
		"leaving": {func(o *Observation) { o.Upkeep = UpkeepState{Leaving: true} },
			Upkeep{Depart: true, ClearForceNew: true}},
		"plain TLS off, nothing configured": {func(o *Observation) { o.Upkeep = UpkeepState{} },
			Upkeep{ClearForceNew: true}},
	} {
		o := leaderView()
		c.change(&o)
		if u := PlanUpkeep(o); u != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", name, u, c.want)
		}
	}
}

// Invariant 7: set-aside data is pruned only by a healthy voter of the
// confirmed incarnation the record names, with a healthy quorum.
func TestPruneOnlyFromAHealthyVoterOfTheRecord(t *testing.T) {
	if !PlanUpkeep(leaderView()).PruneAsides {
		t.Fatal("a healthy voter of the confirmed record may not prune")
	}
	for name, broken := range map[string]func(*Observation){
		"not due":             func(o *Observation) { o.Upkeep.PruneDue = false },
		"record unconfirmed":  func(o *Observation) { o.Record.ClusterID = 0 },
		"another epoch":       func(o *Observation) { o.Record.Epoch++ },
		"no record":           func(o *Observation) { o.Record = nil },
		"self a learner":      func(o *Observation) { o.Members[0].Learner = true },
		"self unhealthy":      func(o *Observation) { o.Members[0].Healthy = false },
		"no healthy quorum":   func(o *Observation) { o.Members[1].Healthy = false },
		"not running":         func(o *Observation) { o.Running = false },
		"member list unknown": func(o *Observation) { o.MembersKnown = false },
	} {
		o := leaderView()
		broken(&o)
		if PlanUpkeep(o).PruneAsides {
			t.Errorf("%s: pruning allowed", name)
		}
	}
}
