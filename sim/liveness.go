package sim

import "strings"

// StuckKind names the kind of a stuck run's reason (Result.Stuck): the
// situation the planner or the checker left to an operator, without the
// epochs, names and revisions that differ from run to run.
func StuckKind(why string) string {
	for _, k := range stuckKinds {
		if strings.Contains(why, k.text) {
			return k.kind
		}
	}
	if i := strings.IndexAny(why, "0123456789"); i > 0 {
		why = why[:i]
	}
	return "other: " + why
}

// stuckKinds maps a phrase of a reason to its kind, first match wins.
var stuckKinds = []struct{ text, kind string }{
	{"the cluster is paused", "an operator's pause (Consul's restore brought it back)"},
	{"is a learner holding revision", "a learner holds newer data than the best recovery source"},
	{"learner m", "a learner holds newer data than the best recovery source"},
	{"nothing to recover from", "quorum lost, nothing to recover from"},
	{"two incarnations of one epoch", "two incarnations of one epoch"},
	{"data at revision", "older-epoch data newer than the best recovery source"},
	{"beside data of another token of its epoch", "an unconfirmed seed record of a gone seeder beside another incarnation of its epoch"},
	{"whose seeder is gone, beside", "an unconfirmed newer record whose seeder is gone beside an older epoch with a quorum"},
	{"and never confirmed, while this member's epoch", "an unconfirmed newer record whose seeder is gone beside an older epoch with a quorum"},
	{"lost that data", "the seeder of a recovery from data lost that data"},
	{"from data it no longer holds", "the seeder of a recovery from data lost that data"},
	{"only a confirmed newer epoch sets data aside", "a record not confirmed (or of the same epoch) beside another incarnation's data"},
	{"not restarting as a new cluster beside it", "a recorded recovery whose old cluster answers again"},
	{"not resuming it from older data", "a recorded recovery whose old cluster answers again"},
	{"recorded restore waits", "a recorded recovery whose old cluster answers again"},
	{"may hold writes no other copy has", "older data kept: the newer recorded incarnation has no copy"},
	{"recorded a seed of epoch", "a recorded seed beside another incarnation"},
	{"no voter's copy of the recorded incarnation", "no copy of the recorded incarnation, no snapshot"},
	{"whose cluster does not answer with a quorum while every instance answers", "a never-started recovery under an older record no quorum answers for"},
}
