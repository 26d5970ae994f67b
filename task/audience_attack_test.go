package task

// The exchange as the member of another cluster, or whoever holds a token
// an application sent there, uses it: a workload identity minted for
// cluster "other" replayed at this cluster's exchange (docs/security.md,
// threat model).

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/exchange"
	"github.com/etcd-nomad/etcd-nomad/identity"
)

// nomadKey is a Nomad cluster's signing key and the JWKS that lists it.
func nomadKey(t *testing.T) (*rsa.PrivateKey, testKeys) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	doc, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kid": "k", "kty": "RSA",
		"n": enc.EncodeToString(key.N.Bytes()), "e": enc.EncodeToString(big.NewInt(int64(key.E)).Bytes())}}})
	return key, doc
}

// jobIdentity is job billing's workload identity, signed by key, for the
// audiences aud.
func jobIdentity(t *testing.T, key *rsa.PrivateKey, aud ...string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, identity.Claims{Namespace: "default", Job: "billing", Task: "app",
		RegisteredClaims: jwt.RegisteredClaims{Audience: aud, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
	tok.Header["kid"] = "k"
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// exchangeOver posts token with a fresh certificate request to m's
// exchange and returns the status and the decoded answer.
func exchangeOver(t *testing.T, hc *http.Client, m *Member, token string) (int, map[string]any) {
	t.Helper()
	csr, _, err := certs.NewCSR()
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(exchange.Request{Identity: token, CSR: string(csr)})
	resp, err := hc.Post(m.statusURL(m.self)+exchange.Path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	if resp.StatusCode == http.StatusOK {
		_ = json.NewDecoder(resp.Body).Decode(&out)
	}
	return resp.StatusCode, out
}

// Cluster "kit"'s exchange takes the job's token for its own audience
// (etcd-nomad:kit), and refuses (401) a token for cluster "other" alone
// or beside the bare etcd-nomad of earlier versions: a token an
// application sent to another cluster's members buys nothing here. The
// bare etcd-nomad alone is still taken, for the upgrade, with a warning
// in the answer that creds logs. On main every token carrying etcd-nomad
// was taken by every cluster, and etcd-nomad:kit was refused.
func TestExchangeTakesOnlyTokensForThisCluster(t *testing.T) {
	key, keys := nomadKey(t)
	m, cfg := statusTarget(t, true, keys)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer hc.CloseIdleConnections()
	if got := m.opts.Cluster.Name; got != "kit" {
		t.Fatalf("cluster %q, want kit", got)
	}
	for _, c := range []struct {
		aud  []string
		want int
	}{
		{[]string{"etcd-nomad:kit"}, http.StatusOK},
		{[]string{"etcd-nomad:other"}, http.StatusUnauthorized},
		{[]string{"etcd-nomad", "etcd-nomad:other"}, http.StatusUnauthorized},
		{[]string{"etcd-nomad:kit-other"}, http.StatusUnauthorized},
		{[]string{"etcd-nomad:"}, http.StatusUnauthorized},
		{[]string{"nomadproject.io"}, http.StatusUnauthorized},
	} {
		if code, _ := exchangeOver(t, hc, m, jobIdentity(t, key, c.aud...)); code != c.want {
			t.Errorf("token for audience %q: %d, want %d", c.aud, code, c.want)
		}
	}
	code, out := exchangeOver(t, hc, m, jobIdentity(t, key, "etcd-nomad"))
	if code != http.StatusOK {
		t.Fatalf("token for the bare audience etcd-nomad (earlier versions'): %d, want 200 during the upgrade", code)
	}
	if w, _ := out["warning"].(string); w == "" {
		t.Errorf("the bare audience was taken without a warning: %v", out)
	}
}
