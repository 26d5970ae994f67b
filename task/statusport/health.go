// Package statusport is the member's status port: the listener and its
// limits, /health's answer (HealthAnswer), /status, /metrics and the
// exchange's pacing. It imports no part of the supervisor: the loop hands
// it its status, TLS config, metrics and the exchange's handler
// (Config).
package statusport

import (
	"fmt"
	"net/http"

	"github.com/etcd-nomad/etcd-nomad/status"
)

// QuotaWarnShare is the share of quota_backend_bytes above which /health
// turns the Consul check to warning, before etcd refuses writes.
const QuotaWarnShare = 0.8

// HealthAnswer is /health's answer to the member's status st and its
// health verdict err (nil: healthy), with quota the cluster's
// quota_backend_bytes (0: none): the HTTP code and the one-line text that
// Consul shows as the check's output. 200 passes the check, 429 turns it
// to warning (the member serves), 503 fails it.
func HealthAnswer(st status.Member, err error, quota int64) (code int, body string) {
	role := "voter"
	if st.Learner {
		role = "learner"
	}
	if st.Leader {
		role = "leader"
	}
	// A CA mismatch is named in the body (the Consul check's output)
	// but does not fail the check: this member runs with the CA its
	// peers trust and serves them; only members that start later are
	// kept out. Failing it would make Nomad block deployments and
	// restart working members, which cannot fix a CA in Consul.
	warn := ""
	if st.Paused != "" {
		warn += " PAUSED (" + st.Paused + ")"
	}
	if st.CAMismatch != nil {
		warn += " WARNING ca_mismatch: the coordinator holds another cluster CA; new members cannot join: " + st.CAMismatch.String()
	}
	if st.CAKeyExposed != "" {
		// Named, not failing nor turning the check to warning: the
		// migration that sets it runs during a rolling update, which
		// a check short of passing would block.
		warn += " WARNING ca_key_exposed: " + st.CAKeyExposed
	}
	rotRefused := st.CA != nil && st.CA.Refused != ""
	if rotRefused {
		warn += " WARNING ca_rotation_refused: " + st.CA.Refused
	}
	if err != nil {
		return http.StatusServiceUnavailable, fmt.Sprintf("unhealthy: %s: %v%s\n", st.Name, err, warn)
	}
	if st.CertWarning != "" {
		warn += " WARNING " + st.CertWarning
	}
	if len(st.Corrupt) > 0 {
		// A warning, not critical: the member serves reads; the
		// corrupt member's data is set aside and its alarm disarmed.
		return http.StatusTooManyRequests, fmt.Sprintf("warning: %s role=%s CORRUPT alarm raised for %d member(s) (which: /status): writes refused until their data is set aside and the alarm disarmed%s\n", st.Name, role, len(st.Corrupt), warn)
	}
	if st.NoSpace || quota > 0 && float64(st.DBSize) > QuotaWarnShare*float64(quota) {
		// Consul shows 429 as a warning: the member serves, but
		// writes stop (NOSPACE) or will soon.
		if st.NoSpace {
			warn = "; NOSPACE alarm raised: writes refused until maintenance compacts, defragments and disarms it" + warn
		}
		return http.StatusTooManyRequests, fmt.Sprintf("warning: %s role=%s db_size=%d is %.0f%% of quota_backend_bytes %d (warning above %.0f%%)%s\n", st.Name, role, st.DBSize, 100*float64(st.DBSize)/float64(quota), quota, QuotaWarnShare*100, warn)
	}
	if st.CertWarning != "" || rotRefused {
		// Consul shows 429 as a warning: renewal is late (or the
		// CA near its end), or someone wrote a CA rotation record
		// this member refuses; the member serves.
		return http.StatusTooManyRequests, fmt.Sprintf("warning: %s role=%s%s\n", st.Name, role, warn)
	}
	// No member or cluster id, epoch or raft index: /health answers
	// anyone (and Consul publishes it as the check's output), and
	// those are what forging raft messages takes. /status has them.
	return http.StatusOK, fmt.Sprintf("healthy: %s role=%s revision=%d db_size=%d%s\n", st.Name, role, st.Revision, st.DBSize, warn)
}
