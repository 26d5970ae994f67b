package task

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
)

// Certificates renewed while the member runs (TLS auto). The member
// certificate (etcd's server and peer-client certificate, and /status's)
// is one file that etcd reads at every handshake (certs.WritePair), so
// replacing it renews without a restart; established connections keep the
// certificate they verified. The member's root client certificate (its own
// etcd clients and peers' /status) is held in memory and handed out per
// handshake (GetClientCertificate). Both are renewed at two thirds of
// their life (certs.RenewAt), checked every renewPoll at most.

// renewPoll bounds the wait between two renewal checks: a renewal is due
// at a time known in advance, but the CA may change (tls rotate-ca).
const renewPoll = 5 * time.Second

// Names of the certificates in the expiry gauge and in status.
const (
	certMember = "member"
	certRoot   = "root_client"
	certCA     = "ca"
)

// renewal is the renewable TLS state of a running member.
type renewal struct {
	// root is the member's root client certificate, swapped on renewal.
	root atomic.Pointer[tls.Certificate]
	// mu guards notAfter: each certificate's expiry ("ca", "ca:2", ...
	// for every CA the member trusts).
	mu       sync.Mutex
	notAfter map[string]time.Time
	expiry   *prometheus.GaugeVec
	// warnAt is when each certificate enters its warning window
	// (warnBefore of its name before it expires): the alert's threshold.
	warnAt     *prometheus.GaugeVec
	warnBefore func(name string) time.Duration
}

func newRenewal(reg prometheus.Registerer, labels prometheus.Labels, warnBefore func(name string) time.Duration) *renewal {
	r := &renewal{notAfter: map[string]time.Time{}, warnBefore: warnBefore, expiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_nomad_certificate_expiry_timestamp_seconds", Help: "When each certificate this member uses expires (Unix seconds): member, root_client, and each trusted CA.", ConstLabels: labels,
	}, []string{"certificate"}), warnAt: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_nomad_certificate_warning_timestamp_seconds", Help: "When each certificate this member uses enters its warning window (Unix seconds): the /health check warns from then on.", ConstLabels: labels,
	}, []string{"certificate"})}
	reg.MustRegister(r.expiry, r.warnAt)
	return r
}

func (r *renewal) set(name string, notAfter time.Time) {
	r.mu.Lock()
	r.notAfter[name] = notAfter
	r.mu.Unlock()
	r.expiry.WithLabelValues(name).Set(float64(notAfter.Unix()))
	r.warnAt.WithLabelValues(name).Set(float64(notAfter.Add(-r.warnBefore(name)).Unix()))
}

// forgetCAs drops the CAs' expiries (set again from the trusted file).
func (r *renewal) forgetCAs() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for n := range r.notAfter {
		if strings.HasPrefix(n, certCA) {
			delete(r.notAfter, n)
			r.expiry.DeleteLabelValues(n)
			r.warnAt.DeleteLabelValues(n)
		}
	}
}

// earliest returns the certificate that expires first and when; "" when
// none is known.
func (r *renewal) earliest() (string, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first string
	for _, n := range slices.Sorted(maps.Keys(r.notAfter)) {
		if first == "" || r.notAfter[n].Before(r.notAfter[first]) {
			first = n
		}
	}
	return first, r.notAfter[first]
}

// certTTL is the validity of the certificates this member issues itself.
func (m *Member) certTTL() time.Duration {
	if d := m.opts.Cluster.TLS.CertificateTTL; d > 0 {
		return d
	}
	return config.DefaultMemberCertTTL
}

// memberHosts are the member certificate's SANs.
func (m *Member) memberHosts() []string {
	host, _ := os.Hostname()
	return []string{m.self.Address, "127.0.0.1", "::1", "localhost", m.opts.Name, host}
}

// issueMember issues the member certificate from the current CA and
// writes it, with its chain (a CA rotation's cross certificate), and the
// CA certificates to trust; then the same for the peer port: the peer
// certificate from the current CA's peer CA, and the peer CAs to trust.
func (m *Member) issueMember(now time.Time) error {
	peer, err := certs.IssuePeer(*m.currentCA(), m.memberHosts(), now, m.certTTL())
	if err != nil {
		return fmt.Errorf("issue peer certificate: %w", err)
	}
	peerTrust, err := m.peerTrust()
	if err != nil {
		return err
	}
	pf := m.dir.peerFiles()
	if err := os.MkdirAll(filepath.Dir(pf.CA), 0o700); err != nil {
		return err
	}
	if err := certs.WritePair(pf.CA, certs.Pair{Cert: peerTrust}); err != nil {
		return err
	}
	if err := certs.WritePair(pf.Cert, certs.WithChain(peer, m.peerChain())); err != nil {
		return err
	}
	pair, err := certs.IssueFor(*m.currentCA(), m.opts.Name, m.memberHosts(), now, m.certTTL())
	if err != nil {
		return fmt.Errorf("issue member certificate: %w", err)
	}
	// The same paths every time: m.trust.tlsFiles, set at start, stays.
	if _, err := certs.WriteMember(m.dir.TLSDir(), "member", m.rotationTrust(), certs.WithChain(pair, m.chain())); err != nil {
		return fmt.Errorf("write member certificate: %w", err)
	}
	return nil
}

// issueRoot issues the member's root client certificate from the current
// CA and hands it, with its chain, to every later handshake.
func (m *Member) issueRoot(now time.Time) error {
	root, err := certs.IssueClient(*m.currentCA(), certs.RootUser, now, m.certTTL())
	if err != nil {
		return fmt.Errorf("issue root client certificate: %w", err)
	}
	root = certs.WithChain(root, m.chain())
	kp, err := tls.X509KeyPair(root.Cert, root.Key)
	if err != nil {
		return fmt.Errorf("root client certificate: %w", err)
	}
	m.trust.renew.root.Store(&kp)
	return nil
}

// rootCertificate hands out the current root client certificate
// (tls.Config.GetClientCertificate).
func (m *Member) rootCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if c := m.trust.renew.root.Load(); c != nil {
		return c, nil
	}
	return &tls.Certificate{}, nil
}

// serverCertificate reads the member certificate file at each handshake,
// as etcd does (tls.Config.GetCertificate of the status server).
func (m *Member) serverCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	kp, err := tls.LoadX509KeyPair(m.trust.tlsFiles.Cert, m.trust.tlsFiles.Key)
	if err != nil {
		return nil, fmt.Errorf("member certificate %s: %w", m.trust.tlsFiles.Cert, err)
	}
	return &kp, nil
}

// renewLoop renews the certificates when due until ctx ends.
func (m *Member) renewLoop(ctx context.Context) {
	for {
		next := m.renewOnce(time.Now(), m.followRotation(ctx))
		wait := min(max(time.Until(next), 100*time.Millisecond), renewPoll)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// renewOnce renews what is due at now (everything when reissue: the CA
// rotation moved), records every expiry, and returns when the next
// renewal is due.
func (m *Member) renewOnce(now time.Time, reissue bool) time.Time {
	next := now.Add(renewPoll)
	if m.trust.scheme != "https" {
		return next
	}
	if b, err := os.ReadFile(m.trust.tlsFiles.CA); err == nil {
		m.trust.renew.forgetCAs() // a CA rotation retires one
		for i, c := range parseCerts(b) {
			name := certCA
			if i > 0 {
				name = fmt.Sprintf("%s:%d", certCA, i+1)
			}
			m.trust.renew.set(name, c.NotAfter)
		}
	}
	leaf, err := m.memberLeaf()
	if err != nil {
		m.log.Warn("member certificate not readable", "error", err)
		return next
	}
	ca := m.currentCA()
	if ca != nil && (reissue || !now.Before(certs.RenewAt(leaf))) {
		if err := m.issueMember(now); err != nil {
			m.log.Error("member certificate not renewed", "error", err, "expires", leaf.NotAfter)
			return next
		}
		old := leaf.NotAfter
		if leaf, err = m.memberLeaf(); err != nil {
			m.log.Error("renewed member certificate not readable", "error", err)
			return next
		}
		m.log.Info("renewed the member certificate", "was_valid_until", old.UTC().Format(time.RFC3339), "valid_until", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	m.trust.renew.set(certMember, leaf.NotAfter)
	next = earlier(next, certs.RenewAt(leaf))
	if c := m.trust.renew.root.Load(); c != nil && c.Leaf != nil && ca != nil {
		if reissue || !now.Before(certs.RenewAt(c.Leaf)) {
			old := c.Leaf.NotAfter
			if err := m.issueRoot(now); err != nil {
				m.log.Error("root client certificate not renewed", "error", err, "expires", old)
				return next
			}
			c = m.trust.renew.root.Load()
			m.log.Info("renewed the root client certificate", "valid_until", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		m.trust.renew.set(certRoot, c.Leaf.NotAfter)
		next = earlier(next, certs.RenewAt(c.Leaf))
	}
	return next
}

// trustedCAs are the CA certificates the member's files trust now.
func (m *Member) trustedCAs() []byte {
	b, err := os.ReadFile(m.trust.tlsFiles.CA)
	if err != nil || len(parseCerts(b)) == 0 {
		return nil
	}
	return b
}

// trustedPeerCAs are the peer CA certificates the peer port's file
// trusts now.
func (m *Member) trustedPeerCAs() []byte {
	b, err := os.ReadFile(m.dir.peerFiles().CA)
	if err != nil || len(parseCerts(b)) == 0 {
		return nil
	}
	return b
}

func (m *Member) memberLeaf() (*x509.Certificate, error) {
	b, err := os.ReadFile(m.trust.tlsFiles.Cert)
	if err != nil {
		return nil, err
	}
	return certs.Leaf(b)
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// parseCerts returns the certificates of a PEM blob, skipping what does
// not parse.
func parseCerts(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		if c, err := x509.ParseCertificate(blk.Bytes); blk.Type == "CERTIFICATE" && err == nil {
			out = append(out, c)
		}
	}
}

// warnBefore is certificate name's warning window: the CAs' is 30 days;
// the member's and root's is certs.WarnBefore of the configured validity.
func (m *Member) warnBefore(name string) time.Duration {
	if strings.HasPrefix(name, certCA) {
		return certs.WarnBefore(config.DefaultMemberCertTTL)
	}
	return certs.WarnBefore(m.certTTL())
}

// certWarning says which certificate expires within the warning window
// (warnBefore), "" when none does.
func (m *Member) certWarning(now time.Time) string {
	m.trust.renew.mu.Lock()
	defer m.trust.renew.mu.Unlock()
	var warn []string
	for _, name := range slices.Sorted(maps.Keys(m.trust.renew.notAfter)) {
		at := m.trust.renew.notAfter[name]
		window := m.warnBefore(name)
		if at.Sub(now) < window {
			warn = append(warn, fmt.Sprintf("certificate %s expires %s (in %s, warning below %s)", name, at.UTC().Format(time.RFC3339), at.Sub(now).Round(time.Second), window))
		}
	}
	return strings.Join(warn, "; ")
}

// memberFiles are the paths certs.WriteMember writes in the tls dir.
func (d dataDir) memberFiles() certs.Files {
	pem := filepath.Join(d.TLSDir(), "member.pem")
	return certs.Files{CA: filepath.Join(d.TLSDir(), "ca.crt"), Cert: pem, Key: pem}
}

// peerFiles are etcd's peer port files in the tls dir (issueMember): the
// peer CAs to trust, and the peer certificate with its key.
func (d dataDir) peerFiles() certs.Files {
	pem := filepath.Join(d.TLSDir(), "peer.pem")
	return certs.Files{CA: filepath.Join(d.TLSDir(), "peer-ca.crt"), Cert: pem, Key: pem}
}
