package certs

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
)

// CA rotation without restarting etcd. etcd loads the CA it trusts once,
// when it starts (transport.TLSInfo's ClientCAs and RootCAs), while it
// reads its own certificate at every handshake. So a running member keeps
// trusting the old CA until it restarts, and a new CA can be introduced
// without a restart only through the old one: CrossSign certifies the new
// CA's key and name under the old CA, and certificates issued by the new
// CA are presented with that cross certificate as their chain (leaf,
// cross). A verifier that trusts only the old CA builds leaf → cross →
// old; one that trusts the new CA builds leaf → new directly and ignores
// the cross certificate.

// CrossSign returns, PEM, a certificate for next's subject and public key
// issued by prev: an intermediate that makes next's certificates verify
// under prev. It is valid as long as both CAs are.
func CrossSign(prev, next Pair) ([]byte, error) {
	nextCert, err := Leaf(next.Cert)
	if err != nil {
		return nil, fmt.Errorf("new CA: %w", err)
	}
	prevCert, signer, _, _, err := prepare(prev, "cross", nextCert.NotBefore, 0)
	if err != nil {
		return nil, err
	}
	tmpl := crossTemplate(prevCert, nextCert, nextCert.SerialNumber)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, prevCert, nextCert.PublicKey, signer)
	if err != nil {
		return nil, fmt.Errorf("cross-sign the new CA: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// WithChain returns p with the PEM certificates chain appended to its
// certificate: what a TLS peer presents after the leaf.
func WithChain(p Pair, chain []byte) Pair {
	return Pair{Cert: append(append([]byte{}, p.Cert...), chain...), Key: p.Key}
}

// VerifyCross checks that cross (PEM) is a cross certificate of next
// issued by prev, as CrossSign makes it: a CA certificate with next's
// subject and public key, signed by prev's key. Only a holder of prev's
// key can make one, so a CA rotation whose cross certificate verifies was
// started by someone who holds the CA it replaces.
func VerifyCross(prevCert, nextCert, cross []byte) error {
	prev, err := OnlyCert(prevCert)
	if err != nil {
		return fmt.Errorf("old CA: %w", err)
	}
	next, err := Leaf(nextCert)
	if err != nil {
		return fmt.Errorf("new CA: %w", err)
	}
	c, err := OnlyCert(cross)
	if err != nil {
		return fmt.Errorf("cross certificate: %w", err)
	}
	if bytes.Equal(prev.RawSubjectPublicKeyInfo, next.RawSubjectPublicKeyInfo) {
		return errors.New("its new CA has the old CA's key: a rotation to the same CA")
	}
	if !c.IsCA || !bytes.Equal(c.RawSubject, next.RawSubject) || !bytes.Equal(c.RawSubjectPublicKeyInfo, next.RawSubjectPublicKeyInfo) {
		return errors.New("the cross certificate does not certify the new CA (its name and key)")
	}
	if !bytes.Equal(c.RawIssuer, prev.RawSubject) {
		return errors.New("the cross certificate is not issued by the old CA")
	}
	if err := c.CheckSignatureFrom(prev); err != nil {
		return fmt.Errorf("the cross certificate is not signed by the old CA's key: %w", err)
	}
	return nil
}

// OnlyCert parses b as exactly one PEM block of type CERTIFICATE with
// nothing else around it but white space. Leaf reads the first
// certificate and ignores what follows; where the bytes come from a record
// anyone with key write may have written and are then trusted or stored
// whole, what follows would be trusted too (a CA appended after the
// expected one).
func OnlyCert(b []byte) (*x509.Certificate, error) {
	blk, rest := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM certificate")
	}
	if blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("a PEM block of type %q, not a certificate", blk.Type)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("more than one PEM block where exactly one certificate belongs")
	}
	return x509.ParseCertificate(blk.Bytes)
}

// Certificates returns every certificate of the PEM bytes b, each encoded
// again on its own: blocks of another type, or that do not parse, are
// dropped, so what is written from it holds certificates and nothing else
// (etcd's loader takes every block, whatever its type).
func Certificates(b []byte) []byte {
	var out []byte
	for _, c := range ParseCertificates(b) {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out
}

// ParseCertificates returns the certificates of the PEM bytes b, skipping
// blocks of another type and what does not parse.
func ParseCertificates(b []byte) []*x509.Certificate {
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

// crossTemplate is the cross certificate of CA next under CA prev: next's
// name, key id, validity (cut at prev's end) and key usage, a CA with the
// given serial number. CrossSign and PeerCross sign it.
func crossTemplate(prev, next *x509.Certificate, serial *big.Int) *x509.Certificate {
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               next.Subject,
		SubjectKeyId:          next.SubjectKeyId,
		NotBefore:             next.NotBefore,
		NotAfter:              next.NotAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              next.KeyUsage,
	}
	if tmpl.NotAfter.After(prev.NotAfter) {
		tmpl.NotAfter = prev.NotAfter
	}
	return tmpl
}
