package devagents

import (
	"fmt"
	"net/http"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
)

// TLS is a test CA and the certificates dev agents serve HTTPS with
// (Options.TLS), written by NewTLS: the agents require a client
// certificate from the same CA on their HTTP APIs (Consul's https
// verify_incoming, Nomad's verify_https_client).
type TLS struct {
	// CAFile is the CA certificate.
	CAFile string
	// CertFile and KeyFile are the agents' certificate: server and client
	// use, for 127.0.0.1, localhost and the names Consul and Nomad check
	// (server.dc1.consul, server.global.nomad, client.global.nomad). Nomad
	// presents it to Consul too.
	CertFile, KeyFile string
	// ClientCertFile and ClientKeyFile are a client certificate for tests,
	// CLIs and the members' CONSUL_CLIENT_CERT / CONSUL_CLIENT_KEY.
	ClientCertFile, ClientKeyFile string
}

// NewTLS creates a CA and the agents' and a client's certificates under
// dir (0700, files 0600).
func NewTLS(dir string) (*TLS, error) {
	now := time.Now()
	ca, err := certs.NewCA("devagents", now)
	if err != nil {
		return nil, fmt.Errorf("test CA: %w", err)
	}
	agent, err := certs.Issue(ca, "agent", []string{"127.0.0.1", "localhost", "server.dc1.consul", "server.global.nomad", "client.global.nomad"}, now)
	if err != nil {
		return nil, fmt.Errorf("agent certificate: %w", err)
	}
	client, err := certs.IssueClient(ca, "test", now, 24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	af, err := certs.Write(dir, "agent", ca.Cert, agent)
	if err != nil {
		return nil, err
	}
	cf, err := certs.Write(dir, "client", ca.Cert, client)
	if err != nil {
		return nil, err
	}
	return &TLS{CAFile: af.CA, CertFile: af.Cert, KeyFile: af.Key, ClientCertFile: cf.Cert, ClientKeyFile: cf.Key}, nil
}

// HTTPClient trusts the CA and presents the client certificate.
func (t *TLS) HTTPClient() (*http.Client, error) {
	cfg, err := certs.ClientConfig(certs.Files{CA: t.CAFile, Cert: t.ClientCertFile, Key: t.ClientKeyFile})
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}, nil
}

// NomadEnv is the environment of a nomad CLI (or api.DefaultConfig) that
// talks to a Nomad agent started with these certificates at addr.
func (t *TLS) NomadEnv(addr string) []string {
	return []string{"NOMAD_ADDR=" + addr, "NOMAD_CACERT=" + t.CAFile, "NOMAD_CLIENT_CERT=" + t.ClientCertFile, "NOMAD_CLIENT_KEY=" + t.ClientKeyFile}
}

// ConsulEnv is the environment of a consul CLI (or api.DefaultConfig)
// that talks to a Consul agent started with these certificates at addr
// (https://host:port).
func (t *TLS) ConsulEnv(addr string) []string {
	return []string{"CONSUL_HTTP_ADDR=" + addr, "CONSUL_HTTP_SSL=true", "CONSUL_CACERT=" + t.CAFile, "CONSUL_CLIENT_CERT=" + t.ClientCertFile, "CONSUL_CLIENT_KEY=" + t.ClientKeyFile}
}

// httpClient is how the agent's readiness checks reach its API: over
// HTTPS with the client certificate when it runs with TLS.
func (a *Agent) httpClient() *http.Client {
	if a.httpc != nil {
		return a.httpc
	}
	return http.DefaultClient
}

// consulTLSConfig is the HCL that gives a dev Consul agent its
// certificate and makes its HTTPS API require client certificates (the
// agent's ports block serves HTTPS instead of HTTP).
func consulTLSConfig(t *TLS) string {
	return fmt.Sprintf(`
tls {
  defaults {
    ca_file   = %q
    cert_file = %q
    key_file  = %q
  }
  https {
    verify_incoming = true
  }
}
`, t.CAFile, t.CertFile, t.KeyFile)
}

// nomadTLSConfig is the HCL that puts a Nomad agent's HTTP API and RPC on
// TLS, requiring client certificates on HTTPS.
func nomadTLSConfig(t *TLS) string {
	return fmt.Sprintf(`tls {
  http                = true
  rpc                 = true
  ca_file             = %q
  cert_file           = %q
  key_file            = %q
  verify_https_client = true
}
`, t.CAFile, t.CertFile, t.KeyFile)
}

// withTLSClient is the HTTP client of an agent started with t; nil
// without TLS.
func withTLSClient(t *TLS) (*http.Client, error) {
	if t == nil {
		return nil, nil
	}
	c, err := t.HTTPClient()
	if err != nil {
		return nil, fmt.Errorf("agent HTTPS client: %w", err)
	}
	return c, nil
}

// consulClientTLS is what a Nomad agent's consul block adds to reach a
// Consul agent started with t: HTTPS, the CA, and the agents' certificate
// as its client certificate. Empty without TLS.
func consulClientTLS(t *TLS) string {
	if t == nil {
		return ""
	}
	return fmt.Sprintf(`
  ssl       = true
  ca_file   = %q
  cert_file = %q
  key_file  = %q`, t.CAFile, t.CertFile, t.KeyFile)
}
