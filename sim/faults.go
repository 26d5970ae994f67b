package sim

import (
	"fmt"
	"maps"
	"time"
)

// fault injects one fault chosen at random: crashes (with or without the
// data dir), graceful stops, node loss, partitions between members and
// between a member and Consul or Nomad, Consul state loss and restore of
// an older state, lock expiry, and stalls (message delay).
func (w *World) fault() {
	w.faults++
	switch k := w.rng.IntN(100); {
	case k < 22:
		w.crash()
	case k < 34:
		w.partition()
	case k < 44:
		w.cutConsul()
	case k < 54:
		w.cutNomad()
	case k < 62:
		w.nodeDown()
	case k < 72:
		w.gracefulStop()
	case k < 75:
		w.logf("fault", "Consul loses its state: no record, no sessions")
		w.coord.record, w.coord.holder, w.coord.summary, w.coord.pause = nil, nil, nil, ""
		w.coord.ca, w.coord.rot = 0, nil
		w.coord.index = w.id()
	case k < 79:
		w.restoreOlder()
	case k < 87:
		if h := w.coord.holder; h != nil {
			w.logf("fault", "the lock's session of %s expires", h.name)
			w.coord.holder = nil
		}
	default:
		n := w.pick(func(n *node) bool { return n.up })
		if n != nil {
			d := w.jitter(time.Second, 6*time.Second)
			n.nextAt += d
			n.stalledUntil = n.nextAt
			w.logf("fault", "%s stalls for %s (slow process, delayed messages)", n.name, fmtDur(d))
		}
	}
}

// pick chooses a current allocation that satisfies ok.
func (w *World) pick(ok func(*node) bool) *node {
	var c []*node
	for _, n := range w.slots {
		if ok(n) {
			c = append(c, n)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[w.rng.IntN(len(c))]
}

func (w *World) crash() {
	n := w.pick(func(n *node) bool { return n.up && n.leave == nil })
	if n == nil {
		return
	}
	wipe := w.rng.IntN(100) < 12
	after := w.jitter(time.Second, 10*time.Second)
	w.kill(n)
	w.logf("fault", "crash %s (restart in %s, data dir %s)", n.name, fmtDur(after), map[bool]string{true: "LOST", false: "kept"}[wipe])
	w.schedule(after, "restart "+n.name, func(w *World) string {
		if n.alloc == allocTerminal || n.up || n.hostDown {
			return "nothing to restart"
		}
		if wipe {
			// The whole member directory: the holders file with it.
			n.data, n.aside, n.tlsDisk = nil, nil, nil
			n.holders, n.holdersDisk = nil, nil
		}
		n.up, n.nextAt = true, w.now
		return fmt.Sprintf("%s restarted", n.name)
	})
}

// kill ends n's process: etcd stops, the supervisor's memory is lost
// (but for the data holders it remembered, which its restart reads back
// from their file in its directory), its lock session lingers in Consul
// until the TTL.
func (w *World) kill(n *node) {
	w.stopEtcd(n)
	n.up, n.pending, n.lockSession, n.nextAt = false, nil, 0, never
	n.quorumLostSince, n.seederGoneSince, n.recordMissingSince = -1, -1, -1
	n.absentAt, n.unhealthyAt = map[uint64]time.Duration{}, map[uint64]time.Duration{}
	n.startFailures, n.record, n.answered = 0, nil, nil
	n.damaged, n.found, n.healthySeen, n.tls = nil, nil, nil, nil
	n.holders = maps.Clone(n.holdersDisk) // task's loadHolders at the restart (nil: none written)
	n.summaryAt, n.summaryRead, n.summarySeen = 0, false, nil
	n.snapshotCheckAt = 0
}

func (w *World) partition() {
	var s string
	for _, n := range w.nodes {
		n.side = w.rng.IntN(2)
		if n.up {
			s += fmt.Sprintf(" %s:%d", n.name, n.side)
		}
	}
	after := w.jitter(2*time.Second, 40*time.Second)
	w.logf("fault", "partition%s (heals in %s)", s, fmtDur(after))
	w.schedule(after, "heal partition", func(w *World) string {
		for _, n := range w.nodes {
			n.side = 0
		}
		return "partition healed"
	})
}

func (w *World) cutConsul() {
	n := w.pick(func(n *node) bool { return !n.noConsul })
	if n == nil {
		return
	}
	n.noConsul = true
	after := w.jitter(2*time.Second, 30*time.Second)
	w.logf("fault", "%s cut off from Consul (heals in %s)", n.name, fmtDur(after))
	w.schedule(after, "reconnect "+n.name+" to Consul", func(w *World) string {
		n.noConsul = false
		return n.name + " reaches Consul again"
	})
}

func (w *World) cutNomad() {
	n := w.pick(func(n *node) bool { return !n.noNomad && n.alloc == allocRunning })
	if n == nil {
		return
	}
	n.noNomad, n.alloc = true, allocUnknown
	w.listChanged()
	after := w.jitter(2*time.Second, 30*time.Second)
	w.logf("fault", "%s's Nomad client disconnected: allocation unknown (heals in %s)", n.name, fmtDur(after))
	w.schedule(after, "reconnect "+n.name+" to Nomad", func(w *World) string {
		if n.collected {
			return n.name + " stays cut off"
		}
		n.noNomad = false
		if n.alloc == allocUnknown {
			n.alloc = allocRunning
		}
		w.listChanged()
		return n.name + "'s client reconnected"
	})
}

// collectRunning: the hosts running etcd but one are cut off from the
// Nomad servers, not from their peers (nor from Consul), and
// Nomad declares their allocations lost and garbage-collects them
// (terminal; replacements are placed) while their processes still run and
// serve. The provider no longer lists them. Their supervisors cannot list
// instances (they do nothing); their etcd runs on until their client
// reconnects and stops it.
func (w *World) collectRunning() {
	var c []*node
	for _, n := range w.slots {
		if (n.alloc == allocUnknown || n.alloc == allocRunning) && n.up && n.etcd != nil && !n.hostDown && n.leave == nil {
			c = append(c, n)
		}
	}
	if len(c) == 0 {
		return
	}
	// One host keeps its link to the Nomad servers (when more than one
	// runs): the others, a majority of a cluster of three, are collected.
	kept := -1
	if len(c) > 1 {
		kept = w.crng.IntN(len(c))
	}
	after := 30*time.Second + time.Duration(w.crng.Int64N(int64(90*time.Second)))
	for i, n := range c {
		if i == kept {
			continue
		}
		n.alloc, n.collected, n.noNomad = allocTerminal, true, true
		r := w.place(n.slot)
		w.logf("fault", "Nomad declares %s lost and garbage-collects it while it still runs (replacement %s placed; its client reconnects in %s)", n.name, r.name, fmtDur(after))
		w.schedule(after, "reconnect "+n.name+" to Nomad", func(w *World) string {
			n.noNomad, n.collected = false, false
			if !n.gone() {
				return n.name + "'s client reconnected"
			}
			w.stopCollected(n)
			return n.name + "'s client reconnected: its allocation is terminal, the client stops it"
		})
	}
	w.listChanged()
}

// stopCollected: the client of a collected allocation reconnects and
// stops it; its disk goes with it.
func (w *World) stopCollected(n *node) {
	w.kill(n)
	n.data, n.aside = nil, nil
}

// nodeDown: the host stops answering (process down, client disconnected);
// later it comes back with its disk, or Nomad declares it lost (terminal:
// the disk is gone) and places a replacement.
func (w *World) nodeDown() {
	n := w.pick(func(n *node) bool { return n.alloc == allocRunning && n.leave == nil })
	if n == nil {
		return
	}
	w.kill(n)
	n.noNomad, n.alloc, n.hostDown = true, allocUnknown, true
	w.listChanged()
	back := w.rng.IntN(100) < 60
	after := w.jitter(5*time.Second, 40*time.Second)
	w.logf("fault", "host of %s down (allocation unknown; in %s: %s)", n.name, fmtDur(after), map[bool]string{true: "back with its disk", false: "declared lost, replaced"}[back])
	w.schedule(after, "host of "+n.name, func(w *World) string {
		n.hostDown, n.noNomad = false, false
		if n.alloc != allocUnknown || n.up {
			return "nothing to do"
		}
		if back {
			n.alloc, n.up, n.nextAt = allocRunning, true, w.now
			w.listChanged()
			return n.name + " back"
		}
		n.alloc, n.data, n.aside = allocTerminal, nil, nil
		r := w.place(n.slot)
		w.listChanged()
		return fmt.Sprintf("%s lost; replacement %s placed", n.name, r.name)
	})
}

// gracefulStop: Nomad stops an allocation (update, drain) and places a
// replacement; the stopping member leaves (task's shutdown).
func (w *World) gracefulStop() {
	for _, l := range w.leaves {
		if !l.done {
			return // max_parallel = 1
		}
	}
	n := w.pick(func(n *node) bool { return n.up && n.alloc == allocRunning && n.etcd != nil && len(n.pending) == 0 })
	if n == nil {
		return
	}
	n.alloc = allocStopping
	n.pending = nil
	l := &leave{node: n, start: w.now, deadline: w.now + leaveTimeout, group: n.etcd.group, id: n.etcd.memberID}
	n.leave = l
	w.leaves = append(w.leaves, l)
	n.nextAt = w.now
	w.listChanged()
	after := w.jitter(time.Second, 5*time.Second)
	w.logf("fault", "Nomad stops %s gracefully (replacement in %s)", n.name, fmtDur(after))
	w.schedule(after, "replace "+n.name, func(w *World) string {
		r := w.place(n.slot)
		w.listChanged()
		return "replacement " + r.name + " placed"
	})
}

func (w *World) restoreOlder() {
	h := w.coord.history
	if len(h) < 2 {
		return
	}
	v := h[w.rng.IntN(len(h)-1)]
	rc := *v.rec
	w.coord.record, w.coord.holder, w.coord.summary, w.coord.pause = &rc, nil, v.summary, v.pause
	w.coord.ca, w.coord.rot = v.ca, v.rot
	w.coord.index = w.id()
	w.logf("fault", "Consul restored from an older snapshot: record epoch %d %s cluster %x", rc.Epoch, rc.Token, rc.ClusterID)
}

// heal ends the fault phase: partitions and cuts heal; pending restarts
// and host returns still happen.
func (w *World) heal() {
	for _, n := range w.nodes {
		n.side, n.noConsul = 0, false
		if n.collected {
			n.collected = false
			if n.gone() {
				w.stopCollected(n)
			}
		}
		if n.noNomad && !n.hostDown {
			n.noNomad = false
			if n.alloc == allocUnknown {
				n.alloc = allocRunning
			}
		}
	}
	w.listChanged()
	w.logf("quiet", "faults stop; partitions and cuts healed")
}
