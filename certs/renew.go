package certs

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Renewal of running members' certificates. etcd (go.etcd.io/etcd/client/
// pkg/v3 transport.TLSInfo) reads its certificate and key files at every
// TLS handshake, on both its listeners and its peer dials, so a member
// renews by replacing the files; TestEtcdReloadsKeyPairPerHandshake
// (task) proves it on the embedded etcd. Certificate and key live in one
// file (WritePair), replaced by one rename: a handshake between two
// renames of separate files would pair the new certificate with the old
// key and fail.

// RenewShare is the share of a certificate's life after which it is
// renewed: two thirds, leaving a third of its life to retry.
const RenewShare = 2.0 / 3.0

// backdate is how long before issuance a certificate becomes valid, for
// clocks behind the issuer's: an hour, or a tenth of a short validity.
func backdate(validity time.Duration) time.Duration {
	return min(time.Hour, validity/10)
}

// IssueFor is Issue with a validity (capped by the CA's own expiry).
func IssueFor(ca Pair, name string, hosts []string, now time.Time, validity time.Duration) (Pair, error) {
	if validity <= 0 {
		return Pair{}, fmt.Errorf("certificate for %s: validity %s is not positive", name, validity)
	}
	return issue(ca, name, hosts, now, validity)
}

// Leaf parses the first certificate of a PEM blob.
func Leaf(certPEM []byte) (*x509.Certificate, error) {
	for {
		var blk *pem.Block
		blk, certPEM = pem.Decode(certPEM)
		if blk == nil {
			return nil, errors.New("no PEM certificate")
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
}

// RenewAt is when a certificate is due for renewal: RenewShare of the
// way from its NotBefore to its NotAfter.
func RenewAt(c *x509.Certificate) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotBefore.Add(time.Duration(float64(life) * RenewShare))
}

// WarnBefore is how long before a certificate's expiry it is worth a
// warning: 30 days, or a sixth of a shorter configured validity (half the
// third that renewal leaves), so that short test validities warn only
// when renewal is late.
func WarnBefore(validity time.Duration) time.Duration {
	return min(30*24*time.Hour, validity/6)
}

// WritePair writes the certificate and key of p into one file (0600,
// certificate first) replaced by a single rename, so a reader (etcd at
// each handshake) sees the old pair or the new one, never a mix.
func WritePair(path string, p Pair) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(append([]byte{}, p.Cert...), p.Key...), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// WriteMember writes the CA certificates (never a key) as ca.crt and p as
// PREFIX.pem (WritePair) into dir (0700); Cert and Key of the result both
// name PREFIX.pem.
func WriteMember(dir, prefix string, caCerts []byte, p Pair) (Files, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return Files{}, err
	}
	f := Files{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, prefix+".pem")}
	f.Key = f.Cert
	if err := WritePair(f.CA, Pair{Cert: caCerts}); err != nil {
		return Files{}, err
	}
	if err := WritePair(f.Cert, p); err != nil {
		return Files{}, err
	}
	return f, nil
}
