package statusport

import (
	"errors"
	"net/http"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/status"
)

// TestHealthAnswer pins every rule of /health's answer: which state fails
// the Consul check (503), turns it to warning (429) or passes it (200),
// which warnings are named in the text, in which order the rules apply,
// and what the text leaves out (ids, epoch, raft index).
func TestHealthAnswer(t *testing.T) {
	const quota = 1000
	base := status.Member{Name: "a", Revision: 7, DBSize: 100, MemberID: 0xabc, ClusterID: 0xdef, Epoch: 3}
	with := func(f func(*status.Member)) status.Member {
		st := base
		f(&st)
		return st
	}
	down := errors.New("no leader: cluster has no quorum")
	mismatch := &status.CAMismatch{Member: "m1", Coordinator: "c2"}
	refused := &status.RotationView{Refused: "bad signature"}
	for _, c := range []struct {
		name  string
		st    status.Member
		err   error
		quota int64
		code  int
		body  string
	}{
		{"healthy voter", base, nil, quota, http.StatusOK,
			"healthy: a role=voter revision=7 db_size=100\n"},
		{"learner", with(func(s *status.Member) { s.Learner = true }), nil, quota, http.StatusOK,
			"healthy: a role=learner revision=7 db_size=100\n"},
		{"leader", with(func(s *status.Member) { s.Leader = true }), nil, quota, http.StatusOK,
			"healthy: a role=leader revision=7 db_size=100\n"},
		{"leader wins over learner", with(func(s *status.Member) { s.Leader, s.Learner = true, true }), nil, quota, http.StatusOK,
			"healthy: a role=leader revision=7 db_size=100\n"},
		{"unhealthy fails the check", base, down, quota, http.StatusServiceUnavailable,
			"unhealthy: a: no leader: cluster has no quorum\n"},
		{"paused is named, passes", with(func(s *status.Member) { s.Paused = "by op" }), nil, quota, http.StatusOK,
			"healthy: a role=voter revision=7 db_size=100 PAUSED (by op)\n"},
		{"ca mismatch is named, passes", with(func(s *status.Member) { s.CAMismatch = mismatch }), nil, quota, http.StatusOK,
			"healthy: a role=voter revision=7 db_size=100 WARNING ca_mismatch: the coordinator holds another cluster CA; new members cannot join: member_ca=m1 coordinator_ca=c2\n"},
		{"exposed ca key is named, passes", with(func(s *status.Member) { s.CAKeyExposed = "held in the clear" }), nil, quota, http.StatusOK,
			"healthy: a role=voter revision=7 db_size=100 WARNING ca_key_exposed: held in the clear\n"},
		{"refused rotation warns", with(func(s *status.Member) { s.CA = refused }), nil, quota, http.StatusTooManyRequests,
			"warning: a role=voter WARNING ca_rotation_refused: bad signature\n"},
		{"rotation view without refusal passes", with(func(s *status.Member) { s.CA = &status.RotationView{} }), nil, quota, http.StatusOK,
			"healthy: a role=voter revision=7 db_size=100\n"},
		{"certificate warning warns", with(func(s *status.Member) { s.CertWarning = "certificate peer expires soon" }), nil, quota, http.StatusTooManyRequests,
			"warning: a role=voter WARNING certificate peer expires soon\n"},
		{"unhealthy names the warnings in order, not the certificate's", with(func(s *status.Member) {
			s.Paused, s.CAMismatch, s.CAKeyExposed, s.CA, s.CertWarning = "p", mismatch, "x", refused, "cert"
		}), down, quota, http.StatusServiceUnavailable,
			"unhealthy: a: no leader: cluster has no quorum PAUSED (p) WARNING ca_mismatch: the coordinator holds another cluster CA; new members cannot join: member_ca=m1 coordinator_ca=c2 WARNING ca_key_exposed: x WARNING ca_rotation_refused: bad signature\n"},
		{"corrupt warns", with(func(s *status.Member) { s.Corrupt = []string{"1", "2"} }), nil, quota, http.StatusTooManyRequests,
			"warning: a role=voter CORRUPT alarm raised for 2 member(s) (which: /status): writes refused until their data is set aside and the alarm disarmed\n"},
		{"corrupt comes before nospace and names the certificate", with(func(s *status.Member) {
			s.Corrupt, s.NoSpace, s.DBSize, s.CertWarning = []string{"1"}, true, 990, "cert"
		}), nil, quota, http.StatusTooManyRequests,
			"warning: a role=voter CORRUPT alarm raised for 1 member(s) (which: /status): writes refused until their data is set aside and the alarm disarmed WARNING cert\n"},
		{"nospace warns", with(func(s *status.Member) { s.NoSpace, s.DBSize = true, 500 }), nil, quota, http.StatusTooManyRequests,
			"warning: a role=voter db_size=500 is 50% of quota_backend_bytes 1000 (warning above 80%); NOSPACE alarm raised: writes refused until maintenance compacts, defragments and disarms it\n"},
		{"nospace comes before the certificate warning", with(func(s *status.Member) { s.NoSpace, s.DBSize, s.CertWarning = true, 500, "cert" }), nil, quota, http.StatusTooManyRequests,
			"warning: a role=voter db_size=500 is 50% of quota_backend_bytes 1000 (warning above 80%); NOSPACE alarm raised: writes refused until maintenance compacts, defragments and disarms it WARNING cert\n"},
		{"near the quota warns", with(func(s *status.Member) { s.DBSize = 801 }), nil, quota, http.StatusTooManyRequests,
			"warning: a role=voter db_size=801 is 80% of quota_backend_bytes 1000 (warning above 80%)\n"},
		{"at the warning share passes", with(func(s *status.Member) { s.DBSize = 800 }), nil, quota, http.StatusOK,
			"healthy: a role=voter revision=7 db_size=800\n"},
		{"no quota: no size warning", with(func(s *status.Member) { s.DBSize = 1 << 40 }), nil, 0, http.StatusOK,
			"healthy: a role=voter revision=7 db_size=1099511627776\n"},
		{"near the quota comes before the certificate warning", with(func(s *status.Member) { s.DBSize, s.CertWarning, s.Leader = 900, "cert", true }), nil, quota, http.StatusTooManyRequests,
			"warning: a role=leader db_size=900 is 90% of quota_backend_bytes 1000 (warning above 80%) WARNING cert\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := HealthAnswer(c.st, c.err, c.quota)
			if code != c.code || body != c.body {
				t.Errorf("HealthAnswer = %d %q, want %d %q", code, body, c.code, c.body)
			}
		})
	}
}
