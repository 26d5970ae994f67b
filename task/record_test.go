package task

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Every RecordCluster a member writes while an outside
// cluster is migrated in ('etcd-nomad migrate'), shaped as the planner
// shapes it from the record it read (confirm the cluster id, correct it)
// or from this member's data (re-record the same incarnation: no join
// list), must keep the outside members' client URLs: without them,
// members that have not joined yet find no member list to join through
// while the outside members are the cluster's only voters. A record of
// another incarnation (a re-record from newer data) carries none: the
// URLs were of the older one.
func TestRecordWriteBackKeepsTheJoinList(t *testing.T) {
	join := []string{"http://10.0.0.1:2379", "http://10.0.0.2:2379"}
	for _, tc := range []struct {
		what   string
		stored coord.Record
		// decide shapes the decision's record from the stored record, as
		// planner/plan.go does.
		decide   func(planner.Record) planner.Record
		wantJoin []string
	}{
		{"confirm the cluster id", coord.Record{Token: "t1", Epoch: 1, Seeder: "migrate", Join: join},
			func(r planner.Record) planner.Record { r.ClusterID = 0xc1; return r }, join},
		{"correct the cluster id", coord.Record{ClusterID: 0xc0, Token: "t1", Epoch: 1, Seeder: "migrate", Join: join},
			func(r planner.Record) planner.Record { r.ClusterID = 0xc1; return r }, join},
		{"re-record the same incarnation from data", coord.Record{ClusterID: 0xc1, Token: "t1", Epoch: 1, Seeder: "migrate", Join: join},
			func(r planner.Record) planner.Record {
				return planner.Record{ClusterID: 0xc1, Token: "t1", Epoch: 1, Seeder: "m0"}
			}, join},
		{"re-record a newer incarnation from data", coord.Record{ClusterID: 0xc1, Token: "t1", Epoch: 1, Seeder: "migrate", Join: join},
			func(r planner.Record) planner.Record {
				return planner.Record{ClusterID: 0xc2, Token: "t2", Epoch: 2, Seeder: "m0"}
			}, nil},
	} {
		t.Run(tc.what, func(t *testing.T) {
			k := newKit(t, "m0")
			m := k.member("m0", nil)
			ctx := context.Background()
			l, err := k.co.Lock(ctx, "migrate")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := k.co.CreateRecord(ctx, l, tc.stored); err != nil {
				t.Fatal(err)
			}
			l.Unlock(ctx)
			m.lockForTest(t)
			defer m.releaseLock(ctx)
			m.mu.Lock()
			view := *m.record
			m.mu.Unlock()
			if !view.Migrating() {
				t.Fatalf("the planner's view of a record with a join list: %+v, want Migrating", view)
			}
			rc := tc.decide(view)
			if err := m.act(ctx, planner.Observation{}, planner.Decision{Kind: planner.RecordCluster, Name: "m0", Record: &rc}); err != nil {
				t.Fatalf("record cluster: %v", err)
			}
			got, err := k.co.Record(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got.ClusterID != rc.ClusterID || got.Token != rc.Token || got.Epoch != rc.Epoch || !slices.Equal(got.Join, tc.wantJoin) {
				t.Fatalf("record written back: %+v, want cluster %x token %s epoch %d with join list %v", got, rc.ClusterID, rc.Token, rc.Epoch, tc.wantJoin)
			}
		})
	}
}

// The join list a write-back keeps is the one of the record it replaces,
// compared and swapped: once the migration cleared it ('etcd-nomad
// migrate' finishing), a member's write from the record it read before
// fails and brings back nothing.
func TestRecordWriteBackNeverBringsBackAClearedJoinList(t *testing.T) {
	k := newKit(t, "m0")
	m := k.member("m0", nil)
	ctx := context.Background()
	l, err := k.co.Lock(ctx, "migrate")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.co.CreateRecord(ctx, l, coord.Record{ClusterID: 0xc0, Token: "t1", Epoch: 1, Seeder: "migrate", Join: []string{"http://10.0.0.1:2379"}}); err != nil {
		t.Fatal(err)
	}
	l.Unlock(ctx)
	m.lockForTest(t) // m reads the record with its join list
	defer m.releaseLock(ctx)
	// The migration finishes meanwhile (its own lock holder: a second
	// writer under Consul's liveness-first locks).
	cur, err := k.co.Record(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cur.Join = nil
	if _, err := k.co.UpdateRecord(ctx, m.lock, cur); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	rc := *m.record
	m.mu.Unlock()
	rc.ClusterID = 0xc1
	err = m.act(ctx, planner.Observation{}, planner.Decision{Kind: planner.RecordCluster, Name: "m0", Record: &rc})
	got, rerr := k.co.Record(ctx)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil || len(got.Join) != 0 {
		t.Fatalf("write-back from a record read before the join list was cleared: %v; stored %+v, want a conflict and no join list", err, got)
	}
}

// An operator's restore record accepts per line (review of the operator
// model, session 13, F2): the list survives the coordinator's JSON both
// ways, and a member of an older release, which decodes the record
// without it and writes back what it knows, leaves the narrowest bound,
// never one that accepts more of a line than the command saw.
func TestRecordKeepsWhatAnOperatorAcceptedPerLine(t *testing.T) {
	rec := planner.Record{Token: "tokR", Epoch: 4, Seeder: "m1", Source: planner.SnapshotSource("s3"), LastConfirmedToken: "tok3", LastConfirmedEpoch: 3,
		Operator: true, SourceRevision: 280, AcceptedRevision: 280,
		Accepted: []planner.AcceptedLine{{Epoch: 3, Revision: 280}, {Token: "tok2", Epoch: 2, Revision: 1000}, {Token: "tok3", Epoch: 3, Revision: 300}}}
	raw, _ := throughJSON(t, rec)
	// An older member's record type: every field but Accepted.
	type olderRecord struct {
		ClusterID          uint64 `json:"cluster_id"`
		Token              string `json:"token"`
		Epoch              uint64 `json:"epoch"`
		Seeder             string `json:"seeder"`
		Source             string `json:"source,omitempty"`
		LastConfirmedToken string `json:"last_confirmed_token,omitempty"`
		LastConfirmedEpoch uint64 `json:"last_confirmed_epoch,omitempty"`
		Operator           bool   `json:"operator,omitempty"`
		SourceRevision     int64  `json:"source_revision,omitempty"`
		AcceptedRevision   int64  `json:"accepted_revision,omitempty"`
	}
	var old olderRecord
	if err := json.Unmarshal(raw, &old); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	back, err := coord.DecodeRecord(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Accepted) != 0 || back.AcceptedRevision != 280 || !back.Operator {
		t.Fatalf("written back by an older member: %+v, want no list and the narrowest bound 280", back)
	}
}

// Review rev13b D3: the highest epoch a record named goes through the
// coordinator's JSON and through a write-back, so that no later epoch is
// recorded at or below it.
func TestRecordKeepsItsHighestEpoch(t *testing.T) {
	rec := planner.Record{ClusterID: 0xc2, Token: "tok2", Epoch: 2, Seeder: "m0", HighestEpoch: 3}
	_, back := throughJSON(t, rec)
	if w := writeBack(back, back); w.HighestEpoch != 3 {
		t.Fatalf("written back: highest epoch %d, want 3", w.HighestEpoch)
	}
}

// throughJSON stores rec as the coordinator does and reads it back: the
// JSON and the record decoded, which must be rec again.
func throughJSON(t *testing.T, rec planner.Record) ([]byte, coord.Record) {
	t.Helper()
	raw, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	back, err := coord.DecodeRecord(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rec) {
		t.Fatalf("record through the coordinator's JSON: %+v, want %+v", back, rec)
	}
	return raw, back
}
