package backends

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
)

// StatusTLS returns the TLS config a client uses towards members' /status:
// it trusts the cluster CA and presents a certificate from the status CA
// (clusterca.StatusIssuer), which members accept on /status and etcd never
// does. It needs no sealed key and only reads the coordinator: when the CA
// is not there it fails with clusterca.ErrNoClusterCA (wrapped) and never
// stores one.
func StatusTLS(ctx context.Context, cl *config.Cluster, kv clusterca.KV) (*tls.Config, string, error) {
	if cfg, scheme, ok, err := notAutoTLS(cl); ok {
		return cfg, scheme, err
	}
	st, caCert, err := clusterca.StatusIssuer(ctx, kv, cl.Name)
	if err != nil {
		return nil, "", err
	}
	cfg, err := issuedTLS(caCert, st)
	return cfg, "https", err
}

// EtcdTLS returns the TLS config for etcd's client port (and /status): a
// client certificate from the cluster CA itself, which the coordinator
// keeps sealed with the cluster's key encryption key kek
// (clusterca.ErrCASealed without it; the local coordinator's needs none).
func EtcdTLS(ctx context.Context, cl *config.Cluster, kv clusterca.KV, kek []byte) (*tls.Config, string, error) {
	if cfg, scheme, ok, err := notAutoTLS(cl); ok {
		return cfg, scheme, err
	}
	ca, err := clusterca.Read(ctx, kv, cl.Name, kek)
	if err != nil {
		return nil, "", err
	}
	cfg, err := TLSFromCA(ca)
	return cfg, "https", err
}

// notAutoTLS is the client TLS of modes off and files; ok is false for
// auto.
func notAutoTLS(cl *config.Cluster) (cfg *tls.Config, scheme string, ok bool, err error) {
	switch cl.TLS.Mode {
	case config.TLSOff:
		return nil, "http", true, nil
	case config.TLSFiles:
		cfg, err := certs.ClientConfig(certs.Files{CA: cl.TLS.CAFile, Cert: cl.TLS.CertFile, Key: cl.TLS.KeyFile})
		return cfg, "https", true, err
	}
	return nil, "", false, nil
}

// cliCertValidity bounds the in-memory certificate of one CLI command.
const cliCertValidity = time.Hour

// TLSFromCA returns a client TLS config that trusts ca and presents a
// client certificate issued from it in memory, as etcd's root user: the
// CLI saves and restores snapshots, which etcd's authorization allows only
// to root.
func TLSFromCA(ca certs.Pair) (*tls.Config, error) {
	p, err := certs.IssueClient(ca, certs.RootUser, time.Now(), cliCertValidity)
	if err != nil {
		return nil, err
	}
	return pairTLS(ca.Cert, p)
}

// pairTLS trusts the PEM certificate root and presents p.
func pairTLS(root []byte, p certs.Pair) (*tls.Config, error) {
	kp, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		return nil, err
	}
	pool, err := certs.Pool(root)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}, nil
}

// issuedTLS trusts the PEM certificate root and presents a client
// certificate issued from issuer in memory.
func issuedTLS(root []byte, issuer certs.Pair) (*tls.Config, error) {
	p, err := certs.Issue(issuer, "etcd-nomad-cli", nil, time.Now())
	if err != nil {
		return nil, err
	}
	return pairTLS(root, p)
}
