package task_test

import (
	"crypto/tls"
	"crypto/x509"
	"strconv"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
)

func itoa(n int) string { return strconv.Itoa(n) }

// statusReaderPair is a client certificate of ca's status CA: what
// `status` and `tls status-cert` present, which opens /status and
// /metrics and nothing else.
func statusReaderPair(t *testing.T, ca certs.Pair) certs.Pair {
	t.Helper()
	sca, err := certs.StatusCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	p, err := certs.IssueClient(sca, "test-status", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func tlsConfig(pool *x509.CertPool, p *certs.Pair) *tls.Config {
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if p != nil {
		kp, err := tls.X509KeyPair(p.Cert, p.Key)
		if err == nil {
			cfg.Certificates = []tls.Certificate{kp}
		}
	}
	return cfg
}
