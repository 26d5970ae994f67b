package task

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// metrics are the operator's own, beside etcd's on /metrics. Each gauge
// is set where the state it reports changes; monitoring/README.md lists
// them with the alerts that read them.
type metrics struct {
	reg               *prometheus.Registry
	decisions         *prometheus.CounterVec
	failures          prometheus.Counter
	membershipChanges prometheus.Counter
	lastDecision      prometheus.Gauge
	// awaitingOperator is 1 while the planner's last decision is a Wait
	// that only an operator ends (Decision.AwaitsOperator).
	awaitingOperator prometheus.Gauge
	// paused is 1 while the loop last saw an operator's pause.
	paused prometheus.Gauge
	// corruptAlarms counts etcd's raised CORRUPT alarms (running member);
	// dataCorrupt is 1 while this member's own data is found corrupt.
	corruptAlarms prometheus.Gauge
	dataCorrupt   prometheus.Gauge
	// peerUnhealthy is, per member of the last member list read, how
	// long it has been unhealthy (0 while healthy); staleAfter is the
	// provider's stale_after it is compared with.
	peerUnhealthy *prometheus.GaugeVec
	staleAfter    prometheus.Gauge
	// peers are peerUnhealthy's label values (the loop's alone).
	peers map[string]bool
}

func newMetrics(cluster, member string) *metrics {
	labels := prometheus.Labels{"cluster": cluster, "member": member}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels})
	}
	m := &metrics{
		reg:               prometheus.NewRegistry(),
		decisions:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcd_nomad_decisions_total", Help: "Planner decisions by kind.", ConstLabels: labels}, []string{"kind"}),
		failures:          prometheus.NewCounter(prometheus.CounterOpts{Name: "etcd_nomad_action_failures_total", Help: "Actions that failed.", ConstLabels: labels}),
		membershipChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "etcd_nomad_membership_changes_total", Help: "Learner adds, promotions and removals made by this member.", ConstLabels: labels}),
		lastDecision:      g("etcd_nomad_last_decision_timestamp_seconds", "Time of the last planner decision."),
		awaitingOperator:  g("etcd_nomad_awaiting_operator", "1 while the planner waits for an operator's choice (its last decision's reason says which), else 0."),
		paused:            g("etcd_nomad_paused", "1 while an operator paused the cluster ('etcd-nomad pause'), else 0."),
		corruptAlarms:     g("etcd_nomad_corrupt_alarms", "CORRUPT alarms raised in etcd, as this running member reads them (0 while stopped)."),
		dataCorrupt:       g("etcd_nomad_data_corrupt", "1 while this member's own data is found corrupt (a CORRUPT alarm names it, or its check before start failed), else 0."),
		peerUnhealthy:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "etcd_nomad_peer_unhealthy_seconds", Help: "How long each member of the last member list this member read has been unhealthy (0 while healthy).", ConstLabels: labels}, []string{"peer"}),
		staleAfter:        g("etcd_nomad_stale_after_seconds", "The provider's stale_after: how long a member may be missing before it is removed."),
	}
	m.reg.MustRegister(m.decisions, m.failures, m.membershipChanges, m.lastDecision,
		m.awaitingOperator, m.paused, m.corruptAlarms, m.dataCorrupt, m.peerUnhealthy, m.staleAfter)
	return m
}

func (m *metrics) decision(d planner.Decision) {
	m.decisions.WithLabelValues(string(d.Kind)).Inc()
	m.lastDecision.SetToCurrentTime()
	m.awaitingOperator.Set(boolGauge(d.AwaitsOperator))
}

// observed sets the gauges of what one loop observed.
func (m *metrics) observed(o planner.Observation) {
	m.paused.Set(boolGauge(o.Paused != ""))
	m.corruptAlarms.Set(float64(len(o.CorruptAlarms)))
	m.dataCorrupt.Set(boolGauge(o.Corrupt != ""))
	if !o.MembersKnown {
		return // the last list's values stand: no quorum answers (etcd_server_has_leader says so)
	}
	seen := map[string]bool{}
	for _, mem := range o.Members {
		peer := mem.Name
		if peer == "" {
			peer = fmt.Sprintf("%x", mem.ID) // added, never started
		}
		seen[peer] = true
		m.peerUnhealthy.WithLabelValues(peer).Set(mem.UnhealthyFor.Seconds())
	}
	for p := range m.peers {
		if !seen[p] {
			m.peerUnhealthy.DeleteLabelValues(p) // removed since: its series ends
		}
	}
	m.peers = seen
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
