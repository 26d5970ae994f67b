package certs

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// A certificate of the new CA presented with the cross certificate
// verifies for a peer that trusts only the old CA (a member whose etcd
// started before the rotation) and for one that trusts only the new CA;
// without the cross certificate it does not verify under the old CA.
func TestCrossSignedChainVerifiesUnderEitherCA(t *testing.T) {
	now := time.Now()
	prev, err := NewCA("c", now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	next, err := NewCA("c", now)
	if err != nil {
		t.Fatal(err)
	}
	cross, err := CrossSign(prev, next)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := IssueFor(next, "m0", []string{"127.0.0.1"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := parse(t, leaf)
	verify := func(root []byte, chain []byte) error {
		roots, _ := Pool(root)
		inter := x509.NewCertPool()
		if chain != nil {
			inter.AppendCertsFromPEM(chain)
		}
		_, err := c.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		return err
	}
	if err := verify(prev.Cert, cross); err != nil {
		t.Errorf("new leaf with the cross certificate does not verify under the old CA: %v", err)
	}
	if err := verify(next.Cert, cross); err != nil {
		t.Errorf("new leaf with the cross certificate does not verify under the new CA: %v", err)
	}
	if err := verify(prev.Cert, nil); err == nil {
		t.Errorf("new leaf verifies under the old CA without the cross certificate: the test proves nothing")
	}
	chained := WithChain(leaf, cross)
	if got := len(chained.Cert); got != len(leaf.Cert)+len(cross) {
		t.Errorf("chain of %d bytes", got)
	}
}

// Only the old CA's key makes a cross certificate that VerifyCross takes:
// one an attacker makes with its own CA (for its CA, or naming the old
// CA as issuer) and the old CA's cross certificate of another CA are
// refused.
func TestVerifyCrossTakesOnlyTheOldCAsCrossCertificate(t *testing.T) {
	now := time.Now()
	mk := func() Pair {
		p, err := NewCA("c", now)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	prev, next, evil := mk(), mk(), mk()
	cross := func(a, b Pair) []byte {
		c, err := CrossSign(a, b)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := VerifyCross(prev.Cert, next.Cert, cross(prev, next)); err != nil {
		t.Fatalf("the old CA's cross certificate of the new one: %v", err)
	}
	for name, c := range map[string][]byte{
		"the attacker's CA certifying itself":      cross(evil, evil),
		"the attacker's CA certifying the new one": cross(evil, next),
		"the old CA certifying another CA":         cross(prev, evil),
		"no certificate":                           nil,
	} {
		if err := VerifyCross(prev.Cert, next.Cert, c); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
	// Naming the old CA as issuer, signed with another key: the issuer
	// name proves nothing, the signature does.
	prevCert, nextCert := parse(t, prev), parse(t, next)
	evilKey, err := tls.X509KeyPair(evil.Cert, evil.Key)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: nextCert.Subject, NotBefore: now, NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	posing := *prevCert // the old CA's name, the attacker's key
	posing.PublicKey = parse(t, evil).PublicKey
	der, err := x509.CreateCertificate(rand.Reader, tmpl, &posing, nextCert.PublicKey, evilKey.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	forged := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := VerifyCross(prev.Cert, next.Cert, forged); err == nil {
		t.Error("a cross certificate naming the old CA but signed by another key: taken")
	}
}
