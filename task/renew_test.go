package task_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/status"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
)

// serial returns the serial of the certificate a TLS server at addr
// presents in a fresh handshake.
func serial(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("handshake with %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func certSerial(t *testing.T, p certs.Pair) string {
	t.Helper()
	c, err := certs.Leaf(p.Cert)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.String()
}

// The premise of renewal without restart, checked on the embedded etcd
// this project ships: etcd reads its certificate and key file at every
// handshake, on its client listener (the same TLSInfo serves its peer
// listener) and for the client certificate of its peer dials; a client
// connected before the file is replaced keeps working, and one that
// connects after gets the new certificate. If an etcd upgrade starts
// caching the pair, this test fails and renewal must restart etcd.
func TestEtcdReloadsKeyPairPerHandshake(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t)
	issue := func() certs.Pair {
		p, err := certs.IssueFor(ca, "s0", []string{"127.0.0.1"}, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := issue()
	files, err := certs.WriteMember(filepath.Join(dir, "tls"), "member", ca.Cert, first)
	if err != nil {
		t.Fatal(err)
	}
	ti := transport.TLSInfo{CertFile: files.Cert, KeyFile: files.Key, TrustedCAFile: files.CA, ClientCertAuth: true}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir, cfg.LogLevel = "s0", filepath.Join(dir, "etcd"), "error"
	ports := clustertest.FreePorts(t, 2)
	peer, _ := url.Parse(fmt.Sprintf("https://127.0.0.1:%d", ports[0]))
	client, _ := url.Parse(fmt.Sprintf("https://127.0.0.1:%d", ports[1]))
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.InitialCluster = "s0=" + peer.String()
	cfg.ClientTLSInfo, cfg.PeerTLSInfo = ti, ti
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready")
	}
	pool, _ := certs.Pool(ca.Cert)
	user, err := certs.IssueClient(ca, "app", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ccfg := tlsConfig(pool, &user)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, TLS: ccfg, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	put := func(c *clientv3.Client, k string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.Put(ctx, k, "v"); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	put(cli, "before")
	// The peer dial's client certificate, as rafthttp gets it.
	pcfg, err := ti.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	peerCert := func() string {
		c, err := pcfg.GetClientCertificate(&tls.CertificateRequestInfo{})
		if err != nil {
			t.Fatal(err)
		}
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return x.SerialNumber.String()
	}
	if got, want := serial(t, client.Host, ccfg), certSerial(t, first); got != want {
		t.Fatalf("client listener presents %s, want the written %s", got, want)
	}
	if got, want := peerCert(), certSerial(t, first); got != want {
		t.Fatalf("peer dial presents %s, want %s", got, want)
	}
	second := issue()
	if err := certs.WritePair(files.Cert, second); err != nil {
		t.Fatal(err)
	}
	if got, want := serial(t, client.Host, ccfg), certSerial(t, second); got != want {
		t.Fatalf("after the file was replaced the client listener presents %s, want the new %s: etcd caches its key pair", got, want)
	}
	if got, want := serial(t, peer.Host, ccfg), certSerial(t, second); got != want {
		t.Fatalf("after the file was replaced the peer listener presents %s, want the new %s", got, want)
	}
	if got, want := peerCert(), certSerial(t, second); got != want {
		t.Fatalf("after the file was replaced the peer dial presents %s, want the new %s", got, want)
	}
	put(cli, "after")
	fresh, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, TLS: tlsConfig(pool, &user), DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	put(fresh, "fresh")

	// The CAs etcd trusts, by contrast, are loaded once at its start: a
	// client of a new CA written beside the old one is still refused.
	// Hence the cross certificate of a CA rotation (certs.CrossSign).
	next := newCA(t)
	if err := certs.WritePair(files.CA, certs.Pair{Cert: append(append([]byte{}, ca.Cert...), next.Cert...)}); err != nil {
		t.Fatal(err)
	}
	stranger, err := certs.IssueClient(next, "app", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := rejected(client.Host, tlsConfig(pool, &stranger)); err == nil {
		t.Fatal("etcd accepted a client of a CA added to its trusted file after it started: it reloads its CAs, and rotations could do without the cross certificate")
	} else {
		t.Logf("client of the CA added after the start: %v", err)
	}
	crossPEM, err := certs.CrossSign(ca, next)
	if err != nil {
		t.Fatal(err)
	}
	if err := rejected(client.Host, tlsConfig(pool, ptr(certs.WithChain(stranger, crossPEM)))); err != nil {
		t.Fatalf("a client of the new CA presenting the cross certificate was refused: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// rejected returns why a TLS server at addr refuses cfg's client
// certificate (nil when it accepts it): with TLS 1.3 the refusal arrives
// after the handshake, at the first read.
func rejected(addr string, cfg *tls.Config) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	_, err = conn.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return nil // no alert: accepted, the server waits for a request
	}
	return err
}

// A running member renews its member certificate (files read per
// handshake) and its root client certificate at two thirds of
// tls.certificate_ttl, with no restart: the etcd process and its member
// id stay, a client writing all along (every put on one connection and on
// fresh connections) sees no error, and /metrics and /status show the new
// expiry.
func TestMemberRenewsCertificatesWhileRunning(t *testing.T) {
	cl, co := localCACluster(t, 1)
	cl.TLS.CertificateTTL = 30 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := newCAMember(ctx, t, cl, co)
	if err != nil {
		t.Fatal(err)
	}
	runUntilEnd(ctx, t, cancel, m)
	ca, err := clusterca.Read(context.Background(), co, cl.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool, _ := certs.Pool(ca.Cert)
	user, err := certs.IssueClient(ca, "app", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	statusPair := statusReaderPair(t, ca)
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig(pool, &statusPair), DisableKeepAlives: true}}
	base := "https://127.0.0.1:" + itoa(cl.Provider.Static[0].StatusPort)
	waitStatus(t, hc, base)
	st0 := readStatus(t, hc, base)
	clientAddr := fmt.Sprintf("127.0.0.1:%d", cl.Provider.Static[0].ClientPort)
	ep := "https://" + clientAddr
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, TLS: tlsConfig(pool, &user), DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	// Writers: one long-lived connection, and one new connection per put.
	var puts, fails atomic.Int64
	var firstErr sync.Once
	var errMsg atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	write := func(fresh bool) {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c := cli
			if fresh {
				var err error
				if c, err = clientv3.New(clientv3.Config{Endpoints: []string{ep}, TLS: tlsConfig(pool, &user), DialTimeout: 3 * time.Second, Logger: zap.NewNop()}); err != nil {
					fails.Add(1)
					continue
				}
			}
			pctx, pcancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err := c.Put(pctx, fmt.Sprintf("w/%v/%d", fresh, i), "v")
			pcancel()
			if fresh {
				c.Close()
			}
			puts.Add(1)
			if err != nil {
				fails.Add(1)
				firstErr.Do(func() { errMsg.Store(err.Error()) })
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wg.Add(2)
	go write(false)
	go write(true)
	defer func() { close(stop); wg.Wait() }()

	start := time.Now()
	seen := map[string]time.Time{serial(t, clientAddr, tlsConfig(pool, &user)): start}
	clustertest.WaitFor(t, 90*time.Second, "two renewals of the member certificate on etcd's client port", func() (bool, string) {
		s := serial(t, clientAddr, tlsConfig(pool, &user))
		if _, ok := seen[s]; !ok {
			seen[s] = time.Now()
			t.Logf("member certificate %s served after %s", s, time.Since(start).Round(time.Millisecond))
		}
		return len(seen) >= 3, fmt.Sprintf("%d serials seen", len(seen))
	})
	if n := fails.Load(); n > 0 {
		t.Fatalf("%d of %d puts failed during renewals; first: %v", n, puts.Load(), errMsg.Load())
	}
	t.Logf("%d puts, none failed, across %d certificates in %s", puts.Load(), len(seen), time.Since(start).Round(time.Millisecond))
	st := readStatus(t, hc, base)
	if st.PID != st0.PID || st.MemberID != st0.MemberID || !st.Running {
		t.Fatalf("member restarted or changed: before %+v, after %+v", st0, st)
	}
	exp, err := time.Parse(time.RFC3339, st.CertExpiry)
	if err != nil || !exp.After(time.Now()) || st.CertName == "" {
		t.Fatalf("status cert_expiry %q (%s) is not a future expiry: %v", st.CertExpiry, st.CertName, err)
	}
	code, body := get(t, hc, base+"/metrics")
	for _, want := range []string{`etcd_nomad_certificate_expiry_timestamp_seconds{certificate="member"`, `certificate="root_client"`, `certificate="ca"`} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}
	if !strings.Contains(body, "etcd_nomad_certificate_expiry_timestamp_seconds") {
		return
	}
	// The root client certificate was renewed too: its expiry is within
	// a ttl of now, not of the start.
	for _, line := range strings.Split(body, "\n") {
		if strings.Contains(line, `certificate="root_client"`) && !strings.HasPrefix(line, "#") {
			var v float64
			fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%g", &v)
			if at := time.Unix(int64(v), 0); at.Before(start.Add(cl.TLS.CertificateTTL)) {
				t.Errorf("root client certificate expires %s, not renewed since the start %s", at, start)
			}
		}
	}
}

func readStatus(t *testing.T, hc *http.Client, base string) status.Member {
	t.Helper()
	code, body := get(t, hc, base+"/status")
	var st status.Member
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("/status: %d %s", code, body)
	}
	return st
}

// A CA that expires within 30 days turns /health into a warning (429,
// Consul's warning) naming it, while the member serves.
func TestHealthWarnsOfAnExpiringCA(t *testing.T) {
	cl, co := localCACluster(t, 1)
	saveCA(t, cl, shortCA(t, 10*24*time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := newCAMember(ctx, t, cl, co)
	if err != nil {
		t.Fatal(err)
	}
	runUntilEnd(ctx, t, cancel, m)
	ca, err := clusterca.Read(context.Background(), co, cl.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool, _ := certs.Pool(ca.Cert)
	statusPair := statusReaderPair(t, ca)
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig(pool, &statusPair)}}
	defer hc.CloseIdleConnections()
	base := "https://127.0.0.1:" + itoa(cl.Provider.Static[0].StatusPort)
	var body string
	clustertest.WaitFor(t, time.Minute, "a 429 warning naming the CA", func() (bool, string) {
		var code int
		code, body = get(t, hc, base+"/health")
		return code == http.StatusTooManyRequests && strings.Contains(body, "certificate ca expires"), fmt.Sprintf("%d %s", code, body)
	})
	st := readStatus(t, hc, base)
	if !st.Healthy || !strings.Contains(st.CertWarning, "certificate ca expires") {
		t.Fatalf("status: healthy %v, cert_warning %q", st.Healthy, st.CertWarning)
	}
}

// shortCA is a CA like certs.NewCA that expires after validity.
func shortCA(t *testing.T, validity time.Duration) certs.Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "short CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(validity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	return certs.Pair{Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Key: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})}
}
