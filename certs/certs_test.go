package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func parse(t *testing.T, p Pair) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(p.Cert)
	if blk == nil {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A client certificate names its etcd user in the CN, is good for client
// authentication only (it cannot serve as a member), verifies against
// the CA, and lives as long as asked.
func TestIssueClientNamesTheUserAndServesNoServer(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("x", now)
	if err != nil {
		t.Fatal(err)
	}
	p, err := IssueClient(ca, "billing-api", now, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := parse(t, p)
	if c.Subject.CommonName != "billing-api" {
		t.Errorf("CN %q, want billing-api", c.Subject.CommonName)
	}
	if got := c.NotAfter.Sub(now); got < 89*time.Second || got > 91*time.Second {
		t.Errorf("valid for %s after now, want 90s", got)
	}
	if len(c.DNSNames)+len(c.IPAddresses) != 0 {
		t.Errorf("client certificate has SANs %v %v", c.DNSNames, c.IPAddresses)
	}
	pool, _ := Pool(ca.Cert)
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("does not verify for client auth: %v", err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Errorf("verifies for server auth: a client certificate must not serve")
	}
	if _, err := IssueClient(ca, "", now, time.Hour); err == nil {
		t.Errorf("empty user accepted")
	}
	if _, err := IssueClient(ca, "u", now, 0); err == nil {
		t.Errorf("zero validity accepted")
	}
	long, err := IssueClient(ca, "u", now, 100*365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if c := parse(t, long); c.NotAfter.After(parse(t, ca).NotAfter) {
		t.Errorf("client certificate outlives its CA: %s > %s", c.NotAfter, parse(t, ca).NotAfter)
	}
}

// A certificate signed for a request carries the request's key and the
// user the caller names, whatever subject the request asked for.
func TestSignClientCSRIgnoresTheRequestedName(t *testing.T) {
	now := time.Now()
	ca, _ := NewCA("x", now)
	csr, key, err := NewCSR()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := SignClientCSR(ca, csr, "billing-api", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c := parse(t, Pair{Cert: certPEM})
	if c.Subject.CommonName != "billing-api" {
		t.Errorf("CN %q", c.Subject.CommonName)
	}
	if _, err := tlsPair(certPEM, key); err != nil {
		t.Errorf("certificate does not match the request's key: %v", err)
	}
	if _, err := SignClientCSR(ca, []byte("garbage"), "u", now, time.Minute); err == nil {
		t.Errorf("garbage request signed")
	}
	blk, _ := pem.Decode(csr)
	blk.Bytes[len(blk.Bytes)-3] ^= 0xff // break the signature
	if _, err := SignClientCSR(ca, pem.EncodeToMemory(blk), "u", now, time.Minute); err == nil {
		t.Errorf("request with a broken signature signed")
	}
}

func tlsPair(certPEM, keyPEM []byte) (tls.Certificate, error) {
	return tls.X509KeyPair(certPEM, keyPEM)
}

// Write refuses a symlink planted at a file's path and leaves its target
// untouched; one planted at the temporary file it writes first is removed,
// not followed.
func TestWriteRefusesPlantedSymlinks(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("c", now)
	if err != nil {
		t.Fatal(err)
	}
	p, err := IssueClient(ca, "root", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, planted := range []string{"client.key", "client.key.tmp"} {
		dir := t.TempDir()
		target := filepath.Join(t.TempDir(), "target")
		if err := os.WriteFile(target, []byte("not yours"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, planted)); err != nil {
			t.Fatal(err)
		}
		_, err := Write(dir, "client", ca.Cert, p)
		if planted == "client.key" && err == nil {
			t.Errorf("a symlink at %s: written, want a refusal", planted)
		}
		if b, _ := os.ReadFile(target); string(b) != "not yours" {
			t.Errorf("a symlink at %s: its target now holds %q", planted, b)
		}
	}
}
