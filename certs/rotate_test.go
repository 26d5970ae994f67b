package certs

import (
	"crypto/x509"
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
