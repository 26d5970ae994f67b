package main

import (
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// TestCorruptRefusedObjectIsNeverAdvisedAsARestore: a delta whose
// metadata is corrupt is listed by its name (snapshot.NameMeta), which
// does not encode its base: the advice printed 'snapshot ;' and
// 'recover -from snapshot:' with an empty base (review rev13c, red
// before). It says to put its metadata back or delete it.
func TestCorruptRefusedObjectIsNeverAdvisedAsARestore(t *testing.T) {
	name := snapshot.DeltaName("kit", 1, 52, time.Now().UTC(), false)
	m, ok := snapshot.NameMeta(name, "kit", nil)
	if !ok || m.Kind != snapshot.KindDelta {
		t.Fatalf("NameMeta(%s) = %+v, %v", name, m, ok)
	}
	d := describeRefused(&m)
	if strings.Contains(d, "snapshot ;") || strings.Contains(d, "-accept-unauthenticated") || !strings.Contains(d, "put its metadata back") {
		t.Fatalf("describeRefused of a delta with corrupt metadata: %s; want: put its metadata back or delete it, no restore", d)
	}
	if w := refusedWhy(&m, nil, &planner.Record{}); !strings.Contains(w, "metadata cannot be read") {
		t.Fatalf("refusedWhy of corrupt metadata: %s", w)
	}
}
