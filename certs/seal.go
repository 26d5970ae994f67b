package certs

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// The cluster CA's key never leaves the members in plaintext when a key
// encryption key (KEK) is configured: the coordinator holds the CA
// certificate and the key sealed with AES-256-GCM under the KEK, which only
// members (and operators who need etcd access) hold. Read-only clients use
// the status CA instead (StatusCA).

// KEKEnv is the environment variable that gives members (and operators
// who need etcd access) the cluster's key encryption key, base64. The
// rendered job sets it from the job's Nomad variable (jobs.CAKEKKey).
const KEKEnv = "ETCD_NOMAD_CA_KEK"

// KEKSize is the size of a key encryption key: 32 bytes (AES-256).
const KEKSize = 32

// sealedKeyType is the PEM type of the sealed CA key.
const sealedKeyType = "ETCD-NOMAD SEALED CA KEY"

// ErrWrongKEK: the CA was sealed with another key encryption key, or the
// sealed key was altered.
var ErrWrongKEK = errors.New("the cluster CA's key does not open with this key encryption key (another key, or altered)")

// NewKEK returns a fresh key encryption key, base64 encoded (the form
// ParseKEK reads and the Nomad variable holds).
func NewKEK() (string, error) {
	k := make([]byte, KEKSize)
	if _, err := rand.Read(k); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(k), nil
}

// ParseKEK decodes a base64 key encryption key of KEKSize bytes.
func ParseKEK(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("key encryption key: not base64: %w", err)
	}
	if len(k) != KEKSize {
		return nil, fmt.Errorf("key encryption key: %d bytes, want %d (e.g. openssl rand -base64 32)", len(k), KEKSize)
	}
	return k, nil
}

// KEKID names a key encryption key without revealing it, so that an error
// can tell two keys apart.
func KEKID(kek []byte) string {
	s := sha256.Sum256(append([]byte("etcd-nomad kek id\x00"), kek...))
	return hex.EncodeToString(s[:6])
}

// aead returns AES-256-GCM under kek and the additional data that binds a
// sealed key to its certificate (the sha256 of its DER).
func aead(kek []byte, certPEM []byte) (cipher.AEAD, []byte, error) {
	if len(kek) != KEKSize {
		return nil, nil, fmt.Errorf("key encryption key of %d bytes, want %d", len(kek), KEKSize)
	}
	blk, _ := pem.Decode(certPEM)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, nil, errors.New("no CA certificate")
	}
	b, err := aes.NewCipher(kek)
	if err != nil {
		return nil, nil, err
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		return nil, nil, err
	}
	ad := sha256.Sum256(blk.Bytes)
	return g, ad[:], nil
}

// Seal returns the CA certificate (PEM, in the clear) and its key sealed
// with kek, in one PEM blob for the coordinator.
func Seal(ca Pair, kek []byte) ([]byte, error) {
	g, ad, err := aead(kek, ca.Cert)
	if err != nil {
		return nil, fmt.Errorf("seal CA key: %w", err)
	}
	nonce := make([]byte, g.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	sealed := g.Seal(nonce, nonce, ca.Key, ad)
	blk := &pem.Block{Type: sealedKeyType, Headers: map[string]string{"Kek-Id": KEKID(kek)}, Bytes: sealed}
	return append(append([]byte{}, ca.Cert...), pem.EncodeToMemory(blk)...), nil
}

// parseSealed splits a blob written by Seal.
func parseSealed(b []byte) (cert []byte, sealed *pem.Block, err error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		switch {
		case blk.Type == "CERTIFICATE" && cert == nil:
			cert = pem.EncodeToMemory(blk)
		case blk.Type == sealedKeyType && sealed == nil:
			sealed = blk
		default:
			return nil, nil, fmt.Errorf("sealed CA: unexpected or repeated PEM block %q", blk.Type)
		}
	}
	if cert == nil || sealed == nil {
		return nil, nil, errors.New("sealed CA lacks a certificate or a sealed key")
	}
	if _, err := x509.ParseCertificate(certDER(cert)); err != nil {
		return nil, nil, fmt.Errorf("sealed CA certificate: %w", err)
	}
	return cert, sealed, nil
}

// certDER returns the DER bytes of a PEM certificate, nil if none.
func certDER(certPEM []byte) []byte {
	blk, _ := pem.Decode(certPEM)
	if blk == nil {
		return nil
	}
	return blk.Bytes
}

// SealedCert returns the CA certificate of a sealed blob; it needs no key.
func SealedCert(b []byte) ([]byte, error) {
	cert, _, err := parseSealed(b)
	return cert, err
}

// OpenSealed returns the CA pair of a blob written by Seal, checking that
// the key opens with kek and belongs to the certificate.
func OpenSealed(b []byte, kek []byte) (Pair, error) {
	cert, sealed, err := parseSealed(b)
	if err != nil {
		return Pair{}, err
	}
	g, ad, err := aead(kek, cert)
	if err != nil {
		return Pair{}, err
	}
	if len(sealed.Bytes) < g.NonceSize()+g.Overhead() {
		return Pair{}, fmt.Errorf("sealed CA key of %d bytes: truncated: %w", len(sealed.Bytes), ErrWrongKEK)
	}
	key, err := g.Open(nil, sealed.Bytes[:g.NonceSize()], sealed.Bytes[g.NonceSize():], ad)
	if err != nil {
		return Pair{}, fmt.Errorf("sealed with key %s, this key is %s: %w", sealed.Headers["Kek-Id"], KEKID(kek), ErrWrongKEK)
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		return Pair{}, fmt.Errorf("sealed CA key does not match its certificate: %w", err)
	}
	return Pair{Cert: cert, Key: key}, nil
}

// StatusCA derives the status CA from the cluster CA: a self-signed CA
// whose certificates members accept on /status only, never on etcd's
// client or peer ports (those trust the cluster CA alone). Its key is
// derived from the cluster CA's key (HKDF-SHA256, one-way) and the
// certificate is Ed25519-signed with fixed fields, so every member derives
// the same bytes and needs nothing stored to trust it; the coordinator
// holds it in the clear for read-only clients (`status`).
func StatusCA(ca Pair) (Pair, error) {
	blk, _ := pem.Decode(ca.Key)
	if blk == nil {
		return Pair{}, errors.New("status CA: no cluster CA key")
	}
	caCert, err := x509.ParseCertificate(certDER(ca.Cert))
	if err != nil {
		return Pair{}, fmt.Errorf("status CA: cluster CA certificate: %w", err)
	}
	seed, err := hkdf.Key(sha256.New, blk.Bytes, nil, "etcd-nomad status CA v1", ed25519.SeedSize)
	if err != nil {
		return Pair{}, err
	}
	key := ed25519.NewKeyFromSeed(seed)
	sn := sha256.Sum256(append([]byte("etcd-nomad status CA serial\x00"), seed...))
	tmpl := &x509.Certificate{
		SerialNumber:          new(big.Int).SetBytes(sn[:16]),
		Subject:               pkix.Name{CommonName: "etcd-nomad status CA for " + caCert.Subject.CommonName, Organization: []string{"etcd-nomad"}},
		NotBefore:             caCert.NotBefore,
		NotAfter:              caCert.NotAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(bytes.NewReader(nil), tmpl, tmpl, key.Public(), key)
	if err != nil {
		return Pair{}, fmt.Errorf("status CA: %w", err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
	}, nil
}
