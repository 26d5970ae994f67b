package datadir_test

import (
	"testing"

	"github.com/etcd-nomad/etcd-nomad/datadir"
)

// Metadata a join or start wrote from a record, with no etcd data beside
// it, is no data (Empty) but names the epoch of that record (MetaEpoch):
// a recovery records above it (planner: aboveOwnMeta, sim seed 1009859).
func TestMetadataWithoutDataNamesItsEpoch(t *testing.T) {
	d := datadir.Dir{Root: t.TempDir()}
	if l := d.Observe(false); !l.Empty || l.MetaEpoch != 0 {
		t.Fatalf("nothing written: %+v, want empty, no epoch", l)
	}
	if err := d.WriteMeta(datadir.Meta{Cluster: "kit", Name: "m0", Token: "tok668", Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	if l := d.Observe(false); !l.Empty || l.MetaEpoch != 2 || l.Cluster != "kit" || l.Token != "" || l.Epoch != 0 {
		t.Fatalf("metadata of epoch 2 without data: %+v, want empty with MetaEpoch 2 and its cluster's name only", l)
	}
}
