package planner

// SideJobState is what the loop observed of its side jobs: which are
// configured for this member, and which are due by their own pacing (the
// loop paces them; the planner decides whether they run).
type SideJobState struct {
	// Leaving: the provider is taking this instance away while it runs
	// (an ASG lifecycle hook) and has not been told yet that it left.
	Leaving bool
	// CA: this member holds the cluster CA (TLS auto). CACheckDue: its
	// periodic check in the coordinator is due.
	CA, CACheckDue bool
	// Summary: the coordinator holds an informational cluster summary
	// (and the CA certificate beside it).
	Summary bool
	// Access: access rules are configured. AccessDue: their next
	// comparison with etcd's authorization is due.
	Access, AccessDue bool
	// CACertDue: the CA certificate's periodic republication is due.
	CACertDue bool
	// Snapshots: scheduled snapshots are configured. SnapshotDue: the
	// next check of the store is due.
	Snapshots, SnapshotDue bool
	// Deltas: continuous backup is configured. WantFullSnapshot: a full
	// snapshot must come first (a new delta chain).
	Deltas, WantFullSnapshot bool
	// PruneDue: the set-aside retention rule's pacing allows a run.
	PruneDue bool
}

// SideJobs is what the loop does beside the decision. Each job is carried
// out by the loop as told (publishing only what changed, pacing the next
// run); none of them decides on its own whether it runs.
type SideJobs struct {
	// Depart: leave the cluster, then tell the provider the instance may
	// go (PlanLeave decides whether the removal is safe).
	Depart bool
	// CheckCA: offer this member's CA to the coordinator (stored again
	// when it lost its state, a different one reported).
	CheckCA bool
	// ClearForceNew: etcd runs; a ForceNew flag left in the metadata is
	// cleared.
	ClearForceNew bool
	// PublishSummary: the leader writes the cluster summary.
	PublishSummary bool
	// ReconcileAccess: the leader applies the access rules to etcd.
	ReconcileAccess bool
	// PublishCACert: the leader writes the CA certificate for clients.
	PublishCACert bool
	// Snapshot: the leader starts a scheduled snapshot (in the
	// background; the store says whether one is due by age).
	Snapshot bool
	// RecordDeltas: the continuous backup runs on this member (false:
	// it stops).
	RecordDeltas bool
	// PruneAsides: the set-aside retention rule runs (in the
	// background).
	PruneAsides bool
}

// PlanSideJobs decides the loop's side jobs from o and o.SideJobs.
func PlanSideJobs(o Observation) SideJobs { return Faults{}.PlanSideJobs(o) }

// PlanSideJobs decides like the package's PlanSideJobs with the rules f
// switches off.
func (f Faults) PlanSideJobs(o Observation) SideJobs {
	u := o.SideJobs
	leads := o.Running && o.LeaderID == o.SelfID
	confirmedLeader := leads && o.MembersKnown
	return SideJobs{
		Depart: u.Leaving,
		// At once when the record is gone (Consul lost its state), and
		// when due otherwise: the CA alone may be lost, or replaced,
		// while the record stays.
		CheckCA:         u.CA && o.Running && (o.Record == nil || u.CACheckDue),
		ClearForceNew:   o.Running,
		PublishSummary:  u.Summary && confirmedLeader && o.Record != nil,
		ReconcileAccess: u.Access && u.CA && confirmedLeader && u.AccessDue,
		// At once when the record is gone: clients need the certificate
		// as soon as the coordinator lost it.
		PublishCACert: u.Summary && u.CA && u.Access && leads && (o.Record == nil || u.CACertDue),
		// Only while the record confirms the incarnation this member's
		// data runs: a save is of that incarnation alone (task/backup's
		// snapshotSource refuses it otherwise), and a check that cannot
		// save still paces the next one a minute later. A seed's leader
		// observes its own unconfirmed record first: checked then, the
		// first snapshot of an empty store came a minute after the
		// confirmation, and a quorum lost meanwhile left nothing to
		// recover from (sim seed 220).
		Snapshot: u.Snapshots && confirmedLeader && u.SnapshotDue && (recordNamesLocal(o) || !f.backupGuard(snapshotOnlyConfirmed)),
		// One recorder per cluster, on the leader, where the writes are
		// ordered; after a full snapshot when a new chain must start.
		RecordDeltas: u.Deltas && confirmedLeader && !u.WantFullSnapshot,
		PruneAsides:  u.PruneDue && mayPruneAsides(o),
	}
}

// recordNamesLocal reports whether the record is confirmed and names the
// incarnation this member's data runs (its token, epoch and cluster id).
func recordNamesLocal(o Observation) bool {
	r := o.Record
	return r != nil && r.ClusterID != 0 && o.Local.Token == r.Token && o.Local.Epoch == r.Epoch && o.Local.ClusterID == r.ClusterID
}

// mayPruneAsides reports whether o shows this member as a healthy voter
// of the confirmed incarnation the record names, with a healthy quorum:
// only then may set-aside data be pruned.
func mayPruneAsides(o Observation) bool {
	r := o.Record
	if !o.Running || !o.MembersKnown || r == nil || r.ClusterID == 0 || o.Local.Token != r.Token || o.Local.Epoch != r.Epoch {
		return false
	}
	voters, healthy, selfOK := 0, 0, false
	for _, mem := range o.Members {
		if mem.Learner {
			continue
		}
		voters++
		if mem.Healthy {
			healthy++
			selfOK = selfOK || mem.ID == o.SelfID
		}
	}
	return selfOK && healthy > voters/2
}
