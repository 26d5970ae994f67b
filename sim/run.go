package sim

import (
	"time"
)

// Result is the outcome of one run.
type Result struct {
	Seed  uint64
	Steps int
	// Violation is the first broken invariant, nil for a clean run.
	Violation *Violation
	// Stuck, for a clean run that did not become healthy, says why only
	// an operator could help (no copy left to recover from).
	Stuck string
	// Healthy is how long the quiet phase took to become healthy.
	Healthy time.Duration
	Faults  int
	Groups  int
}

// Run runs one seed: a fault phase of cfg.FaultSteps steps, then a quiet
// phase that must end healthy within cfg.QuietTime. It stops at the first
// violation.
func Run(cfg Config) (Result, *World) {
	w := New(cfg)
	for w.failure == nil {
		if w.step == w.cfg.FaultSteps {
			w.quiet, w.quietAt = true, w.now
			w.heal()
		}
		w.Step()
		if w.quiet && w.failure == nil {
			if w.healthy() {
				break
			}
			if w.now-w.quietAt > w.cfg.QuietTime {
				if why := w.stuck(); why != "" {
					w.logf("quiet", "stuck: %s (an operator must restore)", why)
					return w.result(why), w
				}
				w.violate(InvLiveness, "no healthy cluster of %d voters %s after the faults stopped; state:\n%s", w.cfg.Size, fmtDur(w.cfg.QuietTime), w.State())
			}
		}
	}
	return w.result(""), w
}

func (w *World) result(stuck string) Result {
	r := Result{Seed: w.cfg.Seed, Steps: w.step, Violation: w.failure, Stuck: stuck, Faults: w.faults, Groups: len(w.groups)}
	if w.quiet && w.failure == nil && stuck == "" {
		r.Healthy = w.now - w.quietAt
	}
	return r
}

// Step advances the world by one step: a fault, a timed event (restart,
// heal, placement) or one unit of one member's supervisor; then client
// writes and snapshots, the raft facts, and the invariants.
func (w *World) Step() {
	w.step++
	if !w.quiet && w.rng.Float64() < w.cfg.FaultRate {
		w.fault()
	} else {
		w.next()
	}
	w.refresh()
	if w.rng.IntN(3) == 0 {
		w.write()
	}
	if w.now >= w.nextSnapshot() {
		for _, g := range w.groups {
			if g.quorum >= 0 {
				w.takeSnapshot(g)
			}
		}
		w.snapAt = w.now
	}
	if w.now >= w.deltaAt+deltaEvery {
		w.recordDeltas()
		w.deltaAt = w.now
	}
	if !w.quiet && w.crng.Float64() < damagePerStep {
		w.damageSegment()
	}
	if !w.cfg.NoCollectRunning && !w.quiet && w.crng.Float64() < gcPerStep {
		w.collectRunning()
	}
	w.check()
}

func (w *World) nextSnapshot() time.Duration { return w.snapAt + snapshotEvery }

// next runs whatever is due first: a timed event or a member.
func (w *World) next() {
	var n *node
	for _, x := range w.nodes {
		if x.up && (n == nil || x.nextAt < n.nextAt) {
			n = x
		}
	}
	ev := -1
	for i, e := range w.events {
		if ev < 0 || e.at < w.events[ev].at {
			ev = i
		}
	}
	if ev >= 0 && (n == nil || w.events[ev].at <= n.nextAt) {
		e := w.events[ev]
		w.events = append(w.events[:ev], w.events[ev+1:]...)
		w.now = max(w.now, e.at)
		w.logf("event", "%s: %s", e.what, e.do(w))
		return
	}
	if n == nil {
		return
	}
	w.now = max(w.now, n.nextAt)
	w.runNode(n)
}
