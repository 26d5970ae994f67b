package task

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// The gauges the alerts in monitoring/ read move with the state they
// report: set where it changes (the loop's observation and decision, the
// certificates' renewal, the snapshot options), each series ending when
// its subject does.

// series reads reg's series of metric name: each one's value by its
// label (the metric's one variable label, "" for a plain gauge).
func series(t *testing.T, reg prometheus.Gatherer, name, label string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			key := ""
			for _, l := range mt.GetLabel() {
				if l.GetName() == label {
					key = l.GetValue()
				}
			}
			out[key] = mt.GetGauge().GetValue()
		}
	}
	return out
}

// gauge reads reg's plain gauge name; -1 when absent.
func gauge(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	if v, ok := series(t, reg, name, "")[""]; ok {
		return v
	}
	return -1
}

func TestAwaitingOperatorFollowsTheDecision(t *testing.T) {
	m := newMetrics("c", "m1")
	m.decision(planner.Decision{Kind: planner.Wait, AwaitsOperator: true, Reason: "two incarnations: an operator must choose"})
	if v := gauge(t, m.reg, "etcd_nomad_awaiting_operator"); v != 1 {
		t.Fatalf("etcd_nomad_awaiting_operator = %v after a wait for an operator, want 1", v)
	}
	m.decision(planner.Decision{Kind: planner.Wait, Reason: "nothing to do"})
	if v := gauge(t, m.reg, "etcd_nomad_awaiting_operator"); v != 0 {
		t.Fatalf("etcd_nomad_awaiting_operator = %v after a plain wait, want 0", v)
	}
}

func TestObservationGaugesMove(t *testing.T) {
	m := newMetrics("c", "m1")
	m.observed(planner.Observation{Paused: "paused by ops since 2026-11-26T00:00:00Z", CorruptAlarms: []uint64{0x2, 0x3}, Corrupt: "etcd's CORRUPT alarm names this member",
		MembersKnown: true, Members: []planner.Member{{ID: 1, Name: "m1", Healthy: true}, {ID: 2, Name: "m2", UnhealthyFor: 90 * time.Second}, {ID: 0xab}}})
	for name, want := range map[string]float64{"paused": 1, "corrupt_alarms": 2, "data_corrupt": 1} {
		if v := gauge(t, m.reg, "etcd_nomad_"+name); v != want {
			t.Errorf("etcd_nomad_%s = %v, want %v", name, v, want)
		}
	}
	peers := func() map[string]float64 { return series(t, m.reg, "etcd_nomad_peer_unhealthy_seconds", "peer") }
	if v := peers()["m2"]; v != 90 {
		t.Errorf("etcd_nomad_peer_unhealthy_seconds{peer=m2} = %v, want 90", v)
	}
	if n := len(peers()); n != 3 {
		t.Errorf("%d peer series, want 3 (m1, m2, and the unstarted member by its id)", n)
	}

	// Resumed, alarms cleared, m2 healthy again, the unstarted member removed.
	m.observed(planner.Observation{MembersKnown: true, Members: []planner.Member{{ID: 1, Name: "m1", Healthy: true}, {ID: 2, Name: "m2", Healthy: true}}})
	for _, name := range []string{"paused", "corrupt_alarms", "data_corrupt"} {
		if v := gauge(t, m.reg, "etcd_nomad_"+name); v != 0 {
			t.Errorf("etcd_nomad_%s = %v after it cleared, want 0", name, v)
		}
	}
	if v, ok := peers()["m2"]; !ok || v != 0 {
		t.Errorf("etcd_nomad_peer_unhealthy_seconds{peer=m2} = %v once healthy, want 0", v)
	}
	if n := len(peers()); n != 2 {
		t.Errorf("%d peer series after a removal, want 2", n)
	}

	// Without a member list (no quorum) the last values stand.
	m.observed(planner.Observation{Members: nil})
	if n := len(peers()); n != 2 {
		t.Errorf("%d peer series without a member list, want the last 2", n)
	}
}
