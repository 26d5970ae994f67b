package snapshot_test

import (
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// TestRevisionBumpIsNotAConstant: the recovery bump was a constant
// 1,000,000, which above ~555 writes/s and a 30 minute interval let
// watchers see revisions go backwards. It is derived from the write rate
// between snapshots and the snapshot's age, with a floor.
func TestRevisionBumpIsNotAConstant(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(epoch uint64, rev int64, d time.Duration) snapshot.Meta {
		return snapshot.Meta{Cluster: "main", ClusterID: "c1", Epoch: epoch, Revision: rev, Created: t0.Add(d)}
	}
	// Every 30 minutes at 555 writes/s.
	steady := []snapshot.Meta{at(1, 1_000, 0), at(1, 1_000+999_000, 30*time.Minute), at(1, 1_000+2*999_000, time.Hour)}
	newest := steady[2]
	cases := []struct {
		name    string
		snap    snapshot.Meta
		history []snapshot.Meta
		now     time.Time
		want    uint64
	}{
		{"555/s, 30 min old: 4 x 555 x 1800", newest, steady, newest.Created.Add(30 * time.Minute), 3_996_000},
		{"555/s, 2 h old", newest, steady, newest.Created.Add(2 * time.Hour), 4 * 555 * 7200},
		{"just taken: the floor", newest, steady, newest.Created, snapshot.MinRevisionBump},
		{"created in the future (clock skew): the floor", newest, steady, newest.Created.Add(-time.Hour), snapshot.MinRevisionBump},
		{"1 write/s: the floor", at(1, 3600, time.Hour), []snapshot.Meta{at(1, 1, 0), at(1, 3601, time.Hour)}, t0.Add(90 * time.Minute), snapshot.MinRevisionBump},
		{"one snapshot: the assumed rate", newest, []snapshot.Meta{newest}, newest.Created.Add(30 * time.Minute), 4 * 2000 * 1800},
		{"no listing: the assumed rate", newest, nil, newest.Created.Add(30 * time.Minute), 4 * 2000 * 1800},
		{"a burst between two snapshots counts, not the average", newest,
			append(append([]snapshot.Meta{}, steady...), at(1, 1_000+2*999_000+600_000, time.Hour+time.Minute)),
			newest.Created.Add(30 * time.Minute), 4 * 10_000 * 1800},
		{"a restore's jump across epochs is no rate", at(2, 5_000_000, time.Hour),
			[]snapshot.Meta{at(1, 1_000, 0), at(1, 1_801_000, 30*time.Minute), at(2, 5_000_000, time.Hour)},
			t0.Add(90 * time.Minute), 4 * 1000 * 1800},
		{"snapshots under a second apart are no rate", newest,
			[]snapshot.Meta{at(1, 1_000, 0), at(1, 9_000_000, 500*time.Millisecond)},
			newest.Created.Add(30 * time.Minute), 4 * 2000 * 1800},
		{"a day later at a huge rate: capped far below int64's end", at(1, 1e12, time.Second),
			[]snapshot.Meta{at(1, 1, 0), at(1, 1e12, time.Second)}, t0.Add(24 * time.Hour), 1 << 50},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := snapshot.RevisionBump(c.snap, c.history, c.now); got != c.want {
				t.Fatalf("RevisionBump = %d, want %d", got, c.want)
			}
		})
	}
}
