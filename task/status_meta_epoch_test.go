package task

import (
	"context"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/datadir"
)

// Review rev18c N3: metadata without data (a join or a start that wrote
// it and created no data) names an epoch whose record existed; /status
// reports it (meta_epoch, no token) so that whichever member chooses a
// new epoch goes above it, not only this member (planner
// PeerStatus.MetaEpoch). Metadata of another cluster names nothing.
func TestStatusNamesTheEpochOfMetadataWithoutData(t *testing.T) {
	k := newKit(t, "m0")
	m := k.member("m0", nil)
	if err := m.dir.WriteMeta(datadir.Meta{Cluster: "kit", Name: "m0", Token: "tok2", Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	st, _ := m.health(context.Background())
	if st.Token != "" || st.MetaEpoch != 2 {
		t.Fatalf("/status of metadata without data: token %q meta_epoch %d; want no token and meta_epoch 2", st.Token, st.MetaEpoch)
	}
	if err := m.dir.WriteMeta(datadir.Meta{Cluster: "other", Name: "m0", Token: "tok7", Epoch: 7}); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.health(context.Background()); st.MetaEpoch != 0 {
		t.Fatalf("/status of another cluster's metadata: meta_epoch %d, want 0", st.MetaEpoch)
	}
}
