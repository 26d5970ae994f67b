// Package trust is the member's trust: the TLS scheme and files, the
// cluster CA it runs with (TLS auto), the CA rotation it follows, the
// renewal of its certificates, and the certificate exchange it serves.
//
// It is one part of the member supervisor (docs/redesign.md): the loop in
// package task builds it with New and calls down into it; it never calls
// back into the loop and imports no other part.
package trust

import (
	"context"
	"crypto/tls"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/identity"
	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Config is what the trust part takes from the member.
type Config struct {
	Cluster *config.Cluster // the tls and access blocks, the name
	Name    string          // the member's
	// Self is the member's instance: its address is in the member
	// certificate's hosts.
	Self provider.Instance
	Dir  datadir.Dir
	// KEK is the cluster's key encryption key (task.Options.CAKEK).
	KEK []byte
	// Identities, optional, verifies Nomad workload identities for the
	// exchange.
	Identities *identity.Verifier
	Log        hclog.Logger
	// Now is the loop's clock (the leader's CA certificate writes).
	Now func() time.Time
	// Metrics registers the certificates' expiry gauges, with Labels.
	Metrics prometheus.Registerer
	Labels  prometheus.Labels
	// Coordinator is written: the CA stored again, the plaintext copy
	// retired, the status CA repaired, the CA certificate published.
	Coordinator coord.Coordinator
	// Reads answers the CA check's and the rotation's reads: the
	// watched copy of the coordinator's keys when there is one.
	Reads clusterca.KV
	// Instances lists the other instances: a member without a CA asks
	// whether one listens (clusterExists).
	Instances func(ctx context.Context) ([]provider.Instance, error)
}

// Trust is what the member trusts and presents: the TLS scheme and
// files, the cluster CA, its rotation and the certificates' renewal.
type Trust struct {
	cfg Config
	log hclog.Logger

	scheme   string
	tlsFiles certs.Files
	peerTLS  *tls.Config // client side, for peers' /status and etcd clients
	// statusClient reads peers' /status (HTTPClient), made once.
	statusClientOnce sync.Once
	statusClient     *http.Client
	ca               *certs.Pair // tls auto: the cluster CA this member's certificates come from
	// mu guards caMismatch: the coordinator holds another CA than ca.
	mu         sync.Mutex
	caMismatch *status.CAMismatch
	// caExposed: the coordinator's mark of a CA whose key it held in the
	// clear (clusterca.ExposedKey), read at every CA check; nil: none.
	caExposed atomic.Pointer[clusterca.Exposure]
	renew     *renewal      // certificates renewed while running (renew.go)
	rotation  rotationState // the CA rotation this member follows (rotate.go)
	caChecked time.Time
	// caCertPublished: the leader's last write of the CA certificate
	// (publishCACert).
	caCertPublished time.Time
}

// New settles what the member trusts: the scheme and files of its TLS
// mode; with TLS auto the cluster CA (chooseCA), stored again where the
// coordinator lost it (restoreCA), the rotation it follows, and the
// member and root client certificates issued from it.
func New(ctx context.Context, c Config) (*Trust, error) {
	t := &Trust{cfg: c, log: c.Log}
	t.renew = newRenewal(c.Metrics, c.Labels, t.warnBefore)
	if err := t.setupTLS(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Trust) setupTLS(ctx context.Context) error {
	c := t.cfg.Cluster
	switch c.TLS.Mode {
	case config.TLSOff:
		t.scheme = "http"
		return nil
	case config.TLSFiles:
		t.scheme = "https"
		t.tlsFiles = certs.Files{CA: c.TLS.CAFile, Cert: c.TLS.CertFile, Key: c.TLS.KeyFile}
	default:
		t.scheme = "https"
		ca, err := t.chooseCA(ctx)
		if err != nil {
			return err
		}
		t.ca = &ca
		t.restoreCA(ctx)
		t.followRotation(ctx)
		if err := t.issueMember(time.Now()); err != nil {
			return err
		}
		t.tlsFiles = memberFiles(t.cfg.Dir)
	}
	cfg, err := certs.ClientConfig(t.tlsFiles)
	if err != nil {
		return err
	}
	if t.ca != nil {
		// The member's own clients act as etcd's root user: with the
		// cluster's access rules on, membership changes, snapshots and the
		// rules themselves need it (etcd names a certificate's user by its
		// CN). Peers' /status accepts any certificate of the cluster CA.
		// Renewed while running (renewOnce), like the member certificate.
		if err := t.issueRoot(time.Now()); err != nil {
			return err
		}
		cfg.Certificates = nil
		cfg.GetClientCertificate = t.rootCertificate
	}
	t.peerTLS = cfg
	return nil
}

// caCheckEvery paces a running member's check of the cluster CA in the
// coordinator (one read).
const caCheckEvery = 30 * time.Second

// CheckDue reports whether the CA check is due at now (TLS auto only).
func (t *Trust) CheckDue(now time.Time) bool { return now.Sub(t.caChecked) > caCheckEvery }

// Check is the running member's CA check (restoreCA), paced by CheckDue.
func (t *Trust) Check(ctx context.Context) {
	t.caChecked = t.cfg.Now()
	t.restoreCA(ctx)
}

// restoreCA stores this running member's CA again when the coordinator
// lost its state (no record): before the record is re-written, so that
// members and clients starting afterwards get the CA the cluster uses. A
// different CA in the coordinator is reported, never adopted. It also
// stores the status CA, and the sealed CA where the coordinator held only
// the plaintext one of an earlier version, whose copy it then deletes
// (retirePlaintextCA): at start and at every CA check.
func (t *Trust) restoreCA(ctx context.Context) {
	if t.ca == nil {
		return
	}
	cur := t.currentCA()
	held, err := clusterca.Offer(ctx, t.cfg.Reads, *cur, t.cfg.KEK)
	switch {
	case err != nil:
		t.log.Warn("cluster CA not restored", "error", err)
	case !clusterca.Same(held, *cur) && t.rotationCovers(held):
		// A CA rotation moves the members and the coordinator's CA
		// one after the other (rotate.go): not a mismatch.
		t.clearCAMismatch()
	case !clusterca.Same(held, *cur):
		t.reportCAMismatch(*cur, held)
	default:
		t.clearCAMismatch()
		t.retirePlaintextCA(ctx, held)
		t.repairStatusCA(ctx, held)
	}
	t.readExposure(ctx)
}

// Scheme is "https" with TLS on, else "http".
func (t *Trust) Scheme() string { return t.scheme }

// Files are the member's certificate files (etcd's client port, the
// status port); empty with TLS off.
func (t *Trust) Files() certs.Files { return t.tlsFiles }

// PeerFiles are etcd's peer port files (TLS auto).
func (t *Trust) PeerFiles() certs.Files { return peerFiles(t.cfg.Dir) }

// PeerTLS is the client side of TLS, for peers' /status and the member's
// etcd clients (its root client certificate with TLS auto); nil with TLS
// off.
func (t *Trust) PeerTLS() *tls.Config { return t.peerTLS }

// CA is the cluster CA settled at start (TLS auto); nil otherwise.
func (t *Trust) CA() *certs.Pair { return t.ca }

// Mismatch is the CA mismatch reported last (nil: none).
func (t *Trust) Mismatch() *status.CAMismatch {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.caMismatch
}

// Earliest is the certificate that expires first and when; "" when none
// is known.
func (t *Trust) Earliest() (string, time.Time) { return t.renew.earliest() }

// StatusCAs are the status CAs a rotation adds to those /status accepts
// (PEM); nil while this member follows none.
func (t *Trust) StatusCAs() []byte {
	if s := t.rotation.statusCAs.Load(); s != nil {
		return *s
	}
	return nil
}

// Handler serves the exchange (exchange.Path) on the status port.
func (t *Trust) Handler() http.Handler { return http.HandlerFunc(t.serveExchange) }

// HTTPClient is the member's one client for peers' /status: its
// keep-alive connections are reused from loop to loop. (A client made per
// loop left two connections open every second, for good.)
func (t *Trust) HTTPClient() *http.Client {
	t.statusClientOnce.Do(func() {
		t.statusClient = &http.Client{Timeout: requestTimeout, Transport: &http.Transport{
			TLSClientConfig:     t.peerTLS,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     90 * time.Second,
		}}
	})
	return t.statusClient
}

// StatusServerTLS is the status port's server side of TLS, nil with TLS
// off, and the status CA of the member's CA at start (TLS auto; a CA
// rotation adds the next one's: StatusCAs).
func (t *Trust) StatusServerTLS() (cfg *tls.Config, statusCA []byte, err error) {
	if t.scheme != "https" {
		return nil, nil, nil
	}
	cfg, err = certs.ServerConfig(t.tlsFiles)
	if err == nil {
		// Read at each handshake, as etcd does: renewal replaces
		// the file.
		cfg.Certificates, cfg.GetCertificate = nil, t.serverCertificate
		// Named here, not left to ServeTLS: GetConfigForClient
		// below returns copies of this config.
		cfg.NextProtos = []string{"http/1.1"}
	}
	if err == nil && t.ca != nil {
		// /status also takes the status CA's clients (read-only
		// clients, certs.StatusCA); etcd's ports never do.
		var st certs.Pair
		if st, err = certs.StatusCA(*t.ca); err == nil {
			cfg.ClientCAs.AppendCertsFromPEM(st.Cert)
			statusCA = st.Cert
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if t.ca != nil {
		// The CAs accepted change with a CA rotation: built again
		// at each handshake from what the member trusts now.
		base := cfg
		cfg = base.Clone()
		cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return t.statusServerConfig(base), nil }
	}
	return cfg, statusCA, nil
}
