package snapshot

import (
	"strings"
	"testing"
	"time"
)

// The newest snapshot is chosen by its data: a member whose clock runs an hour ahead took the older
// snapshot. The newest is the one with the later data (epoch, revision),
// whatever the takers' clocks say: a recovery restores it, a delta chain
// extends it, retention keeps it, and the disagreement is named.
func TestNewestSnapshotFollowsTheDataNotTheTakersClock(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ahead := Meta{Name: "a", Cluster: "c", Epoch: 1, Revision: 100, Created: now.Add(time.Hour)}
	newer := Meta{Name: "b", Cluster: "c", Epoch: 1, Revision: 200, Created: now}
	delta := Meta{Name: "b-d", Cluster: "c", Kind: KindDelta, Base: "b", FirstRevision: 201, Revision: 250, Created: now}
	list := []Meta{newer, ahead, delta}

	full, chain, end, ok := Newest(list)
	if !ok || full.Name != "b" || len(chain) != 1 || end != 250 {
		t.Fatalf("Newest = %s with %d deltas to %d, want b with its delta to 250", full.Name, len(chain), end)
	}
	expired := Expired(Full(list), 1, 0, now)
	if len(expired) != 1 || expired[0].Name != "a" {
		t.Fatalf("retention keeping 1 removes %v, want the older data a", expired)
	}
	if msg := ClockDisagrees(list); !strings.Contains(msg, "snapshot b ") {
		t.Fatalf("ClockDisagrees = %q, want it to name b", msg)
	}
	// A later epoch beats a higher revision of an earlier one.
	recovered := Meta{Name: "e2", Cluster: "c", Epoch: 2, Revision: 150, Created: now.Add(-time.Minute)}
	if full, _, _, _ := Newest(append(list, recovered)); full.Name != "e2" {
		t.Fatalf("Newest = %s, want the epoch-2 snapshot", full.Name)
	}
	if msg := ClockDisagrees([]Meta{ahead}); msg != "" {
		t.Fatalf("one snapshot: %q", msg)
	}
}
