package task

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// storeDelta writes the puts of revisions first.. (one key each) as a
// delta of base, as the recorder does.
func storeDelta(t *testing.T, store snapshot.Store, base snapshot.Meta, first int64, n int) snapshot.Meta {
	t.Helper()
	var seg snapshot.Segment
	for i := range int64(n) {
		rev := first + i
		seg.Events = append(seg.Events, &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(fmt.Sprintf("delta/%06d", rev)), Value: []byte("v"), CreateRevision: rev, ModRevision: rev, Version: 1}})
	}
	plain, err := seg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var enc bytes.Buffer
	size, sum, err := snapshot.Encode(&enc, bytes.NewReader(plain), snapshot.Encryption{})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now().UTC()
	m := snapshot.Meta{Cluster: base.Cluster, Epoch: base.Epoch, Kind: snapshot.KindDelta, Base: base.Name, FirstRevision: seg.First(), Revision: seg.Last(),
		Events: n, Created: created, Codec: snapshot.Codec, EtcdVersion: base.EtcdVersion, Size: size, SHA256: sum}
	m.Name = snapshot.DeltaName(base.Cluster, base.Epoch, m.Revision, created, false)
	ctx := context.Background()
	if m.StoredSize, err = store.Put(ctx, m.Name, bytes.NewReader(enc.Bytes())); err != nil {
		t.Fatal(err)
	}
	if err := store.PutMeta(ctx, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDamagedDeltaLowersTheChainEndBeforeRecording: the planner chose the
// snapshot for its chain's end, which a damaged segment keeps a recovery
// from reaching. The recovery is refused before the next epoch is
// recorded (the record and the member's data untouched); the next
// observation's chain ends before the damaged segment, and the recovery
// chosen for that end installs what precedes it.
func TestDamagedDeltaLowersTheChainEndBeforeRecording(t *testing.T) {
	f := newChainFixture(t)
	k, dir, m, rec, snap, first, second := f.k, f.dir, f.m, f.rec, f.snap, f.first, f.second
	ctx := context.Background()
	var err error
	raw, err := os.ReadFile(filepath.Join(dir, second.Name))
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(filepath.Join(dir, second.Name), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := m.dir.ReadMeta()

	var o planner.Observation
	m.observeLatestSnapshot(ctx, &o, time.Now())
	if o.LatestSnapshot == nil || o.LatestSnapshot.Revision != second.Revision {
		t.Fatalf("observed %+v, want %s with its chain to %d (the damage is not known yet)", o.LatestSnapshot, snap.Name, second.Revision)
	}
	d := planner.Decision{Kind: planner.RecoverQuorum, Name: "m0", From: planner.FromSnapshot, Snapshot: snap.Name,
		Record: &planner.Record{Token: coord.NewToken(), Epoch: 2, Seeder: "m0", Source: planner.SnapshotSource(snap.Name)}}
	m.lockForTest(t)
	err = m.act(ctx, o, d)
	m.releaseLock(ctx)
	var short *datadir.ChainShortError
	if !errors.As(err, &short) || short.End != first.Revision || short.Damaged != second.Name {
		t.Fatalf("recovery over a damaged segment: %v, want refused at revision %d naming %s", err, first.Revision, second.Name)
	}
	if got, err := k.co.Record(ctx); err != nil || got.Epoch != 1 || got.Token != rec.Token {
		t.Fatalf("record after the refused recovery: %+v (%v), want epoch 1 untouched", got, err)
	}
	if aside := m.asideEntries(t); len(aside) != 0 {
		t.Fatalf("data set aside by a refused recovery: %v", aside)
	}
	if meta, err := m.dir.ReadMeta(); err != nil || meta != before {
		t.Fatalf("metadata after the refused recovery: %+v (%v), want %+v", meta, err, before)
	}

	o = planner.Observation{}
	m.observeLatestSnapshot(ctx, &o, time.Now())
	if o.LatestSnapshot == nil || o.LatestSnapshot.Name != snap.Name || o.LatestSnapshot.Revision != first.Revision {
		t.Fatalf("observed after the refusal: %+v, want %s to revision %d", o.LatestSnapshot, snap.Name, first.Revision)
	}
	m.lockForTest(t)
	err = m.act(ctx, o, d)
	m.releaseLock(ctx)
	if err != nil {
		t.Fatalf("recovery for the true chain end: %v", err)
	}
	if got, err := k.co.Record(ctx); err != nil || got.Epoch != 2 || got.Token != d.Record.Token {
		t.Fatalf("record after the recovery: %+v (%v), want epoch 2", got, err)
	}
	if rev := m.dir.Revision(); rev < first.Revision {
		t.Fatalf("installed data at revision %d, want the first segment's %d (plus the bump)", rev, first.Revision)
	}
}

// A restore is all or refuse (docs/design.md, the safety invariants'
// table): an operator's recovery from a snapshot was verified by its
// command to reach the chain's end, and the record says so
// (SourceRevision). A segment damaged between the command and the
// seeder's install makes the install refuse, before anything is moved,
// rather than restore the prefix (before, an operator's record set no
// bound and the seeder installed what came before the damage).
func TestOperatorRestoreReachesWhatItsCommandVerified(t *testing.T) {
	f := newChainFixture(t)
	dir, m, snap, second := f.dir, f.m, f.snap, f.second
	ctx := context.Background()

	// The operator's command verified the whole chain and recorded it.
	op := f.recordOperatorRestore(t)
	// Then the second segment is damaged in the store.
	raw, err := os.ReadFile(filepath.Join(dir, second.Name))
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(filepath.Join(dir, second.Name), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := m.dir.ReadMeta()

	d := planner.Decision{Kind: planner.RecoverQuorum, Name: "m0", From: planner.FromSnapshot, Snapshot: snap.Name, Record: &op}
	m.lockForTest(t)
	err = m.act(ctx, planner.Observation{}, d)
	m.releaseLock(ctx)
	var short *datadir.ChainShortError
	if !errors.As(err, &short) || short.Want != second.Revision {
		t.Fatalf("the operator's restore over a segment damaged since its command verified it: %v, want refused short of revision %d", err, second.Revision)
	}
	if aside := m.asideEntries(t); len(aside) != 0 {
		t.Fatalf("data set aside by a refused restore: %v", aside)
	}
	if meta, err := m.dir.ReadMeta(); err != nil || meta != before {
		t.Fatalf("metadata after the refused restore: %+v (%v), want %+v", meta, err, before)
	}
}

// chainFixture is a one-member cluster m (record rec) with a file snapshot
// store in dir holding a full snapshot and a chain of two delta segments
// after it (first, second: 10 revisions each).
type chainFixture struct {
	k             *kit
	dir           string
	store         snapshot.Store
	m             *Member
	rec           coord.Record
	snap          snapshot.Meta
	first, second snapshot.Meta
}

func newChainFixture(t *testing.T) chainFixture {
	t.Helper()
	f := chainFixture{k: newKit(t, "m0")}
	f.dir = filepath.Join(f.k.dir, "snapshots")
	store, err := file.New(f.dir, f.k.cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	f.store = store
	f.m = f.k.memberWith("m0", f.k.co, &backup.Snapshots{Store: store})
	cli := f.k.seedForTest(f.m)
	put(t, cli, "saved", "in-snapshot")
	f.rec, _ = f.k.co.Record(context.Background())
	f.snap, err = snapshot.Save(context.Background(), snapshot.From{Endpoint: f.m.clientURL(f.m.self), SpoolDir: f.k.dir}, store,
		snapshot.Source{Cluster: f.k.cl.Name, ClusterID: strconv.FormatUint(f.rec.ClusterID, 16), Epoch: 1}, snapshot.Encryption{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.first = storeDelta(t, store, f.snap, f.snap.Revision+1, 10)
	f.second = storeDelta(t, store, f.snap, f.first.Revision+1, 10)
	return f
}

// recordOperatorRestore records, as 'recover -from snapshot:' does once it
// verified the whole chain, an operator's restore of f's snapshot bounded
// by the chain's end, and returns it.
func (f chainFixture) recordOperatorRestore(t *testing.T) planner.Record {
	t.Helper()
	ctx := context.Background()
	op := planner.Record{Token: coord.NewToken(), Epoch: 2, Seeder: "m0", Source: planner.SnapshotSource(f.snap.Name),
		LastConfirmedToken: f.rec.Token, LastConfirmedEpoch: 1, Operator: true, SourceRevision: f.second.Revision, Index: f.rec.Index}
	l, err := f.k.co.Lock(ctx, "operator")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.k.co.UpdateRecord(ctx, l, op); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	return op
}
