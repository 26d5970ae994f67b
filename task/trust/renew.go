package trust

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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
	"github.com/etcd-nomad/etcd-nomad/datadir"
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
func (t *Trust) certTTL() time.Duration {
	if d := t.cfg.Cluster.TLS.CertificateTTL; d > 0 {
		return d
	}
	return config.DefaultMemberCertTTL
}

// memberHosts are the member certificate's SANs.
func (t *Trust) memberHosts() []string {
	host, _ := os.Hostname()
	return []string{t.cfg.Self.Address, "127.0.0.1", "::1", "localhost", t.cfg.Name, host}
}

// issueMember issues the member certificate from the current CA and
// writes it, with its chain (a CA rotation's cross certificate), and the
// CA certificates to trust; then the same for the peer port: the peer
// certificate from the current CA's peer CA, and the peer CAs to trust.
func (t *Trust) issueMember(now time.Time) error {
	peer, err := certs.IssuePeer(*t.currentCA(), t.memberHosts(), now, t.certTTL())
	if err != nil {
		return fmt.Errorf("issue peer certificate: %w", err)
	}
	peerTrust, err := t.peerTrust()
	if err != nil {
		return err
	}
	pf := peerFiles(t.cfg.Dir)
	if err := os.MkdirAll(filepath.Dir(pf.CA), 0o700); err != nil {
		return err
	}
	if err := certs.WritePair(pf.CA, certs.Pair{Cert: peerTrust}); err != nil {
		return err
	}
	if err := certs.WritePair(pf.Cert, certs.WithChain(peer, t.peerChain())); err != nil {
		return err
	}
	pair, err := certs.IssueFor(*t.currentCA(), t.cfg.Name, t.memberHosts(), now, t.certTTL())
	if err != nil {
		return fmt.Errorf("issue member certificate: %w", err)
	}
	// The same paths every time: t.tlsFiles, set at start, stays.
	if _, err := certs.WriteMember(t.cfg.Dir.TLSDir(), "member", t.rotationTrust(), certs.WithChain(pair, t.chain())); err != nil {
		return fmt.Errorf("write member certificate: %w", err)
	}
	return nil
}

// issueRoot issues the member's root client certificate from the current
// CA and hands it, with its chain, to every later handshake.
func (t *Trust) issueRoot(now time.Time) error {
	root, err := certs.IssueClient(*t.currentCA(), certs.RootUser, now, t.certTTL())
	if err != nil {
		return fmt.Errorf("issue root client certificate: %w", err)
	}
	root = certs.WithChain(root, t.chain())
	kp, err := tls.X509KeyPair(root.Cert, root.Key)
	if err != nil {
		return fmt.Errorf("root client certificate: %w", err)
	}
	t.renew.root.Store(&kp)
	return nil
}

// rootCertificate hands out the current root client certificate
// (tls.Config.GetClientCertificate).
func (t *Trust) rootCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if c := t.renew.root.Load(); c != nil {
		return c, nil
	}
	return &tls.Certificate{}, nil
}

// serverCertificate reads the member certificate file at each handshake,
// as etcd does (tls.Config.GetCertificate of the status server).
func (t *Trust) serverCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	kp, err := tls.LoadX509KeyPair(t.tlsFiles.Cert, t.tlsFiles.Key)
	if err != nil {
		return nil, fmt.Errorf("member certificate %s: %w", t.tlsFiles.Cert, err)
	}
	return &kp, nil
}

// RenewLoop renews the certificates when due until ctx ends.
func (t *Trust) RenewLoop(ctx context.Context) {
	for {
		next := t.renewOnce(time.Now(), t.followRotation(ctx))
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
func (t *Trust) renewOnce(now time.Time, reissue bool) time.Time {
	next := now.Add(renewPoll)
	if t.scheme != "https" {
		return next
	}
	if b, err := os.ReadFile(t.tlsFiles.CA); err == nil {
		t.renew.forgetCAs() // a CA rotation retires one
		for i, c := range certs.ParseCertificates(b) {
			name := certCA
			if i > 0 {
				name = fmt.Sprintf("%s:%d", certCA, i+1)
			}
			t.renew.set(name, c.NotAfter)
		}
	}
	leaf, err := t.memberLeaf()
	if err != nil {
		t.log.Warn("member certificate not readable", "error", err)
		return next
	}
	ca := t.currentCA()
	if ca != nil && (reissue || !now.Before(certs.RenewAt(leaf))) {
		if err := t.issueMember(now); err != nil {
			t.log.Error("member certificate not renewed", "error", err, "expires", leaf.NotAfter)
			return next
		}
		old := leaf.NotAfter
		if leaf, err = t.memberLeaf(); err != nil {
			t.log.Error("renewed member certificate not readable", "error", err)
			return next
		}
		t.log.Info("renewed the member certificate", "was_valid_until", old.UTC().Format(time.RFC3339), "valid_until", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	t.renew.set(certMember, leaf.NotAfter)
	next = earlier(next, certs.RenewAt(leaf))
	if c := t.renew.root.Load(); c != nil && c.Leaf != nil && ca != nil {
		if reissue || !now.Before(certs.RenewAt(c.Leaf)) {
			old := c.Leaf.NotAfter
			if err := t.issueRoot(now); err != nil {
				t.log.Error("root client certificate not renewed", "error", err, "expires", old)
				return next
			}
			c = t.renew.root.Load()
			t.log.Info("renewed the root client certificate", "valid_until", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		t.renew.set(certRoot, c.Leaf.NotAfter)
		next = earlier(next, certs.RenewAt(c.Leaf))
	}
	return next
}

// trustedCAs are the CA certificates the member's files trust now.
func (t *Trust) trustedCAs() []byte {
	b, err := os.ReadFile(t.tlsFiles.CA)
	if err != nil || len(certs.ParseCertificates(b)) == 0 {
		return nil
	}
	return b
}

// trustedPeerCAs are the peer CA certificates the peer port's file
// trusts now.
func (t *Trust) trustedPeerCAs() []byte {
	b, err := os.ReadFile(peerFiles(t.cfg.Dir).CA)
	if err != nil || len(certs.ParseCertificates(b)) == 0 {
		return nil
	}
	return b
}

func (t *Trust) memberLeaf() (*x509.Certificate, error) {
	b, err := os.ReadFile(t.tlsFiles.Cert)
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

// warnBefore is certificate name's warning window: the CAs' is 30 days;
// the member's and root's is certs.WarnBefore of the configured validity.
func (t *Trust) warnBefore(name string) time.Duration {
	if strings.HasPrefix(name, certCA) {
		return certs.WarnBefore(config.DefaultMemberCertTTL)
	}
	return certs.WarnBefore(t.certTTL())
}

// CertWarning says which certificate expires within the warning window
// (warnBefore), "" when none does.
func (t *Trust) CertWarning(now time.Time) string {
	t.renew.mu.Lock()
	defer t.renew.mu.Unlock()
	var warn []string
	for _, name := range slices.Sorted(maps.Keys(t.renew.notAfter)) {
		at := t.renew.notAfter[name]
		window := t.warnBefore(name)
		if at.Sub(now) < window {
			warn = append(warn, fmt.Sprintf("certificate %s expires %s (in %s, warning below %s)", name, at.UTC().Format(time.RFC3339), at.Sub(now).Round(time.Second), window))
		}
	}
	return strings.Join(warn, "; ")
}

// memberFiles are the paths certs.WriteMember writes in the tls dir.
func memberFiles(d datadir.Dir) certs.Files {
	pem := filepath.Join(d.TLSDir(), "member.pem")
	return certs.Files{CA: filepath.Join(d.TLSDir(), "ca.crt"), Cert: pem, Key: pem}
}

// peerFiles are etcd's peer port files in the tls dir (issueMember): the
// peer CAs to trust, and the peer certificate with its key.
func peerFiles(d datadir.Dir) certs.Files {
	pem := filepath.Join(d.TLSDir(), "peer.pem")
	return certs.Files{CA: filepath.Join(d.TLSDir(), "peer-ca.crt"), Cert: pem, Key: pem}
}
