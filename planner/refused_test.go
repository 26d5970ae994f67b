package planner

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// storeCase is an observation whose decision rests on what the
// snapshot store holds.
type storeCase struct {
	name string
	o    Observation
}

// storeCases are the paths that seed or start from something on what the
// store holds, each acting as generated: an empty seed, a restore of an
// older snapshot, a takeover, this member's own lost seed, a recovery.
func storeCases() []storeCase {
	older := &SnapshotInfo{Name: "kit-e2-snap", Epoch: 2, Revision: 500}
	self := Self{Name: "m0", PeerURL: "https://m0:2380"}
	return []storeCase{
		{"planEmpty: no record, no data, no snapshot (an empty seed)", Observation{
			ClusterName: "kit", Self: self, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n", RecoveryGrace: time.Second, Instances: []Instance{{Name: "m0"}}}},
		{"planEmpty: no record, no data, an older authentic snapshot", Observation{
			ClusterName: "kit", Self: self, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n", RecoveryGrace: time.Second, RecordMissingFor: time.Second, LatestSnapshot: older, Instances: []Instance{{Name: "m0"}}}},
		{"takeoverSeed: a gone seeder's empty seed, no snapshot", Observation{
			ClusterName: "kit", Self: self, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n", RecoveryGrace: time.Second,
			Record: &Record{Token: "t", Epoch: 4, Seeder: "m9"}, SeederGoneFor: time.Minute, Instances: []Instance{{Name: "m0"}}}},
		{"restoreOverOwnRecord: this member's own empty seed, lost", Observation{
			ClusterName: "kit", Self: self, Local: Local{Empty: true}, HoldsLock: true, NewToken: "n", RecoveryGrace: time.Second,
			Record: &Record{Token: "t", Epoch: 4, Seeder: "m0"}, Instances: []Instance{{Name: "m0"}}}},
		{"pickRecovery: quorum lost, best data older", Observation{
			ClusterName: "kit", Self: self, Running: true, SelfID: 1, HoldsLock: true, NewToken: "n", RecoveryGrace: time.Second, QuorumLostFor: time.Minute,
			Local:  Local{Cluster: "kit", Name: "m0", MemberID: 1, ClusterID: 0xc1, Token: "t", Epoch: 3, Revision: 700},
			Record: &Record{ClusterID: 0xc1, Token: "t", Epoch: 3, Seeder: "m0"}, LatestSnapshot: older}},
	}
}

// An object of the store members refuse (no MAC, or the previous KEK's)
// is data that exists and may not be taken (review data11 F1, F3): every
// path that would seed empty or start from something older waits for an
// operator, naming the recover command, and the same observation without
// it acts.
func TestRefusedSnapshotMakesSeedsAndRecoveriesWait(t *testing.T) {
	refused := &RefusedSnapshot{Name: "kit-e3-delta", Base: "kit-e3-snap", Epoch: 3, Revision: 900, Why: "unauthenticated: no MAC"}
	for _, tc := range storeCases() {
		t.Run(tc.name, func(t *testing.T) {
			if d := Plan(tc.o); d.Kind == Wait {
				t.Fatalf("without a refused object the case does not act, so it proves nothing: %s", d.Reason)
			}
			o := tc.o
			o.RefusedSnapshot = refused
			d := Plan(o)
			if d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "recover -from snapshot:kit-e3-snap -accept-unauthenticated") {
				t.Fatalf("beside a refused object newer than anything it may take: %s (awaits operator %v): %s", d.Kind, d.AwaitsOperator, d.Reason)
			}
			// One no newer than the source is history: no wait for it.
			if tc.o.Local.Revision > 0 {
				o.RefusedSnapshot = &RefusedSnapshot{Name: "old", Epoch: 1, Revision: tc.o.Local.Revision, Why: "unauthenticated: no MAC"}
				if d := Plan(o); d.Kind == Wait {
					t.Fatalf("an older refused object held the recovery back: %s", d.Reason)
				}
			}
		})
	}
}

// A store writer can plant a refused object: the planner never takes it,
// whatever else it sees (it only ever costs a wait).
func TestRefusedSnapshotIsNeverTaken(t *testing.T) {
	for _, seed := range seeds(t) {
		rng := rand.New(rand.NewPCG(seed, 13))
		for i := 0; i < generated; i++ {
			o := genObservation(rng)
			if o.RefusedSnapshot == nil {
				continue
			}
			d := Plan(o)
			if d.Snapshot == o.RefusedSnapshot.Name || d.Record != nil && d.Record.Source == SnapshotSource(o.RefusedSnapshot.Name) {
				t.Fatalf("seed %d: the planner took the refused object %s: %s", seed, o.RefusedSnapshot.Name, d.Reason)
			}
		}
	}
}

// Once the members' data passed the refused object's snapshot, the wait
// never advises restoring that snapshot alone (it is older than their
// data): it names the deltas to replay past them, or deleting the object
// so that they recover from their data (review rev12-data F5).
func TestRefusedWaitAdvisesNoBaseOlderThanTheData(t *testing.T) {
	o := storeCases()[4].o // a recovery from data at revision 700
	o.LatestSnapshot = nil
	for _, rs := range []*RefusedSnapshot{
		{Name: "kit-e3-delta", Base: "kit-e3-snap", BaseRevision: 300, Epoch: 3, Revision: 900, Why: "unauthenticated: no MAC"},
		{Name: "kit-e3-snap", BaseRevision: 300, Epoch: 3, Revision: 900, Why: "unauthenticated: no MAC"},
	} {
		o.RefusedSnapshot = rs
		d := Plan(o)
		t.Logf("%s: %s", rs.Name, d.Reason)
		if d.Kind != Wait || !strings.Contains(d.Reason, "never without them") || !strings.Contains(d.Reason, "members recover from revision 700") {
			t.Fatalf("beside %s (its snapshot at revision 300, the data at 700): %s: %s", rs.Name, d.Kind, d.Reason)
		}
	}
}
