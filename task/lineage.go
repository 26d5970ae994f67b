package task

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// errOtherIncarnation is why a genuine snapshot of no incarnation of the
// record's lineage is refused (notOfLineage).
var errOtherIncarnation = errors.New("of another incarnation")

// ofLineage reports whether snapshot meta may be of the incarnation a
// confirmed record (cluster id clusterID, epoch epoch) names or of one
// before it. The MAC binds a snapshot to the cluster's name and key, not
// to an incarnation: an earlier incarnation of the same job (started over
// under the same name and ca_kek, its own cluster ids and epochs) wrote
// genuine snapshots too, and a store writer can put one back. Epochs only
// grow along a record's lineage (every recovery or restore records the
// next one, and a member stamps each snapshot with the record's epoch and
// cluster id when it saves it), so the incarnations before this one
// snapshotted at lower epochs, and this one at its epoch under its
// cluster id ("0" while its seed was unconfirmed). A snapshot of a higher
// epoch, or of this epoch under another cluster id, is no snapshot of the
// lineage: only an operator restores it (recover -from snapshot:NAME).
// Snapshots of a lower epoch cannot be told apart from those of another
// lineage's lower epochs: the record keeps no earlier cluster ids.
// Without a confirmed record (clusterID 0: none yet, or a seed or
// recovery not confirmed, which Consul may have brought back from before
// later incarnations) there is nothing to tie a snapshot to and every one
// passes.
func ofLineage(clusterID, epoch uint64, meta snapshot.Meta) bool {
	if clusterID == 0 || meta.Epoch < epoch {
		return true
	}
	return meta.Epoch == epoch && (meta.ClusterID == strconv.FormatUint(clusterID, 16) || meta.ClusterID == "0")
}

// notOfLineage says why meta is refused for the confirmed record's
// lineage, "" when it is of it.
func notOfLineage(clusterID, epoch uint64, meta snapshot.Meta) string {
	if ofLineage(clusterID, epoch, meta) {
		return ""
	}
	return fmt.Sprintf("snapshot %s (cluster id %s, epoch %d) is of no incarnation of the cluster record (cluster id %x, epoch %d): a snapshot of another incarnation under the same name and key, put back in the store; "+
		"never restored automatically, only by an operator who knows it (etcd-nomad recover -from snapshot:%s)", meta.Name, meta.ClusterID, meta.Epoch, clusterID, epoch, meta.Name)
}
