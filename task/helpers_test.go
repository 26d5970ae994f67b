package task_test

import (
	"crypto/tls"
	"crypto/x509"
	"strconv"

	"github.com/etcd-nomad/etcd-nomad/certs"
)

func itoa(n int) string { return strconv.Itoa(n) }

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
