package task

// The status port as an attacker on the network uses it: no client
// certificate, only connections, requests and bodies of its choosing
// (docs/security.md, threat model: "a network peer without a certificate"). The
// member runs etcd in the same process, so what the status port lets a
// stranger hold (file descriptors, goroutines, the verifier's lock) is
// taken from etcd.

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/exchange"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/identity"
	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/task/statusport"
)

// statusTarget is a member with TLS auto serving its status port, etcd not
// started (the status port serves before etcd does), with an access block
// when access is true, verifying identities against keys.
func statusTarget(t *testing.T, access bool, keys identity.KeySource) (*Member, *tls.Config) {
	t.Helper()
	k := newKit(t, "a")
	k.cl.TLS.Mode = config.TLSAuto
	if access {
		k.cl.Access = billingAccess(time.Minute)
	}
	k.identities = &identity.Verifier{Keys: keys}
	m := k.member("a", nil)
	if err := m.serveStatus(); err != nil {
		t.Fatal(err)
	}
	pool, err := certs.Pool(m.trust.CA().Cert)
	if err != nil {
		t.Fatal(err)
	}
	// The attacker trusts the member's CA (it is public) and presents no
	// certificate.
	return m, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// billingAccess maps job billing to user billing-api, whose role
// read-writes /billing/.
func billingAccess(ttl time.Duration) *config.Access {
	return &config.Access{CertificateTTL: ttl,
		Roles: []config.Role{{Name: "billing", ReadWrite: []string{"/billing/"}}},
		Users: []config.User{{Name: "billing-api", Roles: []string{"billing"}, NomadJobs: []string{"billing"}}}}
}

func statusAddr(m *Member) string {
	return net.JoinHostPort(m.self.Address, strconv.Itoa(m.self.StatusPort))
}

// attackToken is a workload identity for job billing under key id kid,
// signed by a key of the attacker's (the signature is checked only once
// the key id is found).
func attackToken(t *testing.T, kid string) string {
	t.Helper()
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, identity.Claims{Namespace: "default", Job: "billing",
		RegisteredClaims: jwt.RegisteredClaims{Audience: jwt.ClaimStrings{identity.Audience}, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func someKeys(t *testing.T) testKeys {
	t.Helper()
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	enc := base64.RawURLEncoding
	doc, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kid": "k", "kty": "RSA",
		"n": enc.EncodeToString(key.N.Bytes()), "e": enc.EncodeToString(big.NewInt(int64(key.E)).Bytes())}}})
	return doc
}

// A POST to the exchange whose body trickles in (a byte every half
// second, so no per-read idle timeout would ever fire) is cut off at the
// status port's read deadline; on main it was held open as long as the
// client liked.
func TestStatusPortCutsOffASlowExchangeBody(t *testing.T) {
	m, cfg := statusTarget(t, true, someKeys(t))
	conn, err := tls.Dial("tcp", statusAddr(m), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{\"identity\":\"", exchange.Path); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			if _, err := conn.Write([]byte("a")); err != nil {
				return
			}
		}
	}()
	limit := statusport.ReadTimeout + 5*time.Second
	_ = conn.SetReadDeadline(start.Add(limit))
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a body trickling in for %s is still being read (status read timeout %s)", limit, statusport.ReadTimeout)
	}
	if d := time.Since(start); d > statusport.ReadTimeout+3*time.Second {
		t.Errorf("slow body cut off after %s, want within the read timeout %s", d, statusport.ReadTimeout)
	}
	t.Logf("cut off after %s: %q, %v", time.Since(start).Round(time.Millisecond), firstLine(got), err)
}

func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// Connections opened and left silent, more than the status port's cap,
// from as many sources as it takes (statusport.MaxConnsPerSource each): the
// member accepts (and holds a descriptor for) at most statusport.MaxConns of
// them, the rest wait in the kernel's backlog; a legitimate /health from
// another source that arrives behind them is answered once the silent
// ones reach the header timeout, not starved. On main every connection
// was accepted: thousands exhaust the descriptors of the process that
// runs etcd.
func TestStatusPortCapsConnections(t *testing.T) {
	m, cfg := statusTarget(t, false, someKeys(t))
	before := openFDs(t)
	n := statusport.MaxConns + 64
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		c, err := fromSource(fmt.Sprintf("127.0.0.%d", 20+i/statusport.MaxConnsPerSource)).Dial("tcp", statusAddr(m))
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	time.Sleep(500 * time.Millisecond)
	accepted := openFDs(t) - before - n // the attacker's own sockets are in this process too
	if accepted > statusport.MaxConns+16 {
		t.Errorf("the member holds %d descriptors for %d silent connections, want at most the cap %d", accepted, n, statusport.MaxConns)
	}
	hc := clientFrom("127.0.0.3", cfg, statusport.HeaderTimeout+5*time.Second)
	defer hc.CloseIdleConnections()
	start := time.Now()
	resp, err := hc.Get("https://" + statusAddr(m) + "/health")
	if err != nil {
		t.Fatalf("/health behind %d silent connections: %v", n, err)
	}
	resp.Body.Close()
	if d := time.Since(start); d > statusport.HeaderTimeout+3*time.Second {
		t.Errorf("/health answered after %s behind %d silent connections, want within the header timeout %s", d, n, statusport.HeaderTimeout)
	}
	t.Logf("%d silent connections: member accepted %d; /health %s after %s", n, accepted, resp.Status, time.Since(start).Round(time.Millisecond))
}

// Without an access block no workload maps to a user: the exchange is not
// served at all (404), so a stranger gets nothing to verify or decode.
func TestExchangeWithoutAccessIsNotServed(t *testing.T) {
	m, cfg := statusTarget(t, false, someKeys(t))
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer hc.CloseIdleConnections()
	body, _ := json.Marshal(exchange.Request{Identity: attackToken(t, "k"), CSR: "x"})
	resp, err := hc.Post(m.statusURL(m.self)+exchange.Path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("exchange without an access block: %s, want 404", resp.Status)
	}
}

// A burst of exchange requests from one source beyond statusport.ExchangeSourceBurst
// is refused with 429 (and Retry-After) before anything is decoded or
// verified.
func TestExchangeBurstIsRateLimited(t *testing.T) {
	m, cfg := statusTarget(t, true, someKeys(t))
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer hc.CloseIdleConnections()
	extra := 15
	var limited, firstLimited int
	for i := range statusport.ExchangeSourceBurst + extra {
		resp, err := hc.Post(m.statusURL(m.self)+exchange.Path, "application/json", bytes.NewReader([]byte(`{"identity":"x","csr":""}`)))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			if limited == 0 {
				firstLimited = i
			}
			limited++
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
		}
	}
	if limited < extra-3 {
		t.Fatalf("%d of %d requests in a burst refused with 429, want about %d (burst %d)", limited, statusport.ExchangeSourceBurst+extra, extra, statusport.ExchangeSourceBurst)
	}
	if firstLimited < statusport.ExchangeSourceBurst-1 {
		t.Errorf("first 429 at request %d, want none within the burst %d", firstLimited, statusport.ExchangeSourceBurst)
	}
}

// The Nomad API hangs on the JWKS read (a socket that never answers): an
// attacker's token with an unknown key id starts that read; another
// client's exchange behind it is answered (503) by the read's deadline,
// not parked behind the verifier's lock for as long as the attacker keeps
// its request open; /health meanwhile is answered at once; Nomad sees one
// JWKS request for both.
func TestHungJWKSReadBlocksNoOtherRequest(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	called := make(chan struct{}, 8)
	stop := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		called <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(stop) })
	nc, err := nomadapi.NewClient(&nomadapi.Config{Address: hung.URL})
	if err != nil {
		t.Fatal(err)
	}
	m, cfg := statusTarget(t, true, nomadglue.JWKS{Client: nc})
	post := func(timeout time.Duration) (int, error) {
		hc := &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
		body, _ := json.Marshal(exchange.Request{Identity: attackToken(t, "unknown"), CSR: "x"})
		resp, err := hc.Post(m.statusURL(m.self)+exchange.Path, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	start := time.Now()
	go func() { _, _ = post(time.Minute) }() // the attacker keeps its request open
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("the exchange never asked Nomad for its keys")
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://" + statusAddr(m) + "/health")
	if err != nil {
		t.Errorf("/health during a hung JWKS read: %v", err)
	} else {
		resp.Body.Close()
	}
	code, err := post(identity.FetchTimeout + 3*time.Second)
	if err != nil {
		t.Fatalf("an exchange behind a hung JWKS read: %v (%s after the read started; its deadline is %s)", err, time.Since(start).Round(time.Millisecond), identity.FetchTimeout)
	}
	if code != http.StatusServiceUnavailable {
		t.Errorf("an exchange while Nomad's keys cannot be read: %d, want 503", code)
	}
	if d := time.Since(start); d > identity.FetchTimeout+2*time.Second {
		t.Errorf("answered %s after the read started, want by its deadline %s", d, identity.FetchTimeout)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Errorf("Nomad saw %d JWKS requests, want 1 (concurrent misses share one read)", calls)
	}
}
