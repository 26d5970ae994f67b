package integration_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// The cluster CA is never replaced (docs/design.md, the safety
// invariants' table). It could be replaced after the coordinator lost
// its state, and restarted members adopted the new one (overwriting their
// saved ca.bundle) and were no longer trusted by their peers.

func (tc *testCluster) storedCA() []byte {
	b, _ := os.ReadFile(filepath.Join(tc.lay.CoordDir(), "kv-ca"))
	return b
}

func (tc *testCluster) savedCA(name string) []byte {
	b, _ := os.ReadFile(filepath.Join(tc.lay.DataDir(), name, "tls", "ca.bundle"))
	return b
}

// A member restarted while the coordinator holds another CA than the one
// it saved keeps its own, rejoins its peers (who trust it), and reports
// the mismatch with both fingerprints: log, /status and /health.
func TestDefect6MemberKeepsItsSavedCA(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	t.Parallel() // its own directory and ports: see harness_test.go
	tc := newCluster(t, t.TempDir(), 3, 5*time.Second)
	tc.startAll()
	tc.waitHealthy(60 * time.Second)
	clusterCA := tc.storedCA()
	ca, err := certs.ParseBundle(clusterCA)
	if err != nil {
		t.Fatal(err)
	}
	saved := tc.savedCA("m1")
	if !bytes.Equal(saved, clusterCA) {
		t.Fatal("m1 did not save the cluster CA")
	}
	if err := tc.sup.Stop("m1", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// Another CA in the coordinator, as a member or client created it in
	// the moment the coordinator had lost its state.
	other, err := certs.NewCA("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tc.lay.CoordDir(), "kv-ca"), other.Bundle(), 0o600); err != nil {
		t.Fatal(err)
	}
	logStart := len(logOf(t, tc.lay, "m1"))
	if err := tc.sup.Start("m1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "m1 past its TLS setup", func() (bool, string) {
		l := logOf(t, tc.lay, "m1")[logStart:]
		return strings.Contains(l, "supervising member"), l
	})
	if !bytes.Equal(tc.savedCA("m1"), saved) {
		t.Fatal("m1 overwrote its saved ca.bundle with the coordinator's CA")
	}
	if !bytes.Equal(tc.storedCA(), other.Bundle()) {
		t.Fatal("the coordinator's CA was replaced")
	}

	want := fmt.Sprintf("%s %s", certs.Fingerprint(ca.Cert), certs.Fingerprint(other.Cert))
	waitFor(t, 90*time.Second, "m1 healthy, reporting the CA mismatch", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		bc, err := backends.OpenClient(tc.config())
		if err != nil {
			return false, err.Error()
		}
		bc.CA = &ca
		st, err := status.Gather(ctx, bc)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range st.Members {
			if !m.Healthy {
				return false, status.Format(st)
			}
		}
		mm := st.Members[1].CAMismatch
		return mm != nil && mm.Member+" "+mm.Coordinator == want, status.Format(st)
	})

	pool, _ := certs.Pool(ca.Cert)
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsClient(pool)}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/health", tc.ports[1].Status))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "ca_mismatch") || !strings.Contains(string(body), certs.Fingerprint(other.Cert)) {
		t.Fatalf("/health of m1: %d %q, want 200 naming the mismatch", resp.StatusCode, body)
	}
	l := logOf(t, tc.lay, "m1")[logStart:]
	if !strings.Contains(l, "member_ca="+certs.Fingerprint(ca.Cert)) || !strings.Contains(l, "coordinator_ca="+certs.Fingerprint(other.Cert)) {
		t.Fatalf("m1's log does not name both CAs:\n%s", l)
	}
	t.Logf("/health: %s", strings.TrimSpace(string(body)))
}

// A member whose data dir was wiped, started after the coordinator lost
// its state while its peers still run (but have not yet stored the CA
// again: they are paused), does not create a CA: it waits until they store
// the cluster's, then joins with it.
func TestDefect6FreshMemberWaitsForTheClusterCA(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	t.Parallel() // its own directory and ports: see harness_test.go
	tc := newCluster(t, t.TempDir(), 3, 5*time.Second)
	tc.startAll()
	tc.waitHealthy(60 * time.Second)
	cli := tc.client()
	putKeys(t, cli, "k", 50)
	clusterCA := tc.storedCA()
	rec := tc.record()

	if err := tc.sup.Stop("m1", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(tc.lay.DataDir(), "m1")); err != nil {
		t.Fatal(err)
	}
	// Paused peers still listen (the kernel accepts connections) but do
	// not run their loop, so they cannot store the CA again yet.
	paused := []string{"m0", "m2"}
	resume := func() {
		for _, n := range paused {
			_ = tc.sup.Kill(n, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	for _, n := range paused {
		if err := tc.sup.Kill(n, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"record.json", "kv-ca"} {
		if err := os.Remove(filepath.Join(tc.lay.CoordDir(), f)); err != nil {
			t.Fatal(err)
		}
	}
	logStart := len(logOf(t, tc.lay, "m1"))
	if err := tc.sup.Start("m1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "m1 waiting for the cluster CA (or storing one)", func() (bool, string) {
		l := logOf(t, tc.lay, "m1")[logStart:]
		return tc.storedCA() != nil || strings.Contains(l, "waiting for a member that holds it"), l
	})
	if b := tc.storedCA(); b != nil {
		t.Fatalf("m1 stored a new cluster CA while its peers run (same as before: %v)", bytes.Equal(b, clusterCA))
	}
	resume()
	waitFor(t, 60*time.Second, "the cluster's CA stored again and taken by m1", func() (bool, string) {
		got := tc.storedCA()
		return bytes.Equal(got, clusterCA) && bytes.Equal(tc.savedCA("m1"), clusterCA),
			fmt.Sprintf("stored is the cluster's: %v, m1 saved it: %v", bytes.Equal(got, clusterCA), bytes.Equal(tc.savedCA("m1"), clusterCA))
	})
	st := tc.waitHealthy(120 * time.Second)
	if st.ClusterID != fmt.Sprintf("%x", rec.ClusterID) {
		t.Fatalf("cluster id %s, want %x", st.ClusterID, rec.ClusterID)
	}
	checkKeys(t, cli, "k", 50)
}

func tlsClient(pool *x509.CertPool) *tls.Config {
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}
