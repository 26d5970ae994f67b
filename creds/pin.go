package creds

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FingerprintEnv is the environment variable -ca-fingerprint defaults to:
// the application's pin of the cluster CA.
const FingerprintEnv = "ETCD_NOMAD_CA_FINGERPRINT"

// ErrCANotPinned: none of the CA certificates creds could read (Consul's
// published one, or the one it wrote earlier) is the pinned CA. Nothing is
// sent anywhere.
var ErrCANotPinned = errors.New("the cluster CA is not the pinned one")

// ParseFingerprint reads a CA pin: "sha256:" and the hex SHA-256 of the CA
// certificate's DER (certs.Fingerprint, `etcd-nomad tls fingerprint`); the
// hex may be upper case or colon-separated (openssl x509 -fingerprint
// -sha256). It returns it in certs.Fingerprint's form.
func ParseFingerprint(s string) (string, error) {
	s = strings.TrimSpace(s)
	algo, h, ok := strings.Cut(s, ":")
	if !ok || !strings.EqualFold(algo, "sha256") {
		return "", fmt.Errorf("CA fingerprint %q: want sha256:<64 hex digits>", s)
	}
	h = strings.ToLower(strings.ReplaceAll(h, ":", ""))
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("CA fingerprint %q: want sha256:<64 hex digits>", s)
	}
	return "sha256:" + h, nil
}

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func parseAll(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

func encodeCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// pinnedCA returns the certificate whose fingerprint is pin, from the CA
// certificates Consul holds (published) or, failing that, from the ca.crt
// creds wrote into dir before: after a CA rotation retires the pinned CA,
// Consul publishes only the new one, and a running application keeps the
// pinned certificate it wrote. Where the bytes come from does not matter:
// only the pinned CA has that fingerprint. retired is true in the second
// case: the pinned CA is no longer the cluster's, and whoever holds its
// key (a rotation often retires a CA because its key leaked) can still
// receive the identity; the caller warns. ErrCANotPinned names what Consul
// holds and the pin.
func pinnedCA(pin string, published []byte, dir, where string) (c *x509.Certificate, retired bool, err error) {
	var seen []string
	for _, c := range parseAll(published) {
		if fingerprint(c) == pin {
			return c, false, nil
		}
		seen = append(seen, fingerprint(c))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "ca.crt")); err == nil {
		for _, c := range parseAll(b) {
			if fingerprint(c) == pin {
				return c, true, nil
			}
		}
	}
	held := "no certificate"
	if len(seen) > 0 {
		held = strings.Join(seen, ", ")
	}
	return nil, false, fmt.Errorf("%w: %s holds %s, the pin (-ca-fingerprint, %s) is %s; the workload identity was sent nowhere. "+
		"If an operator rotated the cluster CA (etcd-nomad tls rotate-ca), pin the new one (etcd-nomad tls fingerprint); if not, someone who may write Consul's keys replaced it",
		ErrCANotPinned, where, held, FingerprintEnv, pin)
}

// vouched returns the pinned CA followed by every CA certificate of
// published that a verified chain (leaf … pinned) of the member that
// answered carries as an intermediate (its subject and key): a new CA
// cross-signed by the pinned one during a CA rotation (certs.CrossSign).
// Any other CA Consul lists is left out of what the application trusts.
func vouched(pinned *x509.Certificate, published []byte, chains [][]*x509.Certificate) []byte {
	out := encodeCert(pinned)
	for _, c := range parseAll(published) {
		if !c.IsCA || fingerprint(c) == fingerprint(pinned) {
			continue
		}
	chains:
		for _, chain := range chains {
			if len(chain) < 3 || !chain[len(chain)-1].Equal(pinned) {
				continue
			}
			for _, x := range chain[1 : len(chain)-1] {
				if bytes.Equal(x.RawSubject, c.RawSubject) && bytes.Equal(x.RawSubjectPublicKeyInfo, c.RawSubjectPublicKeyInfo) {
					out = append(out, encodeCert(c)...)
					break chains
				}
			}
		}
	}
	return out
}

// certFingerprints names the certificates of b, for logs.
func certFingerprints(b []byte) string {
	var fps []string
	for _, c := range parseAll(b) {
		fps = append(fps, fingerprint(c))
	}
	return strings.Join(fps, ",")
}
