package sim

import (
	"github.com/etcd-nomad/etcd-nomad/planner"
)

// operatorRecordLive is 'etcd-nomad recover -record-live' (cmd/etcd-nomad
// recover.go): the operator takes the lock (only when no member holds
// it: the command waits for it), reads the record, asks every instance
// the provider lists for its /status, and writes what
// planner.OperatorRecordLive decides, the fence the command applies.
// Taken in one step, under the lock and with nothing in between, its
// compare-and-set cannot fail here. The operator reaches what runs on the
// side that holds Consul (side 0) and is not stalled. It returns why it
// refused, "" when it recorded.
func (w *World) operatorRecordLive(why string) string {
	if w.coord.holder != nil {
		return "the lock is held by " + w.coord.holder.name
	}
	if w.coord.record == nil {
		// The planner answers that; no need to take the lock.
		_, err := planner.OperatorRecordLive(planner.OperatorView{})
		return err.Error()
	}
	cur := *w.coord.record
	v := planner.OperatorView{Record: &cur}
	for _, n := range w.listed() {
		if !n.up || n.side != 0 || w.now < n.stalledUntil {
			v.Silent = append(v.Silent, n.name)
			continue
		}
		v.Answered = append(v.Answered, w.status(n))
	}
	rec, err := planner.OperatorRecordLive(v)
	if err != nil {
		return err.Error()
	}
	w.setRecord(rec)
	w.recordedLive++
	// The live cluster is the recorded incarnation under the new epoch
	// from now on: members that join it label their data with it, the
	// others adopt it (AdoptEpoch); its old epoch still names it.
	for _, g := range w.groups {
		if g.clusterID == rec.ClusterID && g.token == rec.Token && g.epoch < rec.Epoch {
			g.former = append(g.former, g.epoch)
			g.epoch = rec.Epoch
		}
	}
	w.logf("operator", "recover -record-live (%s): recorded epoch %d %s cluster %x seeder %s over epoch %d %s", why, rec.Epoch, rec.Token, rec.ClusterID, rec.Seeder, cur.Epoch, cur.Token)
	return ""
}
