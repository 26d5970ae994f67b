package snapshot

import (
	"fmt"
	"strconv"
)

// Lineage is the incarnation a cluster record names (its cluster id and
// epoch; cluster id 0 while not confirmed): what members and an
// operator's "latest" take a snapshot to be of, and what retention ranks.
// The zero Lineage (no record) ties nothing: every snapshot is of it.
type Lineage struct {
	ClusterID uint64
	Epoch     uint64
}

// Of reports whether snapshot meta may be of the incarnation l names or
// of one before it: the one rule every choice from a listing applies
// (members' automatic recovery, their retention and the base of their
// delta chains, an operator's "latest"). The MAC binds a snapshot to the
// cluster's name and key, not to an incarnation: an earlier incarnation
// of the same job (started over under the same name and ca_kek, its own
// cluster ids and epochs) wrote genuine snapshots too, and a store writer
// can put one back. Epochs only grow along a record's lineage (every
// recovery or restore records the next one, and a member stamps each
// snapshot with the epoch and cluster id its data runs when it saves it),
// so the incarnations before this one snapshotted at lower epochs, and
// this one at its epoch under its cluster id ("0" while its seed was
// unconfirmed). A snapshot of a higher epoch, or of this epoch under
// another cluster id, is no snapshot of the lineage: only an operator
// restores it, by name. Snapshots of a lower epoch cannot be told apart
// from those of another lineage's lower epochs: the record keeps no
// earlier cluster ids. Without a record (the zero Lineage) there is
// nothing to tie a snapshot to and every one passes. A record not
// confirmed yet (ClusterID 0: a seed or recovery, which Consul may have
// brought back from before later incarnations) keeps no cluster id to tie
// one of its epoch to, but its epoch still bounds its lineage: it was
// recorded above every snapshot its writer saw, and no incarnation of it
// has run at a higher epoch unless a later record replaced it, which only
// an operator can tell from a put-back snapshot of another incarnation
// (a put-back attack: "latest" under an unconfirmed record of epoch 3
// was a put-back snapshot of epoch 7).
func (l Lineage) Of(meta Meta) bool {
	if l.ClusterID == 0 {
		return l.Epoch == 0 || meta.Epoch <= l.Epoch
	}
	if meta.Epoch < l.Epoch {
		return true
	}
	return meta.Epoch == l.Epoch && (meta.ClusterID == strconv.FormatUint(l.ClusterID, 16) || meta.ClusterID == "0")
}

// WhyNot says why meta is of no incarnation of l, "" when it is of it.
func (l Lineage) WhyNot(meta Meta) string {
	if l.Of(meta) {
		return ""
	}
	if l.ClusterID == 0 {
		return fmt.Sprintf("snapshot %s (cluster id %s, epoch %d) is of no incarnation of the cluster record (epoch %d, not confirmed yet: its lineage holds no epoch above it): a snapshot of another incarnation under the same name and key, put back in the store, or of one that ran after the record and was lost with it; "+
			"never restored automatically nor as latest, only by an operator who names it (etcd-nomad recover -from snapshot:%s)", meta.Name, meta.ClusterID, meta.Epoch, l.Epoch, meta.Name)
	}
	return fmt.Sprintf("snapshot %s (cluster id %s, epoch %d) is of no incarnation of the cluster record (cluster id %x, epoch %d): a snapshot of another incarnation under the same name and key, put back in the store; "+
		"never restored automatically nor as latest, only by an operator who names it (etcd-nomad recover -from snapshot:%s)", meta.Name, meta.ClusterID, meta.Epoch, l.ClusterID, l.Epoch, meta.Name)
}

// Split splits list into the objects of l (Of) and the others.
func (l Lineage) Split(list []Meta) (of, foreign []Meta) {
	of = make([]Meta, 0, len(list))
	for _, m := range list {
		if l.Of(m) {
			of = append(of, m)
		} else {
			foreign = append(foreign, m)
		}
	}
	return of, foreign
}
