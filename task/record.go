package task

import (
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

// PlannerRecord is the planner's view of a stored cluster record.
func PlannerRecord(r coord.Record) *planner.Record {
	return &planner.Record{ClusterID: r.ClusterID, Token: r.Token, Epoch: r.Epoch, Seeder: r.Seeder, Source: planner.Source(r.Source),
		LastConfirmedToken: r.LastConfirmedToken, LastConfirmedEpoch: r.LastConfirmedEpoch, Operator: r.Operator, Migrating: len(r.Join) > 0}
}

// StoredRecord is the record to store for the planner's r: index is the
// modify index of the record it replaces (UpdateRecord), 0 to create one.
func StoredRecord(r planner.Record, index uint64) coord.Record {
	return coord.Record{ClusterID: r.ClusterID, Token: r.Token, Epoch: r.Epoch, Seeder: r.Seeder, Source: string(r.Source),
		LastConfirmedToken: r.LastConfirmedToken, LastConfirmedEpoch: r.LastConfirmedEpoch, Operator: r.Operator, Index: index}
}
