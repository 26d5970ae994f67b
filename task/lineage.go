package task

import (
	"errors"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// errOtherIncarnation is why a genuine snapshot of no incarnation of the
// record's lineage is refused (snapshot.Lineage.WhyNot).
var errOtherIncarnation = errors.New("of another incarnation")

// lineageOf is the lineage rec names (snapshot.Lineage.Of); the zero
// Lineage, which ties nothing, without a record.
func lineageOf(rec *planner.Record) snapshot.Lineage {
	if rec == nil {
		return snapshot.Lineage{}
	}
	return snapshot.Lineage{ClusterID: rec.ClusterID, Epoch: rec.Epoch}
}
