package snapshot

import (
	"fmt"
	"sort"
)

// Later reports whether a is a later state of the data than b: a higher
// epoch, then a higher revision; the time it was created (the taker's wall
// clock, which may run ahead or behind) only breaks a tie. Every ordering
// of snapshots that decides what is newest (Newest, retention) uses it, so
// a member whose clock runs ahead cannot make its older snapshot the one a
// recovery restores or the one retention keeps.
func Later(a, b Meta) bool {
	if a.Epoch != b.Epoch {
		return a.Epoch > b.Epoch
	}
	if a.Revision != b.Revision {
		return a.Revision > b.Revision
	}
	return a.Created.After(b.Created)
}

// sortOldestFirst sorts list in place, oldest state first (Later).
func sortOldestFirst(list []Meta) {
	sort.SliceStable(list, func(i, j int) bool { return Later(list[j], list[i]) })
}

// ClockDisagrees names, for a warning, the first pair of full snapshots of
// one cluster whose creation times order them against their data (a later
// epoch or revision created "before" an earlier one): the clock of one of
// the members that took them is off. "" when the clocks agree.
func ClockDisagrees(list []Meta) string {
	fulls := Full(list)
	sortOldestFirst(fulls)
	for i := 1; i < len(fulls); i++ {
		prev, next := fulls[i-1], fulls[i]
		if prev.Cluster == next.Cluster && Later(next, prev) && next.Created.Before(prev.Created) {
			return fmt.Sprintf("snapshot %s (epoch %d, revision %d) was created at %s by its taker's clock, before %s (epoch %d, revision %d) at %s",
				next.Name, next.Epoch, next.Revision, next.Created.UTC().Format("2006-01-02T15:04:05Z"),
				prev.Name, prev.Epoch, prev.Revision, prev.Created.UTC().Format("2006-01-02T15:04:05Z"))
		}
	}
	return ""
}
