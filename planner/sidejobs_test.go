package planner

import "testing"

// leaderView is a running leader of the confirmed incarnation the record
// names, with a healthy quorum, every side job configured and due.
func leaderView() Observation {
	return Observation{
		Running: true, MembersKnown: true, SelfID: 1, LeaderID: 1,
		Local:   Local{Token: "tokA", Epoch: 2, ClusterID: 9},
		Record:  &Record{ClusterID: 9, Token: "tokA", Epoch: 2, Seeder: "m0"},
		Members: []Member{{ID: 1, Name: "m0", Healthy: true}, {ID: 2, Name: "m1", Healthy: true}, {ID: 3, Name: "m2"}},
		SideJobs: SideJobState{CA: true, CACheckDue: true, Summary: true, Access: true, AccessDue: true, CACertDue: true,
			Snapshots: true, SnapshotDue: true, Deltas: true, PruneDue: true},
	}
}

func TestPlanSideJobsOfALeader(t *testing.T) {
	want := SideJobs{CheckCA: true, ClearForceNew: true, PublishSummary: true, ReconcileAccess: true, PublishCACert: true,
		Snapshot: true, RecordDeltas: true, PruneAsides: true}
	if u := PlanSideJobs(leaderView()); u != want {
		t.Fatalf("side jobs of a leader with everything due:\n got %+v\nwant %+v", u, want)
	}
	for name, c := range map[string]struct {
		change func(*Observation)
		want   SideJobs
	}{
		"a follower": {func(o *Observation) { o.LeaderID = 2 },
			SideJobs{CheckCA: true, ClearForceNew: true, PruneAsides: true}},
		"stopped": {func(o *Observation) { o.Running, o.MembersKnown = false, false },
			SideJobs{}},
		"nothing due": {func(o *Observation) {
			o.SideJobs = SideJobState{CA: true, Summary: true, Access: true, Snapshots: true, Deltas: true}
		},
			SideJobs{ClearForceNew: true, PublishSummary: true, RecordDeltas: true}},
		// Consul lost its state: the CA and its certificate go back at
		// once, due or not; nothing summarises a cluster without a record.
		"record gone, nothing due": {func(o *Observation) {
			o.Record = nil
			o.SideJobs = SideJobState{CA: true, Summary: true, Access: true}
		}, SideJobs{CheckCA: true, ClearForceNew: true, PublishCACert: true}},
		"member list unknown": {func(o *Observation) { o.MembersKnown = false },
			SideJobs{CheckCA: true, ClearForceNew: true, PublishCACert: true}},
		"a full snapshot first": {func(o *Observation) { o.SideJobs.WantFullSnapshot = true },
			SideJobs{CheckCA: true, ClearForceNew: true, PublishSummary: true, ReconcileAccess: true, PublishCACert: true, Snapshot: true, PruneAsides: true}},
		"leaving": {func(o *Observation) { o.SideJobs = SideJobState{Leaving: true} },
			SideJobs{Depart: true, ClearForceNew: true}},
		"plain TLS off, nothing configured": {func(o *Observation) { o.SideJobs = SideJobState{} },
			SideJobs{ClearForceNew: true}},
	} {
		o := leaderView()
		c.change(&o)
		if u := PlanSideJobs(o); u != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", name, u, c.want)
		}
	}
}

// Invariant 7: set-aside data is pruned only by a healthy voter of the
// confirmed incarnation the record names, with a healthy quorum.
func TestPruneOnlyFromAHealthyVoterOfTheRecord(t *testing.T) {
	if !PlanSideJobs(leaderView()).PruneAsides {
		t.Fatal("a healthy voter of the confirmed record may not prune")
	}
	for name, broken := range map[string]func(*Observation){
		"not due":             func(o *Observation) { o.SideJobs.PruneDue = false },
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
		if PlanSideJobs(o).PruneAsides {
			t.Errorf("%s: pruning allowed", name)
		}
	}
}

// The seed's leader checks the store for its first snapshot only once the
// record confirms its data (sim seed 220, step 8: m1-0 observed its own
// record of cluster 0 and was told to check; the save was refused and the
// next check came a minute later, after the quorum was lost). Checked
// under the confirmed record, the empty store makes the save due at once.
func TestFirstSnapshotCheckWaitsForTheConfirmedRecord(t *testing.T) {
	seed := func() Observation {
		return Observation{
			Running: true, MembersKnown: true, SelfID: 0x17, LeaderID: 0x17, HoldsLock: true,
			Local:    Local{Cluster: "c", Name: "m1-0", Token: "tok19", Epoch: 1, MemberID: 0x17, ClusterID: 0x18, Revision: 1},
			Record:   &Record{Token: "tok19", Epoch: 1, Seeder: "m1-0"},
			Members:  []Member{{ID: 0x17, Name: "m1-0", Healthy: true}},
			SideJobs: SideJobState{Summary: true, Snapshots: true, SnapshotDue: true, Deltas: true},
		}
	}
	o := seed()
	if PlanSideJobs(o).Snapshot {
		t.Fatal("the scheduled check runs under the seed's unconfirmed record: no save can be made, and the next check comes a minute later")
	}
	if !(Faults{SnapshotUnconfirmed: true}).PlanSideJobs(o).Snapshot {
		t.Fatal("SnapshotUnconfirmed does not check under the unconfirmed record: it no longer reverts the fix")
	}
	o.Record.ClusterID = 0x18
	if !PlanSideJobs(o).Snapshot {
		t.Fatal("no check under the record confirming this member's data")
	}
	for name, other := range map[string]func(*Observation){
		"another token":                 func(o *Observation) { o.Record.Token = "tok20" },
		"another epoch":                 func(o *Observation) { o.Record.Epoch = 2 },
		"another cluster id":            func(o *Observation) { o.Record.ClusterID = 0x19 },
		"no record":                     func(o *Observation) { o.Record = nil },
		"data's cluster id not written": func(o *Observation) { o.Local.ClusterID = 0 },
	} {
		o := seed()
		o.Record.ClusterID = 0x18
		other(&o)
		if PlanSideJobs(o).Snapshot {
			t.Errorf("%s: the scheduled check runs where no save of this member's data can be made", name)
		}
	}
}
