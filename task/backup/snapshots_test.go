package backup

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcd-nomad/etcd-nomad/coord/local"
	"github.com/etcd-nomad/etcd-nomad/datadir"
)

// newForTest is member name's backups on the coordinator co (none when
// nil), with no store, in a data dir of its own.
func newForTest(t *testing.T, name string, co *local.Coordinator) *Backups {
	t.Helper()
	cfg := Config{Cluster: "kit", Name: name, Dir: datadir.Dir{Root: filepath.Join(t.TempDir(), name)}, Log: hclog.NewNullLogger(), Now: time.Now,
		Metrics: prometheus.NewRegistry(), Context: context.Background()}
	if co != nil {
		cfg.Coordinator = co
	}
	return New(cfg)
}

// The snapshot lease: while one member holds it, a
// leader that takes over does not start a second upload; the holder's
// release frees it; a lease past its end (its holder was killed mid-upload)
// is taken over. On the real local coordinator.
func TestSnapshotLeaseExcludesASecondUploader(t *testing.T) {
	co, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m0, m1 := newForTest(t, "m0", co), newForTest(t, "m1", co)
	ctx := context.Background()
	release0, err := m0.takeSnapshotLease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.takeSnapshotLease(ctx); !errors.Is(err, errSnapshotLeaseHeld) {
		t.Fatalf("second uploader: %v, want errSnapshotLeaseHeld", err)
	}
	if _, err := m0.takeSnapshotLease(ctx); err != nil { // a restarted holder takes its own back
		t.Fatalf("holder retaking its lease: %v", err)
	}
	release0()
	if _, err := m1.takeSnapshotLease(ctx); err != nil {
		t.Fatalf("after the holder released it: %v", err)
	}
	// m1 is killed (never releases): its lease blocks m0 until it ends.
	if _, err := m0.takeSnapshotLease(ctx); !errors.Is(err, errSnapshotLeaseHeld) {
		t.Fatalf("lease of a killed holder taken before its end: %v", err)
	}
	if err := m1.storeSnapshotLease(ctx, co, snapshotLease{Holder: "m1", Until: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := m0.takeSnapshotLease(ctx); err != nil {
		t.Fatalf("an expired lease was not taken over: %v", err)
	}
	if l, err := m0.loadSnapshotLease(ctx); err != nil || l.Holder != "m0" || time.Until(l.Until) < snapshotTimeout {
		t.Fatalf("lease after the takeover: %+v %v, want m0's, valid longer than a save", l, err)
	}
}

func TestSnapshotIntervalsAreExported(t *testing.T) {
	labels := prometheus.Labels{"cluster": "c", "member": "m1"}
	reg := prometheus.NewRegistry()
	newSnapshotMetrics(reg, labels, &Snapshots{Interval: time.Hour, DeltaEvery: 5 * time.Second})
	if v := gauge(t, reg, "etcd_nomad_snapshot_interval_seconds"); v != 3600 {
		t.Errorf("etcd_nomad_snapshot_interval_seconds = %v, want 3600", v)
	}
	if v := gauge(t, reg, "etcd_nomad_delta_interval_seconds"); v != 5 {
		t.Errorf("etcd_nomad_delta_interval_seconds = %v, want 5", v)
	}
	off := prometheus.NewRegistry()
	newSnapshotMetrics(off, labels, nil)
	if gauge(t, off, "etcd_nomad_snapshot_interval_seconds") != 0 || gauge(t, off, "etcd_nomad_delta_interval_seconds") != 0 {
		t.Error("snapshots off: the intervals are not 0")
	}
}

// gauge reads reg's plain gauge name (-1: none).
func gauge(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}
