package snapshot

import (
	"sort"
	"time"
)

// Expired returns the snapshots retention removes: beyond the newest
// keepCount, or older than maxAge (if positive). The newest snapshot is
// never returned, whatever the settings. Pure: now is passed in.
func Expired(list []Meta, keepCount int, maxAge time.Duration, now time.Time) []Meta {
	if len(list) == 0 {
		return nil
	}
	sorted := append([]Meta(nil), list...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Created.After(sorted[j].Created) })
	keepCount = max(keepCount, 1)
	var out []Meta
	for i, m := range sorted {
		if i == 0 {
			continue // the newest stays
		}
		if i >= keepCount || (maxAge > 0 && now.Sub(m.Created) > maxAge) {
			out = append(out, m)
		}
	}
	return out
}
