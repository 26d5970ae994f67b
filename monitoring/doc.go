// Package monitoring holds no code: its folder carries the Prometheus
// alerting rules (alerts.yml, unit-tested by alerts_test.yml through
// `make alerts`) and the Grafana dashboard (dashboard.json) for etcd-nomad
// clusters. Its Go test checks the dashboard and the rules against the
// metrics the members really export.
package monitoring
