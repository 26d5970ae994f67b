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
	// WayOut is the command an operator ran once the run was stuck (then
	// it had a second quiet phase, which ended healthy); NoWayOut, for a
	// stuck run, why no modeled command applied.
	WayOut, NoWayOut string
	// WayOutFor is why the run was stuck when the operator took the way
	// out.
	WayOutFor string
	// AcceptedLoss: the run lost acknowledged writes an operator accepted
	// to lose (-accept-data-loss), and no other.
	AcceptedLoss bool
	// Impatient counts the impatient operator's commands that wrote.
	Impatient int
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
				if why := w.stuck(); why != "" && !w.cfg.NoOperator && w.op.wayOut == "" && w.op.noWayOut == "" {
					// The operator takes the way out; then the run
					// must end healthy.
					if did, ok := w.wayOut(why); ok && did == "etcd-nomad resume" && !w.op.resumed {
						// Resuming is reading status: the operator looks
						// again after it, once.
						w.op.resumed, w.quietAt = true, w.now
						continue
					} else if ok {
						w.op.wayOut, w.op.wayOutFor, w.quietAt = did, why, w.now
						continue
					} else {
						w.op.noWayOut = did
					}
				}
				if why := w.stuck(); why != "" && w.op.wayOut == "" {
					w.logf("quiet", "stuck: %s (an operator must restore)", why)
					return w.result(why), w
				}
				after := "the faults stopped"
				if w.op.wayOut != "" {
					after = "the operator's way out (" + w.op.wayOut + ")"
				}
				w.violate(InvLiveness, "no healthy cluster of %d voters %s after %s; state:\n%s", w.cfg.Size, fmtDur(w.cfg.QuietTime), after, w.State())
			}
		}
	}
	return w.result(""), w
}

func (w *World) result(stuck string) Result {
	r := Result{Seed: w.cfg.Seed, Steps: w.step, Violation: w.failure, Stuck: stuck, Faults: w.faults, Groups: len(w.groups),
		WayOut: w.op.wayOut, WayOutFor: w.op.wayOutFor, NoWayOut: w.op.noWayOut, AcceptedLoss: w.op.lossSeen, Impatient: w.op.recorded}
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
	w.impatient()
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
