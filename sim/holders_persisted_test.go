package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Review rev18f F3, the case shared holders do not close: sim seed 36353
// with SnapshotUnconfirmed, driven to step 296 (m0-0 and m1-0 hold epoch
// 1 data of a cluster Nomad collected while they ran; their peers
// remember them as listed holders). Put m0-0 and m1-0 behind a partition
// and crash every member on the other side at once, data kept: no live
// peer remembers the holders to share them. Before, the memory lived in
// the process only, and the restarted members saw "no record and no
// data anywhere" and seeded a second epoch 1 beside them. The memory is
// now a file beside the data, read back at the restart: they name the
// silent holders and wait. NoHoldersPersisted reverts it.
func TestEveryRestartedMemberReadsItsRememberedHolders(t *testing.T) {
	run := func(d Defects) *World {
		d.Planner = planner.Faults{SnapshotUnconfirmed: true}
		w := New(Config{Seed: 36353, TraceLen: 2000, Defects: d})
		for w.step < 296 && w.failure == nil {
			w.Step()
		}
		if w.failure != nil {
			t.Fatalf("violation before step 296: %v", w.failure)
		}
		for _, n := range w.nodes {
			switch n.name {
			case "m0-0", "m1-0":
				n.side = 0
			default:
				n.side = 1
				if !n.up {
					continue
				}
				w.kill(n)
				w.logf("fault", "test: crash %s (restart in 1s, data kept)", n.name)
				w.schedule(time.Second, "restart "+n.name, func(w *World) string {
					if n.alloc == allocTerminal || n.up || n.hostDown {
						return "nothing to restart"
					}
					n.up, n.nextAt = true, w.now
					return n.name + " restarted"
				})
			}
		}
		for w.failure == nil && w.step < 2000 {
			w.Step()
		}
		return w
	}
	if w := run(Defects{NoHoldersPersisted: true}); w.failure == nil || !strings.Contains(w.failure.Detail, "epoch 1") {
		t.Fatalf("with NoHoldersPersisted: %v, want two seeds of epoch 1\n%s", w.failure, w.Trace())
	} else {
		t.Logf("with NoHoldersPersisted: %v", w.failure)
	}
	if w := run(Defects{}); w.failure != nil {
		t.Fatalf("violation: %v\n%s", w.failure, w.Trace())
	}
}
