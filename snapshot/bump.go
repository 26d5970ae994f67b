package snapshot

import (
	"math"
	"sort"
	"time"
)

// MinRevisionBump is the least a restore adds to every revision: the
// constant used before the bump was derived, kept as a floor for a cluster
// that writes little.
const MinRevisionBump = 1_000_000

// bumpSafety multiplies the measured write rate. The rate between two
// snapshots is an average over the interval (30 minutes, say), which
// hides bursts; and a bump too large costs nothing (revisions are int64
// and the bumped range is marked compacted), while one too small lets
// watchers see revisions go backwards.
const bumpSafety = 4

// AssumedWriteRate (revisions per second) stands in for the measured rate
// when the listing holds no two snapshots of one incarnation to measure
// it from (the first snapshot, or the first after a restore).
const AssumedWriteRate = 2000.0

// maxRevisionBump keeps revision+bump far from int64's end, whatever the
// clock says (a snapshot restored years later).
const maxRevisionBump = 1 << 50

// WriteRate estimates a cluster's write rate, in revisions per second,
// from a listing: the highest rate between two consecutive snapshots of
// one incarnation (same cluster, cluster id and epoch; across epochs
// revisions jump by a restore's bump). Pairs less than a second apart are
// skipped. ok is false when no pair gives a rate.
func WriteRate(list []Meta) (rate float64, ok bool) {
	sorted := append([]Meta(nil), list...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Created.Before(sorted[j].Created) })
	type incarnation struct {
		cluster, id string
		epoch       uint64
	}
	prev := map[incarnation]Meta{}
	for _, m := range sorted {
		k := incarnation{m.Cluster, m.ClusterID, m.Epoch}
		p, seen := prev[k]
		prev[k] = m
		if !seen {
			continue
		}
		dt := m.Created.Sub(p.Created).Seconds()
		if dt < 1 || m.Revision <= p.Revision {
			continue
		}
		if r := float64(m.Revision-p.Revision) / dt; r > rate {
			rate, ok = r, true
		}
	}
	return rate, ok
}

// RevisionBump returns how much a restore of snap adds to every revision
// so that no watcher sees revisions go backwards. The lost cluster may
// have gone on writing from snap's creation until now: at most rate × age
// revisions, with the rate from WriteRate over history (AssumedWriteRate
// without one) times a safety factor of 4, and never less than
// MinRevisionBump. Pure: now is passed in.
func RevisionBump(snap Meta, history []Meta, now time.Time) uint64 {
	rate, ok := WriteRate(history)
	if !ok {
		rate = AssumedWriteRate
	}
	age := max(now.Sub(snap.Created), 0)
	bump := math.Ceil(bumpSafety * rate * age.Seconds())
	switch {
	case bump < MinRevisionBump:
		return MinRevisionBump
	case bump > maxRevisionBump:
		return maxRevisionBump
	}
	return uint64(bump)
}
