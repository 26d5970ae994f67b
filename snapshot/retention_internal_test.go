package snapshot

import (
	"slices"
	"testing"
	"time"
)

// TestRetentionTakesDeltasWithTheirSnapshot: the deltas of an expired
// snapshot go with it; the newest snapshot's stay; deltas whose snapshot
// is not listed go only after OrphanAge (an unreadable metadata file
// hides a snapshot from a listing without it being gone).
func TestRetentionTakesDeltasWithTheirSnapshot(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	full := func(name string, age time.Duration) Meta { return Meta{Name: name, Created: now.Add(-age)} }
	delta := func(name, base string, age time.Duration) Meta {
		return Meta{Name: name, Kind: KindDelta, Base: base, Created: now.Add(-age)}
	}
	list := []Meta{
		full("old", 2*time.Hour), delta("old-d1", "old", 2*time.Hour), delta("old-d2", "old", time.Hour+30*time.Minute),
		full("new", time.Hour), delta("new-d1", "new", 50*time.Minute), delta("new-d2", "new", time.Minute),
		delta("hidden-recent", "hidden", time.Hour), delta("hidden-old", "hidden", OrphanAge+time.Hour),
	}
	var got []string
	for _, m := range append(Expired(Full(list), 1, 0, now), orphanDeltas(list, 1, 0, now)...) {
		got = append(got, m.Name)
	}
	slices.Sort(got)
	want := []string{"hidden-old", "old", "old-d1", "old-d2"}
	if !slices.Equal(got, want) {
		t.Fatalf("retention removes %v, want %v", got, want)
	}
}
