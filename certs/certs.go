// Package certs creates the cluster CA and the member and client
// certificates of TLS mode "auto", and writes them with safe permissions.
// The CA is created once per cluster and shared through the coordinator;
// this package never decides where it is stored.
package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Validity periods. Member certificates are reissued at every start, so a
// year is long enough; the CA lives as long as the cluster.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
)

// RootUser is etcd's administrator. With etcd's authorization on, a client
// certificate whose CN is RootUser acts as root: the members' own clients
// and the operator's CLI present one; applications never get one.
const RootUser = "root"

// Pair is a PEM certificate and its PEM private key.
type Pair struct {
	Cert []byte
	Key  []byte
}

// Bundle serializes a CA pair into one PEM blob for the coordinator.
func (p Pair) Bundle() []byte { return append(append([]byte{}, p.Cert...), p.Key...) }

// ParseBundle splits a blob written by Bundle.
func ParseBundle(b []byte) (Pair, error) {
	var p Pair
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		switch blk.Type {
		case "CERTIFICATE":
			p.Cert = pem.EncodeToMemory(blk)
		case "EC PRIVATE KEY", "PRIVATE KEY": // the status CA's is Ed25519 (PKCS #8)
			p.Key = pem.EncodeToMemory(blk)
		}
	}
	if p.Cert == nil || p.Key == nil {
		return Pair{}, errors.New("CA bundle lacks a certificate or a key")
	}
	return p, nil
}

// Fingerprint names a PEM certificate in logs and status: "sha256:" and
// the hex SHA-256 of its DER bytes (what `openssl x509 -fingerprint
// -sha256` prints, without the colons).
func Fingerprint(certPEM []byte) string {
	blk, _ := pem.Decode(certPEM)
	if blk == nil {
		return "(no certificate)"
	}
	sum := sha256.Sum256(blk.Bytes)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// newLeaf makes a fresh key and a certificate template with a random
// serial, the subject common name cn, valid from backdate(validity)
// before now until now+validity.
func newLeaf(cn string, now time.Time, validity time.Duration) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, nil, err
	}
	return key, &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"etcd-nomad"}},
		NotBefore:    now.Add(-backdate(validity)),
		NotAfter:     now.Add(validity),
	}, nil
}

func encode(der []byte, key *ecdsa.PrivateKey) (Pair, error) {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
	}, nil
}

// NewCA creates a self-signed CA for cluster.
func NewCA(cluster string, now time.Time) (Pair, error) {
	key, tmpl, err := newLeaf("etcd-nomad CA "+cluster, now, caValidity)
	if err != nil {
		return Pair{}, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Pair{}, err
	}
	return encode(der, key)
}

// Issue signs a certificate for name, valid for both server and client
// authentication, with the given host names and IP addresses as SANs.
func Issue(ca Pair, name string, hosts []string, now time.Time) (Pair, error) {
	return issue(ca, name, hosts, now, leafValidity)
}

func issue(ca Pair, name string, hosts []string, now time.Time, validity time.Duration) (Pair, error) {
	caCert, signer, key, tmpl, err := prepare(ca, name, now, validity)
	if err != nil {
		return Pair{}, err
	}
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	seen := map[string]bool{}
	for _, h := range hosts {
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, signer)
	if err != nil {
		return Pair{}, err
	}
	return encode(der, key)
}

// IssueClient signs a client-only certificate (no server use, no SANs)
// whose subject common name is user, valid from an hour before now until
// now+validity (capped by the CA's own expiry), with a fresh key. etcd
// takes the user name of a client certificate from its CN: this is how
// operators, applications and the members themselves (user root)
// authenticate when etcd's authorization is on.
func IssueClient(ca Pair, user string, now time.Time, validity time.Duration) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	certPEM, err := signClient(ca, &key.PublicKey, user, now, validity)
	if err != nil {
		return Pair{}, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{Cert: certPEM, Key: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})}, nil
}

// SignClientCSR is IssueClient for a key the caller keeps: it signs the
// public key of the PEM certificate request csrPEM (whose signature must
// verify) and ignores every name the request asks for: the CN is user.
func SignClientCSR(ca Pair, csrPEM []byte, user string, now time.Time, validity time.Duration) ([]byte, error) {
	blk, _ := pem.Decode(csrPEM)
	if blk == nil || blk.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("no PEM CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request signature: %w", err)
	}
	return signClient(ca, csr.PublicKey, user, now, validity)
}

// NewCSR makes a fresh key and a certificate request for it, both PEM.
func NewCSR() (csrPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

func signClient(ca Pair, pub any, user string, now time.Time, validity time.Duration) ([]byte, error) {
	if user == "" {
		return nil, errors.New("client certificate: empty user name")
	}
	if validity <= 0 {
		return nil, fmt.Errorf("client certificate for %s: validity %s is not positive", user, validity)
	}
	caCert, signer, _, tmpl, err := prepare(ca, user, now, validity)
	if err != nil {
		return nil, err
	}
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, pub, signer)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// prepare loads the CA and makes a fresh key and template for cn.
func prepare(ca Pair, cn string, now time.Time, validity time.Duration) (*x509.Certificate, any, *ecdsa.PrivateKey, *x509.Certificate, error) {
	tc, err := tls.X509KeyPair(ca.Cert, ca.Key)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("load CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(tc.Certificate[0])
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("parse CA: %w", err)
	}
	key, tmpl, err := newLeaf(cn, now, validity)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return caCert, tc.PrivateKey, key, tmpl, nil
}

// Files are the paths of a written certificate set.
type Files struct {
	CA   string
	Cert string
	Key  string
}

// Write writes the CA certificate (never its key) and pair into dir as
// ca.crt, PREFIX.crt and PREFIX.key; the dir is 0700 and files 0600.
func Write(dir, prefix string, caCert []byte, p Pair) (Files, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return Files{}, err
	}
	f := Files{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, prefix+".crt"), Key: filepath.Join(dir, prefix+".key")}
	for path, b := range map[string][]byte{f.CA: caCert, f.Cert: p.Cert, f.Key: p.Key} {
		if err := replaceFile(path, b); err != nil {
			return Files{}, err
		}
	}
	return f, nil
}

// replaceFile writes b to path (0600) through path.tmp and a rename, so a
// reader sees the old file or the new one. It follows no symlink: one at
// path is refused (someone planted it: writing through it would put a
// key where they chose, replacing it would hide the plant), and one at
// path.tmp is removed, not followed; the temporary file is then created
// with O_EXCL|O_NOFOLLOW, so a link planted meanwhile fails the write.
func replaceFile(path string, b []byte) error {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s): refusing to write through or over it", path, fi.Mode().Type())
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	w, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	return os.Rename(tmp, path)
}

// ClientConfig builds a TLS client config that trusts caFile and presents
// cert/key.
func ClientConfig(f Files) (*tls.Config, error) {
	pool, err := loadPool(f.CA)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if f.Cert != "" {
		kp, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("load client certificate %s: %w", f.Cert, err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return cfg, nil
}

// ServerConfig builds a TLS server config presenting cert/key that verifies
// client certificates against the CA when clients present them.
func ServerConfig(f Files) (*tls.Config, error) {
	pool, err := loadPool(f.CA)
	if err != nil {
		return nil, err
	}
	kp, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("load server certificate %s: %w", f.Cert, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{kp}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}, nil
}

func loadPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read CA %s: %w", caFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("no certificate in CA file %s", caFile)
	}
	return pool, nil
}

// Pool returns a certificate pool holding the PEM certificates in b.
func Pool(b []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New("no certificate in PEM data")
	}
	return pool, nil
}
