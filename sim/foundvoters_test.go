package sim

import (
	"strings"
	"testing"
)

// Sim seed 180 (collectRunning on, default config): m0-0, a voter of
// cluster 18/g1 (epoch 1, committed 36; the other voter's host is lost),
// runs collected without a leader. Replacements m0-1 and m1-1 found it
// (UnlistedVoters) and wait. Consul loses its state; 6 s later a new
// replacement, m2-1, that never read the summary, seeded a new epoch 1 at
// once (a plain seed waits no grace) while m0-1 still named m0-0. The
// fleet knew of the collected voter and its data; the seeder did not:
// what one member found was never shared. Members now name the voters
// they found in their /status (task's FoundVoters), and peers probe and
// name them too. Fails while a new group starts beside a gone node's copy
// of the same epoch that a live peer names in its last decision (the
// data review of session 13's check, independent of checkNewGroup's).
func TestASeedWaitsBesideAVoterItsPeersFound(t *testing.T) {
	w := New(Config{Seed: 180})
	seen := map[*group]bool{}
	for _, g := range w.groups {
		seen[g] = true
	}
	for w.failure == nil && w.step < 5000 {
		if w.step == w.cfg.FaultSteps {
			w.quiet, w.quietAt = true, w.now
			w.heal()
		}
		w.Step()
		for _, g := range w.groups {
			if seen[g] {
				continue
			}
			seen[g] = true
			for _, n := range w.nodes {
				if !n.gone() || n.data == nil || !n.data.wal || n.data.group == g || n.data.group == nil || n.data.group.epoch != g.epoch {
					continue
				}
				for _, p := range w.nodes {
					if p.up && !p.gone() && strings.Contains(p.lastReason, n.name) && strings.Contains(p.lastReason, "without a leader") {
						t.Fatalf("step %d: %s (epoch %d) started while %s holds %s of the same epoch (revision %d), and %s names it: %q\n%s",
							w.step, g, g.epoch, n.name, n.data.group, n.data.rev, p.name, p.lastReason, w.Trace())
					}
				}
			}
		}
	}
	if w.failure != nil {
		t.Fatalf("seed 180: %v\n%s", w.failure, w.Trace())
	}
}

// checkNewGroup ignores a copy of the same epoch on the disk of an
// allocation Nomad made terminal only while nothing a member could read
// names it: seed 180 with the fix above reverted (NoFoundVotersShared)
// started a second epoch 1 beside a collected voter its live peers named,
// and the check that ignored every terminal copy (f66f067) hid it. Seeds
// 28 and 130 reseed beside terminal copies nothing names (no record, no
// summary, no snapshot, no peer that found them): no member can know of
// them, and the check still lets them be.
//
// Since a seed's first snapshot follows its confirmation and a last voter
// that stops saves one (task's BeforeStop, modelled since), seed 180 shows
// it no more; seed 8920 (a second epoch 1 at 8 s, beside a collected voter
// a live peer found answering) does.
func TestTwoSeedsCountATerminalCopyThatIsNamed(t *testing.T) {
	r, w := Run(Config{Seed: 8920, Defects: Defects{NoFoundVotersShared: true, NoRecordlessSummary: true, NoHoldersShared: true, NoHoldersPersisted: true}}) // the recordless summary and the shared or persisted holders also name it
	if r.Violation == nil || r.Violation.Invariant != InvTwoSeeds || !strings.Contains(r.Violation.Detail, "names it") {
		t.Fatalf("seed 8920 with NoFoundVotersShared: %v, want %q beside the named terminal copy\n%s", r.Violation, InvTwoSeeds, w.Trace())
	}
	for _, s := range []uint64{28, 130, 180, 8920} {
		if r, w := Run(Config{Seed: s}); r.Violation != nil {
			t.Fatalf("seed %d: %v\n%s", s, r.Violation, w.Trace())
		}
	}
}
