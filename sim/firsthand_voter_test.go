package sim

import "testing"

// Sim seed 1004733: m0-2 started restored cluster 465 (epoch 3) and
// confirmed it; m2-3 found it serving, listed, under that record. Consul
// lost its state, Nomad collected m0-2 while it served, and Consul came
// back with an older record (epoch 2, cluster 2f5). m2-3 had found m0-2
// again without a record and kept it only as a word, as did every other
// member; under the older record narrowPeersWord let no answer extend it,
// so one grace later the replacement m0-3, which had waited beside m0-2
// ("member(s) m0-2 ... answer as healthy voters"), recovered epoch 3 again
// from snap-916. A member's own find stays its own (rememberListedVoter,
// takeFoundVoters): m2-3 keeps finding m0-2 and its peers keep its word.
// ListedVoterBecomesWord reverts it.
func TestAFirstHandVoterOutlivesConsulsRollback(t *testing.T) {
	r, w := Run(Config{Seed: 1004733, Defects: Defects{ListedVoterBecomesWord: true}})
	if r.Violation == nil || r.Violation.Invariant != InvTwoSeeds {
		t.Fatalf("seed 1004733 with ListedVoterBecomesWord: %v, want %q\n%s", r.Violation, InvTwoSeeds, w.Trace())
	}
	if r, w := Run(Config{Seed: 1004733}); r.Violation != nil {
		t.Fatalf("seed 1004733: %v\n%s", r.Violation, w.Trace())
	}
}
