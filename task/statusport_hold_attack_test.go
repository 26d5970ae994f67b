package task

// Taken over from the security review of the status port limits
// (d49c35e..76a66f8), TestAttackKeepAliveConnectionsHoldTheStatusPortCap
// and TestAttackJunkFloodLocksWorkloadsOutOfTheExchange, and inverted: they
// pass while the attacks fail. Sources are addresses of 127.0.0.0/8, all
// the loopback's on Linux: the attacker's and the legitimate clients'.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/exchange"
	"github.com/etcd-nomad/etcd-nomad/identity"
	"github.com/etcd-nomad/etcd-nomad/task/statusport"
)

// fromSource returns a dialer whose connections come from the address ip.
func fromSource(ip string) *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
}

func clientFrom(ip string, cfg *tls.Config, timeout time.Duration) *http.Client {
	d := fromSource(ip)
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: cfg,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		}}}
}

// keptAlive is an attacker's keep-alive connection: one cheap request
// (GET /nope, 404) now and one each time it is refreshed.
type keptAlive struct {
	c *tls.Conn
	r *bufio.Reader
}

func (h keptAlive) ask() error {
	_ = h.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(h.c, "GET /nope HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(h.r, nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// holdConnections opens n keep-alive connections from source, each
// answered once, and refreshes them every 4 s (well within the idle
// timeout) until the test ends. It returns how many were answered.
func holdConnections(t *testing.T, m *Member, cfg *tls.Config, source string, n int) int {
	t.Helper()
	var held []keptAlive
	for range n {
		c, err := tls.DialWithDialer(fromSource(source), "tcp", statusAddr(m), cfg)
		if err != nil {
			continue // the member closed it: over the source's cap
		}
		h := keptAlive{c, bufio.NewReader(c)}
		if h.ask() != nil {
			c.Close()
			continue
		}
		held = append(held, h)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(4 * time.Second):
			}
			for _, h := range held {
				_ = h.ask()
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
		for _, h := range held {
			h.c.Close()
		}
	})
	return len(held)
}

// healthWithin asks /health from source and fails the test unless it is
// answered within d.
func healthWithin(t *testing.T, m *Member, cfg *tls.Config, source string, d time.Duration, what string) {
	t.Helper()
	hc := clientFrom(source, cfg, d)
	defer hc.CloseIdleConnections()
	start := time.Now()
	resp, err := hc.Get("https://" + statusAddr(m) + "/health")
	if err != nil {
		t.Fatalf("/health from %s got no answer in %s while %s: %v", source, time.Since(start).Round(time.Millisecond), what, err)
	}
	resp.Body.Close()
	t.Logf("/health from %s: %s after %s while %s", source, resp.Status, time.Since(start).Round(time.Millisecond), what)
}

// One peer opens statusport.MaxConns keep-alive connections and sends one
// request on each every few seconds: it holds statusport.MaxConnsPerSource of
// them, the member closes the rest at once, and the Consul check's
// /health from another address is answered at once. On the reviewed
// commit it held the whole cap and /health starved for as long as the
// attack lasted.
func TestStatusPortServesHealthBesideHeldConnections(t *testing.T) {
	m, cfg := statusTarget(t, false, someKeys(t))
	held := holdConnections(t, m, cfg, "127.0.0.1", statusport.MaxConns)
	if held > statusport.MaxConnsPerSource {
		t.Errorf("one source holds %d keep-alive connections, want at most %d", held, statusport.MaxConnsPerSource)
	}
	time.Sleep(time.Second)
	healthWithin(t, m, cfg, "127.0.0.2", statusport.HeaderTimeout, fmt.Sprintf("127.0.0.1 held %d keep-alive connections", held))
}

// Peers at statusport.MaxConns/statusport.MaxConnsPerSource addresses together hold
// the whole connection cap with keep-alive connections refreshed before
// the idle timeout: a new connection makes the member close the one idle
// longest, so /health from yet another address is answered at once, not
// after the idle timeout.
func TestStatusPortClosesAnIdleConnectionForANewOneAtTheCap(t *testing.T) {
	m, cfg := statusTarget(t, false, someKeys(t))
	held := 0
	for i := range statusport.MaxConns / statusport.MaxConnsPerSource {
		held += holdConnections(t, m, cfg, fmt.Sprintf("127.0.0.%d", 10+i), statusport.MaxConnsPerSource)
	}
	if held < statusport.MaxConns {
		t.Fatalf("the peers hold %d connections, the cap is %d: the test does not fill it", held, statusport.MaxConns)
	}
	time.Sleep(time.Second)
	healthWithin(t, m, cfg, "127.0.0.2", statusport.HeaderTimeout, fmt.Sprintf("%d peers held %d keep-alive connections", statusport.MaxConns/statusport.MaxConnsPerSource, held))
}

// One unauthenticated peer floods the exchange with junk POSTs on four
// keep-alive connections, as fast as the 429s come back; a workload on
// another Nomad client (another source), retrying as creds does, gets its
// certificates: the flood spends its source's bucket, and only the
// requests that bucket lets through are charged to the global one. On the
// reviewed commit one global bucket, charged first, refused the workload
// nearly every time.
func TestExchangeServesAWorkloadBesideAnotherSourcesFlood(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	enc := base64.RawURLEncoding
	doc, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kid": "k", "kty": "RSA",
		"n": enc.EncodeToString(key.N.Bytes()), "e": enc.EncodeToString(big.NewInt(int64(key.E)).Bytes())}}})
	m, cfg := statusTarget(t, true, testKeys(doc))
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, identity.Claims{Namespace: "default", Job: "billing", Task: "app",
		RegisteredClaims: jwt.RegisteredClaims{Audience: jwt.ClaimStrings{identity.Audience}, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
	tok.Header["kid"] = "k"
	good, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	url := m.statusURL(m.self) + exchange.Path
	legit := func() int {
		csr, _, err := certs.NewCSR()
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(exchange.Request{Identity: good, CSR: string(csr)})
		hc := clientFrom("127.0.0.2", cfg, 5*time.Second)
		defer hc.CloseIdleConnections()
		resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := legit(); c != http.StatusOK {
		t.Fatalf("control: a valid identity without a flood got %d, want 200", c)
	}

	stop := make(chan struct{})
	var sent, refused atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := clientFrom("127.0.0.1", cfg, 5*time.Second)
			defer hc.CloseIdleConnections()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := hc.Post(url, "application/json", bytes.NewReader([]byte(`{}`)))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests {
						refused.Add(1)
					}
				}
				sent.Add(1)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(time.Second) // the flood's source has spent its burst

	ok := 0
	start := time.Now()
	for range 20 {
		if legit() == http.StatusOK {
			ok++
		}
		time.Sleep(300 * time.Millisecond)
	}
	rate := float64(sent.Load()) / time.Since(start).Seconds()
	t.Logf("the workload got %d of 20 certificates under about %.0f junk requests/s from another source (%d of them refused 429)", ok, rate, refused.Load())
	if ok < 18 {
		t.Fatalf("the workload got %d of 20 certificates under a flood from another source: locked out", ok)
	}
}
