package creds_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/exchange"
	"github.com/etcd-nomad/etcd-nomad/creds"
)

// catalog is what Consul says: a CA certificate and endpoints, as a
// writer of its keys and catalog chose them.
type catalog struct {
	ca  []byte
	eps []string
}

func (c catalog) CACert(context.Context) ([]byte, string, error) {
	return c.ca, "Consul key etcd-nomad/main/ca.crt", nil
}
func (c catalog) Endpoints(context.Context) ([]string, error) { return c.eps, nil }

// exchanger is a status port answering the exchange with a certificate
// from ca for the request's key, presenting cert (and its chain). It
// counts the requests that reached it, and keeps the identities it got.
type exchanger struct {
	srv  *httptest.Server
	hits atomic.Int32
	got  atomic.Pointer[string]
}

func newExchanger(t *testing.T, ca certs.Pair, cert certs.Pair) *exchanger {
	t.Helper()
	e := &exchanger{}
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		var req exchange.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		e.got.Store(&req.Identity)
		c, err := certs.SignClientCSR(ca, []byte(req.CSR), "billing-api", time.Now(), time.Hour)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(exchange.Response{User: "billing-api", Certificate: string(c), CA: string(ca.Cert), NotAfter: time.Now().Add(time.Hour)})
	}))
	kp, err := tls.X509KeyPair(cert.Cert, cert.Key)
	if err != nil {
		t.Fatal(err)
	}
	e.srv.TLS = &tls.Config{Certificates: []tls.Certificate{kp}}
	e.srv.StartTLS()
	t.Cleanup(e.srv.Close)
	return e
}

// crossSignedRotation is a CA rotation from old to next: the cross
// certificate old signed for next, and the pin of old.
func crossSignedRotation(t *testing.T) (old, next certs.Pair, cross []byte, pin string) {
	t.Helper()
	old, next = newCA(t), newCA(t)
	cross, err := certs.CrossSign(old, next)
	if err != nil {
		t.Fatal(err)
	}
	return old, next, cross, certs.Fingerprint(old.Cert)
}

func newCA(t *testing.T) certs.Pair {
	t.Helper()
	ca, err := certs.NewCA("main", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func serverCert(t *testing.T, ca certs.Pair) certs.Pair {
	t.Helper()
	p, err := certs.Issue(ca, "m0", []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func identityFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nomad_etcd.jwt")
	if err := os.WriteFile(p, []byte("the-workload-identity-jwt"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The CA pin (docs/clients.md), as the attacker does it: a writer of Consul's keys and
// catalog replaces the published CA with its own and registers its own
// server as the cluster's member. creds with the pin refuses, naming both
// fingerprints, and the attacker's server never gets a request (so never
// the JWT); with the attacker's CA added beside the real one, the
// attacker's server is not trusted either (only the pinned CA is a root)
// and its CA does not reach the application's ca.crt. Without a pin, as
// every creds before this change, the attacker receives the identity.
func TestPinnedCredsSendsTheIdentityOnlyUnderThePinnedCA(t *testing.T) {
	ca, evil := newCA(t), newCA(t)
	member := newExchanger(t, ca, serverCert(t, ca))
	attacker := newExchanger(t, evil, serverCert(t, evil))
	pin := certs.Fingerprint(ca.Cert)
	idf := identityFile(t)
	bg := context.Background()

	// The CA record and the catalog replaced.
	dir := t.TempDir()
	_, err := creds.Fetch(bg, creds.Options{Catalog: catalog{ca: evil.Cert, eps: []string{attacker.srv.URL}}, CAFingerprint: pin, IdentityFile: idf, Dir: dir})
	if !errors.Is(err, creds.ErrCANotPinned) {
		t.Fatalf("pinned, Consul's CA replaced: %v, want ErrCANotPinned", err)
	}
	if msg := err.Error(); !strings.Contains(msg, pin) || !strings.Contains(msg, certs.Fingerprint(evil.Cert)) {
		t.Errorf("the refusal does not name both fingerprints: %v", err)
	}
	if n := attacker.hits.Load(); n != 0 {
		t.Fatalf("the attacker's server got %d requests with the pin", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "client.key")); err == nil {
		t.Error("files written after a refusal")
	}

	// The attacker's CA beside the real one, its server listed first.
	both := append(append([]byte{}, ca.Cert...), evil.Cert...)
	r, err := creds.Fetch(bg, creds.Options{Catalog: catalog{ca: both, eps: []string{attacker.srv.URL, member.srv.URL}}, CAFingerprint: pin, IdentityFile: idf, Dir: dir})
	if err != nil {
		t.Fatalf("pinned, the real member listed second: %v", err)
	}
	if n := attacker.hits.Load(); n != 0 {
		t.Fatalf("the attacker's server got %d requests with the pin", n)
	}
	if r.Member != member.srv.URL || member.hits.Load() != 1 {
		t.Errorf("answered by %s, the member got %d requests", r.Member, member.hits.Load())
	}
	if b, _ := os.ReadFile(r.Files.CA); !bytes.Equal(b, ca.Cert) {
		t.Errorf("the application's ca.crt is not the pinned CA alone:\n%s", b)
	}

	// Control: unpinned, the attacker gets the identity (with a warning).
	if _, err := creds.Fetch(bg, creds.Options{Catalog: catalog{ca: evil.Cert, eps: []string{attacker.srv.URL}}, IdentityFile: idf, Dir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if p := attacker.got.Load(); attacker.hits.Load() != 1 || p == nil || *p != "the-workload-identity-jwt" {
		t.Fatalf("unpinned: the attacker got %d requests, want 1 with the identity", attacker.hits.Load())
	}

	// A pin that does not parse is refused, never taken as no pin.
	if _, err := creds.Fetch(bg, creds.Options{Catalog: catalog{ca: evil.Cert, eps: []string{attacker.srv.URL}}, CAFingerprint: "sha256:zz", IdentityFile: idf, Dir: t.TempDir()}); err == nil {
		t.Fatal("a malformed pin was accepted")
	}
	if n := attacker.hits.Load(); n != 1 {
		t.Fatalf("a malformed pin sent the identity: the attacker got %d requests", n)
	}
}

// Through a CA rotation (task/trust/rotate.go's phases) an application pinned to
// the old CA keeps working: at phase trust Consul publishes both CAs and
// the members still present the old CA's certificates (ca.crt: the
// pinned CA alone, the new one is not vouched for yet); at phase issue
// they present the new CA's with the cross certificate the old CA signed
// (certs.CrossSign), which vouches for the new CA (ca.crt: both); once
// the rotation retired the old CA, Consul publishes the new one alone and
// creds finds the pinned certificate in the ca.crt it wrote. A new CA in
// Consul without such a cross certificate never reaches ca.crt, and a
// fresh directory after the retirement must be pinned to the new CA.
func TestPinFollowsACrossSignedRotation(t *testing.T) {
	old, next, cross, pin := crossSignedRotation(t)
	idf := identityFile(t)
	dir := t.TempDir()
	bg := context.Background()
	fetch := func(published []byte, m *exchanger, dir string) ([]byte, error) {
		t.Helper()
		r, err := creds.Fetch(bg, creds.Options{Catalog: catalog{ca: published, eps: []string{m.srv.URL}}, CAFingerprint: pin, IdentityFile: idf, Dir: dir})
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(r.Files.CA)
		return b, err
	}
	both := append(append([]byte{}, old.Cert...), next.Cert...)

	trust := newExchanger(t, old, serverCert(t, old))
	got, err := fetch(both, trust, dir)
	if err != nil || !bytes.Equal(got, old.Cert) {
		t.Fatalf("phase trust: %v, ca.crt:\n%s", err, got)
	}
	issue := newExchanger(t, next, certs.WithChain(serverCert(t, next), cross))
	got, err = fetch(both, issue, dir)
	if err != nil || !bytes.Equal(got, both) {
		t.Fatalf("phase issue: %v, ca.crt:\n%s", err, got)
	}
	got, err = fetch(next.Cert, issue, dir)
	if err != nil || !bytes.Equal(got, both) {
		t.Fatalf("phase retire: %v, ca.crt:\n%s", err, got)
	}
	// Not cross-signed by the pinned CA: a member of the new CA without
	// the chain does not verify, so nothing is sent.
	plain := newExchanger(t, next, serverCert(t, next))
	if _, err := fetch(both, plain, t.TempDir()); err == nil || plain.hits.Load() != 0 {
		t.Fatalf("a member of an unvouched CA: %v, %d requests", err, plain.hits.Load())
	}
	if _, err := fetch(next.Cert, issue, t.TempDir()); !errors.Is(err, creds.ErrCANotPinned) {
		t.Fatalf("a fresh directory after the retirement: %v, want ErrCANotPinned", err)
	}
}

func TestParseFingerprint(t *testing.T) {
	want := "sha256:" + strings.Repeat("ab", 32)
	for _, in := range []string{want, "SHA256:" + strings.Repeat("AB", 32), "sha256:" + strings.TrimSuffix(strings.Repeat("AB:", 32), ":")} {
		if got, err := creds.ParseFingerprint(in); err != nil || got != want {
			t.Errorf("ParseFingerprint(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "ab", "sha1:" + strings.Repeat("ab", 20), "sha256:" + strings.Repeat("ab", 31)} {
		if _, err := creds.ParseFingerprint(in); err == nil {
			t.Errorf("ParseFingerprint(%q) accepted", in)
		}
	}
}
