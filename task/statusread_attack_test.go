package task

// The status port as an application holding its exchanged certificate,
// and a stranger holding none, read it (docs/security.md, Threat model): what
// /health, /status and /metrics tell them. Member and cluster ids, terms
// and raft indexes are what forging raft messages takes; /status names
// every member and its decisions.

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/exchange"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/identity"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
)

// statusClient is an HTTPS client towards m's status port presenting p
// (none when nil).
func statusClient(t *testing.T, m *Member, p *certs.Pair) *http.Client {
	t.Helper()
	pool, err := certs.Pool(m.trust.CA().Cert)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if p != nil {
		kp, err := tls.X509KeyPair(p.Cert, p.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

// getWith GETs url with hc: the status and the body (0 and the error on
// a refused handshake).
func getWith(hc *http.Client, url string) (int, string) {
	resp, err := hc.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// An application's certificate from the exchange, and a stranger without
// one, get neither /status nor /metrics (401 or 403); a certificate of
// the status CA (what `status` and `tls status-cert` present) and
// root's get both. The unauthenticated /health, the Consul check, still
// names role, revision and DB size, but no member or cluster id. On main
// /metrics and /health served everyone those ids (and /metrics etcd's
// raft indexes), and /status every certificate of the cluster CA.
func TestStatusAndMetricsOnlyForTheStatusCAOrRoot(t *testing.T) {
	key, keys := nomadKey(t)
	k := newKit(t, "a")
	k.cl.TLS.Mode = config.TLSAuto
	k.cl.Access = billingAccess(time.Minute)
	k.identities = &identity.Verifier{Keys: keys}
	m := k.member("a", nil)
	k.seed(m)
	if err := m.serveStatus(); err != nil {
		t.Fatal(err)
	}
	base := m.statusURL(m.self)
	stranger := statusClient(t, m, nil)

	// The application's certificate, as creds gets it: the exchange, for
	// a token that this member takes before and after per-cluster
	// audiences.
	csr, keyPEM, err := certs.NewCSR()
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.trust.Exchange(t.Context(), exchange.Request{Identity: jobIdentity(t, key, identity.Audience), CSR: string(csr)})
	if err != nil {
		t.Fatal(err)
	}
	app := statusClient(t, m, &certs.Pair{Cert: []byte(out.Certificate), Key: keyPEM})
	rootPair, err := certs.IssueClient(*m.trust.CA(), certs.RootUser, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	root := statusClient(t, m, &rootPair)
	sca, err := certs.StatusCA(*m.trust.CA())
	if err != nil {
		t.Fatal(err)
	}
	statusPair, err := certs.IssueClient(sca, "prometheus", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	reader := statusClient(t, m, &statusPair)

	var body string
	clustertest.WaitFor(t, 30*time.Second, "/health passing", func() (bool, string) {
		var code int
		code, body = getWith(stranger, base+"/health")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
	for _, want := range []string{"role=leader", "revision=", "db_size="} {
		if !strings.Contains(body, want) {
			t.Errorf("/health %q lacks %s (the Consul check's output)", body, want)
		}
	}
	srv := m.proc.Server().Server
	for what, id := range map[string]uint64{"member id": uint64(srv.MemberID()), "cluster id": uint64(srv.Cluster().ID())} {
		if strings.Contains(body, fmt.Sprintf("%x", id)) {
			t.Errorf("/health without a certificate names the %s %x: %q", what, id, body)
		}
	}

	for _, path := range []string{"/status", "/metrics"} {
		for name, hc := range map[string]*http.Client{"no certificate": stranger, "the application's certificate": app} {
			if code, b := getWith(hc, base+path); code != http.StatusUnauthorized && code != http.StatusForbidden {
				t.Errorf("%s with %s: %d %.80q, want 401 or 403", path, name, code, b)
			}
		}
		for name, hc := range map[string]*http.Client{"a status CA certificate": reader, "root's certificate": root} {
			if code, b := getWith(hc, base+path); code != http.StatusOK {
				t.Errorf("%s with %s: %d %.80q, want 200", path, name, code, b)
			}
		}
	}
	if code, b := getWith(reader, base+"/metrics"); code != http.StatusOK || !strings.Contains(b, "etcd_server_has_leader") || !strings.Contains(b, "etcd_nomad_action_failures_total") {
		t.Errorf("/metrics with a status CA certificate: %d, lacks etcd's or the member's metrics", code)
	}
}
