package sim

import (
	"fmt"
	"strings"
)

// ring keeps the last events of a run for the trace a failure prints.
type ring struct {
	lines   []string
	next    int
	full    bool
	verbose bool // also log Wait decisions
}

func (r *ring) init(n int) { r.lines = make([]string, n) }

func (r *ring) add(s string) {
	r.lines[r.next] = s
	r.next++
	if r.next == len(r.lines) {
		r.next, r.full = 0, true
	}
}

func (r *ring) all() []string {
	if !r.full {
		return append([]string(nil), r.lines[:r.next]...)
	}
	return append(append([]string(nil), r.lines[r.next:]...), r.lines[:r.next]...)
}

// logf adds one trace line: step, simulated time, who, what happened.
func (w *World) logf(who, format string, args ...any) {
	w.trace.add(fmt.Sprintf("%7d %8s %-9s %s", w.step, fmtDur(w.now), who, fmt.Sprintf(format, args...)))
}

// Trace is the last events of the run, one per line.
func (w *World) Trace() string {
	t := strings.Join(w.trace.all(), "\n")
	if w.failState != "" {
		t += "\nstate at the violation:\n" + w.failState
	}
	return t
}
