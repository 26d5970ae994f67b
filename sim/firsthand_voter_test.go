package sim

import (
	"testing"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Sim seed 1004733: m0-2 started restored cluster 465 (epoch 3) and
// confirmed it; m2-3 found it serving, listed, under that record. Consul
// lost its state, Nomad collected m0-2 while it served, and Consul came
// back with an older record (epoch 2, cluster 2f5) and summary. m2-3 had
// found m0-2 again without a record and kept it only as a word, as did
// every other member; under the older record narrowPeersWord let no
// answer extend it, so one grace later the replacement m0-3, which had
// waited beside m0-2 ("member(s) m0-2 ... answer as healthy voters"),
// recovered epoch 3 again from snap-916. Two fixes, each enough here:
// a member's own find stays its own (rememberListedVoter, takeFoundVoters:
// m2-3 keeps finding m0-2, its peers keep its word), reverted by
// ListedVoterBecomesWord; and m0-2, whose last record read was none,
// beats the summary for its own data's cluster (publishSummaryUnlisted),
// reverted by NoRecordlessSummary. The seed breaks with both reverted,
// and the memory of listed data holders (ForgetListedHolder), a third fix
// enough here since (its probe's answers are m0-3's own find).
func TestAFirstHandVoterOutlivesConsulsRollback(t *testing.T) {
	r, w := Run(Config{Seed: 1004733, Defects: Defects{ListedVoterBecomesWord: true, NoRecordlessSummary: true, ForgetListedHolder: true, Planner: planner.Faults{SnapshotUnconfirmed: true}}}) // the first save failing: since the first snapshot follows the confirmation, the restore of 465 comes first
	if r.Violation == nil || r.Violation.Invariant != InvTwoSeeds {
		t.Fatalf("seed 1004733 with ListedVoterBecomesWord and NoRecordlessSummary: %v, want %q\n%s", r.Violation, InvTwoSeeds, w.Trace())
	}
	for _, d := range []Defects{{}, {ListedVoterBecomesWord: true, Planner: planner.Faults{SnapshotUnconfirmed: true}}, {NoRecordlessSummary: true, Planner: planner.Faults{SnapshotUnconfirmed: true}}} {
		if r, w := Run(Config{Seed: 1004733, Defects: d}); r.Violation != nil {
			t.Fatalf("seed 1004733 with word %v, no recordless summary %v: %v\n%s", d.ListedVoterBecomesWord, d.NoRecordlessSummary, r.Violation, w.Trace())
		}
	}
}
