package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Review rev18f F3: sim seed 36353 with SnapshotUnconfirmed, driven to
// step 296: m0-0 and m1-0 hold epoch 1 data (cluster 17) and Nomad has
// collected both while they ran; m0-1 remembers them as listed holders
// (rememberListedHolder). Put m0-0 and m1-0 behind a partition and crash
// m0-1, its data dir lost (with it the holders file that a restart
// with its data reads back, TestEveryRestartedMemberReadsItsRememberedHolders):
// it restarts knowing nothing of them, and before it saw "no record and
// no data anywhere" and seeded a second epoch 1 beside cluster 17. Its
// peers now share the holders they remember (/status), with the age of
// the original listing, and m0-1 takes them as a peer's word: it names
// the silent holders and waits. NoHoldersShared reverts it.
func TestARestartedMemberTakesItsPeersRememberedHolders(t *testing.T) {
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
				if n.name == "m0-1" && n.up {
					w.kill(n)
					w.logf("fault", "test: crash %s (restart in 1s, data dir LOST)", n.name)
					w.schedule(time.Second, "restart "+n.name, func(w *World) string {
						if n.alloc == allocTerminal || n.up || n.hostDown {
							return "nothing to restart"
						}
						n.data, n.aside, n.tlsDisk = nil, nil, nil
						n.holders, n.holdersDisk = nil, nil
						n.up, n.nextAt = true, w.now
						return n.name + " restarted"
					})
				}
			}
		}
		for w.failure == nil && w.step < 2000 {
			w.Step()
		}
		return w
	}
	if w := run(Defects{NoHoldersShared: true}); w.failure == nil || !strings.Contains(w.failure.Detail, "epoch 1") {
		t.Fatalf("with NoHoldersShared: %v, want two seeds of epoch 1\n%s", w.failure, w.Trace())
	} else {
		t.Logf("with NoHoldersShared: %v", w.failure)
	}
	if w := run(Defects{}); w.failure != nil {
		t.Fatalf("violation: %v\n%s", w.failure, w.Trace())
	}
}
