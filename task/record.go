package task

import (
	"slices"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

// PlannerRecord is the planner's view of a stored cluster record.
func PlannerRecord(r coord.Record) *planner.Record {
	return &planner.Record{ClusterID: r.ClusterID, Token: r.Token, Epoch: r.Epoch, Seeder: r.Seeder, Source: planner.Source(r.Source),
		LastConfirmedToken: r.LastConfirmedToken, LastConfirmedEpoch: r.LastConfirmedEpoch, Operator: r.Operator, Migrating: len(r.Join) > 0,
		SourceRevision: r.SourceRevision, Accepted: plannerAccepted(r.Accepted), AcceptedRevision: r.AcceptedRevision, HighestEpoch: r.HighestEpoch}
}

// StoredRecord is the record to store for the planner's r: index is the
// modify index of the record it replaces (UpdateRecord), 0 to create one.
func StoredRecord(r planner.Record, index uint64) coord.Record {
	return coord.Record{ClusterID: r.ClusterID, Token: r.Token, Epoch: r.Epoch, Seeder: r.Seeder, Source: string(r.Source),
		LastConfirmedToken: r.LastConfirmedToken, LastConfirmedEpoch: r.LastConfirmedEpoch, Operator: r.Operator,
		SourceRevision: r.SourceRevision, Accepted: storedAccepted(r.Accepted), AcceptedRevision: r.AcceptedRevision, HighestEpoch: r.HighestEpoch, Index: index}
}

func plannerAccepted(ls []coord.AcceptedLine) []planner.AcceptedLine {
	var out []planner.AcceptedLine
	for _, l := range ls {
		out = append(out, planner.AcceptedLine(l))
	}
	return out
}

func storedAccepted(ls []planner.AcceptedLine) []coord.AcceptedLine {
	var out []coord.AcceptedLine
	for _, l := range ls {
		out = append(out, coord.AcceptedLine(l))
	}
	return out
}

// writeBack is the record to store for the planner's r in place of cur
// (UpdateRecord compares cur.Index, so nothing stored since is
// overwritten). The planner sees a migration's join list only as
// Migrating: while r names cur's incarnation (its token and epoch) the
// list is carried from cur, so that confirming or correcting the record
// during a migration never drops the outside members' client URLs. A
// record of another incarnation carries none: they were the older one's.
func writeBack(cur coord.Record, r planner.Record) coord.Record {
	out := StoredRecord(r, cur.Index)
	if r.Token == cur.Token && r.Epoch == cur.Epoch {
		out.Join = slices.Clone(cur.Join)
	}
	return out
}
