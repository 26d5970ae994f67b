package planner

import (
	"math"
	"testing"
)

// TestNextEpochAboveNeverTakesAPlantedHighestEpoch (review rev14c-data
// S3): `snapshot restore` recorded max(epoch, highest_epoch, snapshot's)+1
// and refused only at exactly 2^64-1, so a planted highest_epoch near 2^64
// was recorded as a real epoch, after which every new incarnation waited
// for an edit of Consul by hand. It now records above the plausible top
// (a highest_epoch far above the epoch is ignored, as `recover` does) and
// refuses an epoch that leaves no room below 2^64.
func TestNextEpochAboveNeverTakesAPlantedHighestEpoch(t *testing.T) {
	for _, c := range []struct {
		rec   Record
		snap  uint64
		want  uint64
		fails bool
	}{
		{Record{Epoch: 2}, 1, 3, false},
		{Record{Epoch: 2, HighestEpoch: 4}, 1, 5, false},                  // keep-running's floor
		{Record{Epoch: 2}, 6, 7, false},                                   // a snapshot of a later epoch
		{Record{Epoch: 2, HighestEpoch: math.MaxUint64 - 5}, 1, 3, false}, // planted: ignored
		{Record{Epoch: math.MaxUint64 - 5}, 1, 0, true},                   // no room
		{Record{Epoch: 2}, math.MaxUint64, 0, true},
	} {
		got, err := c.rec.NextEpochAbove(c.snap)
		if c.fails != (err != nil) || got != c.want {
			t.Errorf("%+v beside snapshot epoch %d: %d, %v; want %d (error: %v)", c.rec, c.snap, got, err, c.want, c.fails)
		}
	}
}
