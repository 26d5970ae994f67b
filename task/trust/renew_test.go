package trust

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestCertificateWarningTimestampFollowsExpiry(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newRenewal(reg, prometheus.Labels{"cluster": "c", "member": "m1"}, func(name string) time.Duration {
		if name == certCA {
			return 30 * 24 * time.Hour
		}
		return time.Hour
	})
	exp := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	r.set(certMember, exp)
	r.set(certCA, exp)
	warnAt := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "etcd_nomad_certificate_warning_timestamp_seconds" {
				continue
			}
			for _, mt := range mf.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "certificate" {
						out[l.GetValue()] = mt.GetGauge().GetValue()
					}
				}
			}
		}
		return out
	}
	if v := warnAt()[certMember]; v != float64(exp.Add(-time.Hour).Unix()) {
		t.Errorf("member warning at %v, want an hour before its expiry", time.Unix(int64(v), 0).UTC())
	}
	if v := warnAt()[certCA]; v != float64(exp.Add(-30*24*time.Hour).Unix()) {
		t.Errorf("CA warning at %v, want 30 days before its expiry", time.Unix(int64(v), 0).UTC())
	}
	renewed := exp.Add(24 * time.Hour)
	r.set(certMember, renewed)
	if v := warnAt()[certMember]; v != float64(renewed.Add(-time.Hour).Unix()) {
		t.Errorf("renewed member warning at %v, want an hour before its new expiry", time.Unix(int64(v), 0).UTC())
	}
	r.forgetCAs()
	if n := len(warnAt()); n != 1 {
		t.Errorf("%d warning series after the CAs were forgotten, want 1 (member)", n)
	}
}
