package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"
)

func testKEK(t testing.TB) []byte {
	s, err := NewKEK()
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseKEK(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A sealed CA holds its certificate in the clear and its key only
// encrypted; it opens with its KEK and with no other.
func TestSealedCAOpensOnlyWithItsKEK(t *testing.T) {
	ca, err := NewCA("c", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	kek := testKEK(t)
	b, err := Seal(ca, kek)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, ca.Key) || bytes.Contains(b, []byte("PRIVATE KEY-----")) {
		t.Fatalf("sealed blob holds the key in the clear:\n%s", b)
	}
	if cert, err := SealedCert(b); err != nil || !bytes.Equal(cert, ca.Cert) {
		t.Fatalf("SealedCert: %v", err)
	}
	got, err := OpenSealed(b, kek)
	if err != nil || !bytes.Equal(got.Key, ca.Key) || !bytes.Equal(got.Cert, ca.Cert) {
		t.Fatalf("OpenSealed with its KEK: %v", err)
	}
	other := testKEK(t)
	if _, err := OpenSealed(b, other); !errors.Is(err, ErrWrongKEK) || !strings.Contains(err.Error(), KEKID(kek)) {
		t.Fatalf("OpenSealed with another KEK: %v, want ErrWrongKEK naming the sealing key's id", err)
	}
	// The key is bound to its certificate: moved under another CA's
	// certificate, it does not open.
	ca2, _ := NewCA("c", time.Now())
	swapped := append(append([]byte{}, ca2.Cert...), b[len(ca.Cert):]...)
	if _, err := OpenSealed(swapped, kek); !errors.Is(err, ErrWrongKEK) {
		t.Fatalf("sealed key under another certificate: %v, want ErrWrongKEK", err)
	}
	for _, s := range []string{"", "x", "AAAA", strings.Repeat("A", 44)} {
		if _, err := ParseKEK(s); err == nil {
			t.Errorf("ParseKEK(%q) accepted", s)
		}
	}
}

// The status CA is the same for every member (derived), issues client
// certificates, and is not the cluster CA: a certificate it issues does
// not verify against the cluster CA.
func TestStatusCAIsDerivedAndSeparate(t *testing.T) {
	ca, err := NewCA("c", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s1, err := StatusCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := StatusCA(ca)
	if !bytes.Equal(s1.Cert, s2.Cert) || !bytes.Equal(s1.Key, s2.Key) {
		t.Fatal("two derivations of the status CA differ")
	}
	other, _ := NewCA("c", time.Now())
	if s3, _ := StatusCA(other); bytes.Equal(s3.Cert, s1.Cert) {
		t.Fatal("two cluster CAs derive the same status CA")
	}
	parsed, err := ParseBundle(s1.Bundle())
	if err != nil || !bytes.Equal(parsed.Key, s1.Key) {
		t.Fatalf("status CA bundle does not parse back: %v", err)
	}
	leaf, err := Issue(s1, "etcd-nomad-cli", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := x509.ParseCertificate(kp.Certificate[0])
	verify := func(root []byte) error {
		pool, _ := Pool(root)
		_, err := x.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err
	}
	if err := verify(s1.Cert); err != nil {
		t.Fatalf("a status client certificate does not verify against the status CA: %v", err)
	}
	if err := verify(ca.Cert); err == nil {
		t.Fatal("a status client certificate verifies against the cluster CA")
	}
}

// FuzzOpenSealed: any bytes in the coordinator's sealed-CA key give a CA
// whose key matches its certificate, or an error, never a panic; nothing
// opens with a KEK that did not seal it. Seeds: testdata/fuzz/FuzzOpenSealed.
func FuzzOpenSealed(f *testing.F) {
	kek := bytes.Repeat([]byte{7}, KEKSize)
	ca, err := NewCA("fuzz", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		f.Fatal(err)
	}
	b, err := Seal(ca, kek)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(ca.Bundle())
	wrong := bytes.Repeat([]byte{8}, KEKSize)
	f.Fuzz(func(t *testing.T, b []byte) {
		cert, cerr := SealedCert(b)
		p, err := OpenSealed(b, kek)
		if err == nil {
			if cerr != nil || !bytes.Equal(cert, p.Cert) {
				t.Fatalf("opened, but SealedCert: %v", cerr)
			}
			if _, err := tls.X509KeyPair(p.Cert, p.Key); err != nil {
				t.Fatalf("opened a key that does not match its certificate: %v", err)
			}
		}
		if _, err := OpenSealed(b, wrong); err == nil {
			t.Fatal("opened with a KEK that did not seal it")
		}
	})
}
