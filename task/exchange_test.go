package task

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/exchange"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/identity"
	"github.com/etcd-nomad/etcd-nomad/task/trust"
)

type testKeys []byte

func (k testKeys) JWKS(context.Context) ([]byte, error) { return k, nil }

// A member's exchange endpoint, over its real HTTPS status server: a
// workload identity of a mapped job gets a certificate for its user (the
// request's key, the user's CN, access.certificate_ttl), which etcd then
// confines to the user's prefix; a job no user lists is refused (403), a
// token for another audience too (401).
func TestExchangeIssuesTheMappedUsersCertificate(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	enc := base64.RawURLEncoding
	doc, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kid": "k", "kty": "RSA",
		"n": enc.EncodeToString(key.N.Bytes()), "e": enc.EncodeToString(big.NewInt(int64(key.E)).Bytes())}}})
	token := func(job string, aud string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, identity.Claims{Namespace: "default", Job: job, Task: "app",
			RegisteredClaims: jwt.RegisteredClaims{Audience: jwt.ClaimStrings{aud}, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
		tok.Header["kid"] = "k"
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	k := newKit(t, "a")
	k.cl.TLS.Mode = config.TLSAuto
	k.cl.Access = billingAccess(45 * time.Second)
	k.identities = &identity.Verifier{Keys: testKeys(doc)}
	m := k.member("a", nil)
	k.seed(m)
	if _, err := m.reconcileAccess(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.serveStatus(); err != nil {
		t.Fatal(err)
	}
	pool, _ := certs.Pool(m.trust.CA().Cert)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	csr, keyPEM, err := certs.NewCSR()
	if err != nil {
		t.Fatal(err)
	}
	ask := func(tok string) (*http.Response, exchange.Response) {
		t.Helper()
		body, _ := json.Marshal(exchange.Request{Identity: tok, CSR: string(csr)})
		resp, err := hc.Post(m.statusURL(m.self)+exchange.Path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out exchange.Response
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				t.Fatal(err)
			}
		}
		return resp, out
	}
	resp, out := ask(token("billing", identity.ClusterAudience("kit")))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("mapped job: %s", resp.Status)
	}
	if out.User != "billing-api" || !strings.Contains(out.CA, "CERTIFICATE") || strings.Contains(out.CA, "PRIVATE") {
		t.Errorf("response: user %q, CA %q", out.User, out.CA)
	}
	if d := time.Until(out.NotAfter); d > 45*time.Second || d < 40*time.Second {
		t.Errorf("certificate valid for %s more, want certificate_ttl 45s", d)
	}
	kp, err := tls.X509KeyPair([]byte(out.Certificate), keyPEM)
	if err != nil {
		t.Fatalf("the certificate is not for the request's key: %v", err)
	}
	app := clientWith(t, m, kp)
	if err := putErr(app, "/billing/x"); err != nil {
		t.Errorf("exchanged certificate writes under /billing/: %v", err)
	}
	if err := putErr(app, "/other/x"); err == nil {
		t.Errorf("exchanged certificate writes outside /billing/")
	}
	if resp, _ := ask(token("other-job", identity.ClusterAudience("kit"))); resp.StatusCode != http.StatusForbidden {
		t.Errorf("unmapped job: %s, want 403", resp.Status)
	}
	if resp, _ := ask(token("billing", "nomadproject.io")); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("token for another audience: %s, want 401", resp.Status)
	}
}

// A certificate does not outlive the token that bought it by more than
// trust.ExchangeTokenMargin: a token expiring in 2 minutes with certificate_ttl
// 1h gets a certificate (and a not_after) ending by exp + the margin, not
// in an hour.
func TestExchangeCapsTheCertificateAtTheTokensExpiry(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	enc := base64.RawURLEncoding
	doc, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kid": "k", "kty": "RSA",
		"n": enc.EncodeToString(key.N.Bytes()), "e": enc.EncodeToString(big.NewInt(int64(key.E)).Bytes())}}})
	exp := time.Now().Add(2 * time.Minute).Truncate(time.Second)
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, identity.Claims{Namespace: "default", Job: "billing", Task: "app",
		RegisteredClaims: jwt.RegisteredClaims{Audience: jwt.ClaimStrings{identity.ClusterAudience("kit")}, ExpiresAt: jwt.NewNumericDate(exp)}})
	tok.Header["kid"] = "k"
	signed, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}

	k := newKit(t, "a")
	k.cl.TLS.Mode = config.TLSAuto
	k.cl.Access = billingAccess(time.Hour)
	k.identities = &identity.Verifier{Keys: testKeys(doc)}
	m := k.member("a", nil)
	k.seed(m)
	csr, _, err := certs.NewCSR()
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.trust.Exchange(context.Background(), exchange.Request{Identity: signed, CSR: string(csr)})
	if err != nil {
		t.Fatal(err)
	}
	limit := exp.Add(trust.ExchangeTokenMargin)
	blk, _ := pem.Decode([]byte(out.Certificate))
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.NotAfter.After(limit) || out.NotAfter.After(limit) {
		t.Errorf("certificate ends %s (not_after %s), want by the token's expiry %s + %s", cert.NotAfter, out.NotAfter, exp, trust.ExchangeTokenMargin)
	}
	if cert.NotAfter.Before(exp) {
		t.Errorf("certificate ends %s, before the token's expiry %s: capped too short", cert.NotAfter, exp)
	}
}
