package integration_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/localmode"
)

// certWriter puts keys from two clients until stopped: one connection kept
// all along, and a new connection (a new TLS handshake) for every put.
// Every failed put counts: none is retried.
type certWriter struct {
	puts, fails atomic.Int64
	first       atomic.Value
	stop        chan struct{}
	wg          sync.WaitGroup
}

func startCertWriter(t *testing.T, eps []string, cfg *tls.Config) *certWriter {
	w := &certWriter{stop: make(chan struct{})}
	long, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: cfg, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	run := func(fresh bool) {
		defer w.wg.Done()
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			cli := long
			if fresh {
				var err error
				if cli, err = clientv3.New(clientv3.Config{Endpoints: []string{eps[i%len(eps)]}, TLS: cfg, DialTimeout: 3 * time.Second, Logger: zap.NewNop()}); err != nil {
					w.fail(err)
					continue
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err := cli.Put(ctx, fmt.Sprintf("certs/%v/%06d", fresh, i), "v")
			cancel()
			if fresh {
				cli.Close()
			}
			w.puts.Add(1)
			if err != nil {
				w.fail(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	w.wg.Add(2)
	go run(false)
	go run(true)
	t.Cleanup(func() { w.finish(); long.Close() })
	return w
}

func (w *certWriter) fail(err error) {
	w.fails.Add(1)
	w.first.CompareAndSwap(nil, err.Error())
}

func (w *certWriter) finish() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

func (w *certWriter) check(t *testing.T, during string) {
	t.Helper()
	if n := w.fails.Load(); n > 0 {
		t.Fatalf("%s: %d of %d puts failed; first: %v", during, n, w.puts.Load(), w.first.Load())
	}
	t.Logf("%s: %d puts, none failed", during, w.puts.Load())
}

// served returns the certificate a member's etcd presents in a new
// handshake on addr, verified with roots.
func served(addr string, roots *x509.CertPool) (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// The proof with real member processes: certificates valid for
// 45 s are renewed twice on every member without a restart, then
// `etcd-nomad tls rotate-ca` replaces the cluster CA, all under two
// writing clients (one long connection, one new connection per put) of
// which not one put fails. Afterwards the members serve certificates of
// the new CA, the coordinator holds it, and a restarted member (its etcd
// now trusting the new CA alone) rejoins.
func TestCertificatesRenewAndCARotatesUnderWrites(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	tc := newCluster(t, t.TempDir(), 3, 30*time.Second)
	tc.opts.CertificateTTL = 45 * time.Second
	if err := tc.lay.WriteConfig(tc.opts, tc.ports); err != nil {
		t.Fatal(err)
	}
	tc.startAll()
	tc.waitHealthy(90 * time.Second)
	files, err := tc.lay.ClientCerts(context.Background(), tc.opts.Name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := certs.ClientConfig(files)
	if err != nil {
		t.Fatal(err)
	}
	var eps, addrs []string
	for _, m := range tc.config().Provider.Static {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", m.ClientPort))
		eps = append(eps, "https://"+addrs[len(addrs)-1])
	}
	pids := map[string]int{}
	for i := range tc.ports {
		pids[memberName(i)] = tc.sup.PID(memberName(i))
	}
	w := startCertWriter(t, eps, cfg)

	// Renewals: each member serves three distinct certificates.
	oldCA, _ := certs.Pool(mustRead(t, files.CA))
	start := time.Now()
	seen := make([]map[string]bool, len(addrs))
	for i := range seen {
		seen[i] = map[string]bool{}
	}
	waitFor(t, 3*time.Minute, "every member serving its third certificate", func() (bool, string) {
		done, msg := 0, ""
		for i, a := range addrs {
			c, err := served(a, oldCA)
			if err != nil {
				msg += fmt.Sprintf(" %s: %v", a, err)
				continue
			}
			if s := c.SerialNumber.String(); !seen[i][s] {
				seen[i][s] = true
				t.Logf("%s serves certificate %d (valid until %s) after %s", memberName(i), len(seen[i]), c.NotAfter.Format(time.TimeOnly), time.Since(start).Round(time.Millisecond))
			}
			if len(seen[i]) >= 3 {
				done++
			}
		}
		return done == len(addrs), fmt.Sprintf("%d/%d done%s", done, len(addrs), msg)
	})
	w.check(t, fmt.Sprintf("two renewals on every member (%s)", time.Since(start).Round(time.Second)))

	// CA rotation with the operator's command.
	rotStart := time.Now()
	out, err := exec.Command(binary, "tls", "rotate-ca", "-config", tc.lay.Config(), "-timeout", "4m").CombinedOutput()
	rotTook := time.Since(rotStart)
	t.Logf("tls rotate-ca (%s):\n%s", rotTook.Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("tls rotate-ca: %v", err)
	}
	if !strings.Contains(string(out), "CA rotation done") {
		t.Fatalf("tls rotate-ca did not report the rotation done")
	}
	w.check(t, fmt.Sprintf("CA rotation (%s)", rotTook.Round(time.Second)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	co, err := backends.Coordinator(tc.config())
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := clusterca.Read(ctx, co, tc.opts.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if oldPEM := mustRead(t, files.CA); certs.Fingerprint(newCA.Cert) == certs.Fingerprint(oldPEM) {
		t.Fatal("the coordinator still holds the old CA")
	}
	newPool, _ := certs.Pool(newCA.Cert)
	for i, a := range addrs {
		if _, err := served(a, newPool); err != nil {
			t.Errorf("%s does not serve a certificate of the new CA: %v", memberName(i), err)
		}
		if pid := tc.sup.PID(memberName(i)); pid != pids[memberName(i)] {
			t.Errorf("%s restarted (pid %d, was %d)", memberName(i), pid, pids[memberName(i)])
		}
	}
	st := tc.waitHealthy(30 * time.Second)
	for _, m := range st.Members {
		if m.CA == nil || m.CA.Issuer != certs.Fingerprint(newCA.Cert) || len(m.CA.Trusted) != 1 {
			t.Errorf("%s reports CA %+v, want issuer and sole trusted %s", m.Name, m.CA, certs.Fingerprint(newCA.Cert))
		}
	}

	// A member restarted now loads the new CA alone and rejoins; the
	// others (still holding the old CA loaded) accept it.
	if err := tc.sup.Kill(memberName(1), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "m1 restarted", func() (bool, string) {
		pid := tc.sup.PID(memberName(1))
		return pid != 0 && pid != pids[memberName(1)], fmt.Sprint("pid ", pid)
	})
	tc.waitHealthy(90 * time.Second)
	w.finish()
	t.Logf("after the restart of m1: %d puts, %d failed (a restart may fail puts in flight on it)", w.puts.Load(), w.fails.Load())

	// A second rotation, interrupted in its first phase (the command
	// gives up), with a member restarted in the middle, then resumed.
	out, err = exec.Command(binary, "tls", "rotate-ca", "-config", tc.lay.Config(), "-timeout", "2s").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "run the command again to resume") {
		t.Fatalf("a rotation cut short by -timeout 2s: err %v, output:\n%s", err, out)
	}
	prev := tc.sup.PID(memberName(2))
	if err := tc.sup.Kill(memberName(2), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "m2 restarted", func() (bool, string) {
		pid := tc.sup.PID(memberName(2))
		return pid != 0 && pid != prev, fmt.Sprint("pid ", pid)
	})
	rotStart = time.Now()
	out, err = exec.Command(binary, "tls", "rotate-ca", "-config", tc.lay.Config(), "-timeout", "4m").CombinedOutput()
	t.Logf("tls rotate-ca resumed after m2 restarted (%s):\n%s", time.Since(rotStart).Round(time.Millisecond), out)
	if err != nil || !strings.Contains(string(out), "resuming the CA rotation") || !strings.Contains(string(out), "CA rotation done") {
		t.Fatalf("resumed rotation: %v", err)
	}
	third, err := clusterca.Read(ctx2(t), co, tc.opts.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if certs.Fingerprint(third.Cert) == certs.Fingerprint(newCA.Cert) {
		t.Fatal("the resumed rotation left the CA in place")
	}
	st = tc.waitHealthy(90 * time.Second)
	thirdPool, _ := certs.Pool(third.Cert)
	for i, a := range addrs {
		if _, err := served(a, thirdPool); err != nil {
			t.Errorf("%s does not serve a certificate of the third CA: %v", memberName(i), err)
		}
	}
	for _, m := range st.Members {
		if m.CA == nil || m.CA.Issuer != certs.Fingerprint(third.Cert) || len(m.CA.Trusted) != 1 {
			t.Errorf("%s reports CA %+v after the resumed rotation", m.Name, m.CA)
		}
	}
	// The peer ports followed: each serves a peer certificate of the
	// third CA's peer CA (certs/peer.go), not one of the cluster CA.
	thirdPeer, err := certs.PeerCACert(third)
	if err != nil {
		t.Fatal(err)
	}
	peerPool, _ := certs.Pool(thirdPeer)
	for i, m := range tc.config().Provider.Static {
		addr := fmt.Sprintf("127.0.0.1:%d", m.PeerPort)
		if _, err := served(addr, peerPool); err != nil {
			t.Errorf("%s's peer port does not serve a certificate of the third peer CA: %v", memberName(i), err)
		}
		if _, err := served(addr, thirdPool); err == nil {
			t.Errorf("%s's peer port serves a certificate of the cluster CA", memberName(i))
		}
	}
}

func ctx2(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func memberName(i int) string { return localmode.MemberName(i) }

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
