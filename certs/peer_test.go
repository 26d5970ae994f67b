package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

// verifyPeer verifies the leaf of p, with the certificates after it as
// intermediates, against roots (PEM), for client and server use, as
// the peer port and a member dialing it check it.
func verifyPeer(t *testing.T, p Pair, roots []byte) error {
	t.Helper()
	certs := parseAll(p.Cert)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(roots)
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err == nil {
		_, err = certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	}
	return err
}

func parseAll(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return out
		}
		if c, err := x509.ParseCertificate(blk.Bytes); blk.Type == "CERTIFICATE" && err == nil {
			out = append(out, c)
		}
	}
}

// The peer CA is derived from the cluster CA's key: two members holding
// the same cluster CA compute the same peer CA (byte for byte: same key,
// same certificate), so a peer certificate issued by one verifies against
// the peer CA another computed. A different cluster CA gives another.
func TestPeerCAIsDerivedTheSameOnEveryMember(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("x", now)
	if err != nil {
		t.Fatal(err)
	}
	// Two members: each its own copy of the bundle.
	copyA, copyB := Pair{Cert: bytes.Clone(ca.Cert), Key: bytes.Clone(ca.Key)}, Pair{Cert: bytes.Clone(ca.Cert), Key: bytes.Clone(ca.Key)}
	keyA, certA, err := peerCA(copyA)
	if err != nil {
		t.Fatal(err)
	}
	keyB, certB, err := peerCA(copyB)
	if err != nil {
		t.Fatal(err)
	}
	if !keyA.Equal(keyB) {
		t.Fatal("the same cluster CA key gave two peer CA keys")
	}
	if !bytes.Equal(certA.Raw, certB.Raw) {
		t.Fatal("the same cluster CA gave two peer CA certificates")
	}
	anchorB, _ := PeerCACert(copyB)
	leafA, err := IssuePeer(copyA, []string{"127.0.0.1", "m0"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyPeer(t, leafA, anchorB); err != nil {
		t.Fatalf("a peer certificate issued by member A does not verify against member B's peer CA: %v", err)
	}
	if c := parse(t, leafA); c.Subject.CommonName != PeerCN || c.NotAfter.After(now.Add(time.Hour)) {
		t.Fatalf("peer certificate: CN %q, valid until %s", c.Subject.CommonName, c.NotAfter)
	}
	if !certA.IsCA || certA.Subject.CommonName == parse(t, ca).Subject.CommonName {
		t.Fatalf("peer CA certificate: CA %v, subject %q", certA.IsCA, certA.Subject.CommonName)
	}
	other, _ := NewCA("x", now)
	if k, _, _ := peerCA(other); k.Equal(keyA) {
		t.Fatal("another cluster CA gave the same peer CA key")
	}
	st, _ := StatusCA(ca)
	if bytes.Equal(st.Cert, pemCertificate(certA.Raw)) {
		t.Fatal("the peer CA is the status CA")
	}
}

// Trust is split both ways: nothing the cluster CA issues (a member's
// client-port certificate, a root or application client certificate)
// verifies against the peer CA, and a peer certificate does not verify
// against the cluster CA (it is no client on the client port).
func TestPeerCAAndClusterCAAreSeparate(t *testing.T) {
	now := time.Now()
	ca, _ := NewCA("x", now)
	anchor, err := PeerCACert(ca)
	if err != nil {
		t.Fatal(err)
	}
	member, _ := Issue(ca, "m0", []string{"127.0.0.1"}, now)
	root, _ := IssueClient(ca, RootUser, now, time.Hour)
	csr, key, _ := NewCSR()
	appCert, _ := SignClientCSR(ca, csr, "billing", now, time.Hour)
	for name, p := range map[string]Pair{"member client-port": member, "root client": root, "application": {Cert: appCert, Key: key}} {
		if verifyPeer(t, p, anchor) == nil {
			t.Errorf("a %s certificate of the cluster CA verifies against the peer CA", name)
		}
	}
	peer, _ := IssuePeer(ca, []string{"127.0.0.1"}, now, time.Hour)
	if _, err := parse(t, peer).Verify(x509.VerifyOptions{Roots: mustPool(t, ca.Cert), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
		t.Error("a peer certificate verifies against the cluster CA")
	}
}

// A CA rotation: a peer certificate of the new CA's peer CA, presented
// with PeerCross, verifies for a member that loaded only the old peer CA,
// and directly for one that loaded the new; after a second rotation, with
// both cross certificates, still for one that loaded only the first.
func TestPeerCrossVerifiesUnderEitherPeerCA(t *testing.T) {
	now := time.Now()
	a, _ := NewCA("x", now)
	b, _ := NewCA("x", now)
	c, _ := NewCA("x", now)
	anchorA, _ := PeerCACert(a)
	anchorB, _ := PeerCACert(b)
	xAB, err := PeerCross(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := PeerCross(a, b); !bytes.Equal(again, xAB) {
		t.Fatal("the peer cross certificate differs between two computations")
	}
	leafB, _ := IssuePeer(b, []string{"127.0.0.1"}, now, time.Hour)
	if err := verifyPeer(t, WithChain(leafB, xAB), anchorA); err != nil {
		t.Errorf("new peer certificate with the cross certificate, old peer CA loaded: %v", err)
	}
	if err := verifyPeer(t, WithChain(leafB, xAB), anchorB); err != nil {
		t.Errorf("new peer certificate, new peer CA loaded: %v", err)
	}
	if verifyPeer(t, leafB, anchorA) == nil {
		t.Error("new peer certificate without the cross certificate verifies against the old peer CA")
	}
	xBC, _ := PeerCross(b, c)
	leafC, _ := IssuePeer(c, []string{"127.0.0.1"}, now, time.Hour)
	if err := verifyPeer(t, WithChain(leafC, append(append([]byte{}, xBC...), xAB...)), anchorA); err != nil {
		t.Errorf("after two rotations, the first peer CA loaded: %v", err)
	}
}

func mustPool(t *testing.T, pemCerts []byte) *x509.CertPool {
	t.Helper()
	p, err := Pool(pemCerts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
