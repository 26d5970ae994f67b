package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// TestWriteDeltasIsAChain: the replay figure's synthetic deltas follow
// on from the full snapshot without a gap, hold every event once, and
// decode as the recorder's segments do.
func TestWriteDeltasIsAChain(t *testing.T) {
	ctx := context.Background()
	store, err := file.New(t.TempDir(), "bench")
	if err != nil {
		t.Fatal(err)
	}
	full := snapshot.Meta{Name: "bench-e1-r00000000000000000042-20260101T000000Z.snap.zst", Cluster: "bench", Epoch: 1, Revision: 42}
	const n = 70_000 // more than one segment of the recorder's size
	segs, _, err := writeDeltas(ctx, store, snapshot.Source{Cluster: "bench", ClusterID: "1", Epoch: 1}, full, snapshot.Encryption{}, n)
	if err != nil {
		t.Fatal(err)
	}
	list, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chain, gap := snapshot.Chain(list, full)
	if gap || len(chain) != segs || segs < 2 {
		t.Fatalf("chain of %d segments (gap %v), wrote %d", len(chain), gap, segs)
	}
	events := 0
	for _, m := range chain {
		rc, om, err := store.Open(ctx, m.Name)
		if err != nil {
			t.Fatal(err)
		}
		var w bytes.Buffer
		err = snapshot.Decode(&w, rc, om, snapshot.Encryption{})
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		s, err := snapshot.UnmarshalSegment(w.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if s.First() != m.FirstRevision || s.Last() != m.Revision || len(s.Events) != m.Events {
			t.Fatalf("segment %s: events %d..%d (%d), metadata %d..%d (%d)", m.Name, s.First(), s.Last(), len(s.Events), m.FirstRevision, m.Revision, m.Events)
		}
		events += len(s.Events)
	}
	if events != n || chain[len(chain)-1].Revision != full.Revision+n {
		t.Fatalf("%d events up to revision %d, want %d up to %d", events, chain[len(chain)-1].Revision, n, full.Revision+n)
	}
}
