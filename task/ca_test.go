package task_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/coord/local"
	"github.com/etcd-nomad/etcd-nomad/localmode"
	"github.com/etcd-nomad/etcd-nomad/provider/static"
	"github.com/etcd-nomad/etcd-nomad/status"
	"github.com/etcd-nomad/etcd-nomad/task"
)

// The cluster CA is never replaced (docs/design.md, the safety
// invariants' table). It could be replaced after the coordinator lost
// its state. These tests run task.New (which settles the member's CA)
// against a real local coordinator, and a real embedded etcd member where
// /status and /health are read.

// caCluster is a TLS auto cluster of n static members on 127.0.0.1 with
// its data and local coordinator under dir.
func caCluster(t *testing.T, dir string, n int) *config.Cluster {
	t.Helper()
	ports, err := localmode.AllocatePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	cl := &config.Cluster{
		Name: "unit", Size: n, DataDir: filepath.Join(dir, "data"),
		Etcd: config.Etcd{QuotaBackendBytes: config.DefaultQuotaBackendBytes, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h",
			HeartbeatInterval: 50 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond, SnapshotCount: 10000},
		TLS:          config.TLS{Mode: config.TLSAuto},
		Provider:     config.Provider{Kind: config.ProviderStatic, StaleAfter: time.Second},
		Coordination: config.Coordination{Kind: config.CoordLocal, Dir: filepath.Join(dir, "coord")},
	}
	for i, p := range ports {
		cl.Provider.Static = append(cl.Provider.Static, config.StaticMember{Name: localmode.MemberName(i), Address: "127.0.0.1", ClientPort: p.Client, PeerPort: p.Peer, StatusPort: p.Status})
	}
	return cl
}

func newCAMember(ctx context.Context, t *testing.T, cl *config.Cluster, co coord.Coordinator) (*task.Member, error) {
	return task.New(ctx, caOptions(t, cl, co, nil))
}

// caOptions are the options of member m0 of cl, sealing the cluster CA
// with kek when given.
func caOptions(t *testing.T, cl *config.Cluster, co coord.Coordinator, kek []byte) task.Options {
	return task.Options{Cluster: cl, Name: "m0", Provider: static.New(cl.Provider.Static), Coordinator: co, CAKEK: kek,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: testWriter{t}}), LoopInterval: 200 * time.Millisecond, StopTimeout: 5 * time.Second, EtcdLogLevel: "error"}
}

// localCACluster is caCluster with its local coordinator.
func localCACluster(t *testing.T, n int) (*config.Cluster, *local.Coordinator) {
	t.Helper()
	cl := caCluster(t, t.TempDir(), n)
	co, err := local.New(cl.Coordination.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return cl, co
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func savedCAPath(cl *config.Cluster) string {
	return filepath.Join(cl.DataDir, "m0", "tls", "ca.bundle")
}

func saveCA(t *testing.T, cl *config.Cluster, ca certs.Pair) {
	t.Helper()
	p := savedCAPath(cl)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, ca.Bundle(), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newCA(t *testing.T) certs.Pair {
	t.Helper()
	ca, err := certs.NewCA("unit", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func storedCA(t *testing.T, cl *config.Cluster) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cl.Coordination.Dir, "kv-ca"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verifiesWith reports whether the member certificate in the member's tls
// dir was issued by ca.
func verifiesWith(t *testing.T, cl *config.Cluster, ca certs.Pair) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cl.DataDir, "m0", "tls", "member.pem"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool, _ := certs.Pool(ca.Cert)
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

// A member with a saved CA that finds another in the coordinator keeps its
// own (file untouched, certificates from it), leaves the coordinator's in
// place, and reports both fingerprints on /status and /health while it
// runs and stays healthy.
func TestDefect6SavedCANotReplacedByTheCoordinators(t *testing.T) {
	dir := t.TempDir()
	cl := caCluster(t, dir, 1)
	co, err := local.New(cl.Coordination.Dir)
	if err != nil {
		t.Fatal(err)
	}
	mine, other := newCA(t), newCA(t)
	saveCA(t, cl, mine)
	if _, err := co.LoadOrStore(context.Background(), "ca", other.Bundle()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := newCAMember(ctx, t, cl, co)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(savedCAPath(cl)); !bytes.Equal(b, mine.Bundle()) {
		t.Fatal("the saved ca.bundle was overwritten")
	}
	if !verifiesWith(t, cl, mine) {
		t.Fatal("the member certificate is not issued by the saved CA")
	}
	if !bytes.Equal(storedCA(t, cl), other.Bundle()) {
		t.Fatal("the coordinator's CA was replaced")
	}

	runUntilEnd(ctx, t, cancel, m)
	pool, _ := certs.Pool(mine.Cert)
	pair := statusReaderPair(t, mine)
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig(pool, &pair)}}
	defer hc.CloseIdleConnections()
	base := "https://127.0.0.1:" + itoa(cl.Provider.Static[0].StatusPort)
	want := status.CAMismatch{Member: certs.Fingerprint(mine.Cert), Coordinator: certs.Fingerprint(other.Cert)}
	var code int
	var body string
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body = get(t, hc, base+"/health")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health never passed; last %d %q", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, s := range []string{"ca_mismatch", want.Member, want.Coordinator} {
		if !strings.Contains(body, s) {
			t.Errorf("/health body %q lacks %q", body, s)
		}
	}
	code, body = get(t, hc, base+"/status")
	var st status.Member
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("/status: %d %s", code, body)
	}
	if st.CAMismatch == nil || *st.CAMismatch != want || !strings.Contains(body, `"ca_mismatch"`) {
		t.Fatalf("/status ca_mismatch = %+v, want %+v (%s)", st.CAMismatch, want, body)
	}
}

// A member with a saved CA that finds none in the coordinator stores its
// saved one again (create-only).
func TestDefect6SavedCAIsStoredAgain(t *testing.T) {
	cl, co := localCACluster(t, 1)
	mine := newCA(t)
	saveCA(t, cl, mine)
	if _, err := newCAMember(context.Background(), t, cl, co); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(storedCA(t, cl), mine.Bundle()) {
		t.Fatal("the saved CA was not stored again in the coordinator")
	}
}

// A fresh member (no saved CA) that finds no CA but a cluster record does
// not create a CA the cluster's members would not trust: it waits, then
// fails saying so.
func TestDefect6FreshMemberNoCAWhereAClusterIsRecorded(t *testing.T) {
	cl, co := localCACluster(t, 1)
	bg := context.Background()
	l, err := co.Lock(bg, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := co.CreateRecord(bg, l, coord.Record{Token: "t", Epoch: 1, Seeder: "m1", ClusterID: 7}); err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock(bg)
	ctx, cancel := context.WithTimeout(bg, 3*time.Second)
	defer cancel()
	_, err = newCAMember(ctx, t, cl, co)
	if !errors.Is(err, clusterca.ErrNoClusterCA) || !strings.Contains(err.Error(), "cluster record") {
		t.Fatalf("New: %v, want ErrNoClusterCA naming the record", err)
	}
	if b := storedCA(t, cl); b != nil {
		t.Fatal("a fresh member stored a new CA although a cluster is recorded")
	}
	if _, err := os.Stat(savedCAPath(cl)); err == nil {
		t.Fatal("a fresh member saved a CA although a cluster is recorded")
	}

	// Once a member stores the cluster's CA, the fresh one takes it.
	ca := newCA(t)
	if _, err := co.LoadOrStore(bg, "ca", ca.Bundle()); err != nil {
		t.Fatal(err)
	}
	if _, err := newCAMember(bg, t, cl, co); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(savedCAPath(cl)); !bytes.Equal(b, ca.Bundle()) || !verifiesWith(t, cl, ca) {
		t.Fatal("the fresh member did not take the coordinator's CA")
	}
}

// A fresh member that finds neither CA nor record, while another instance
// listens on its status port (a running member: members listen only once
// they have their CA), waits rather than create one; with no other
// instance listening it creates the cluster CA.
func TestDefect6FreshMemberNoCAWhileAPeerListens(t *testing.T) {
	cl, co := localCACluster(t, 2)
	peer := cl.Provider.Static[1]
	ln, err := net.Listen("tcp", net.JoinHostPort(peer.Address, itoa(peer.StatusPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = newCAMember(ctx, t, cl, co)
	if !errors.Is(err, clusterca.ErrNoClusterCA) || !strings.Contains(err.Error(), "m1 is listening") {
		t.Fatalf("New: %v, want ErrNoClusterCA naming m1", err)
	}
	if b := storedCA(t, cl); b != nil {
		t.Fatal("a fresh member stored a new CA while a peer runs")
	}
	ln.Close()
	if _, err := newCAMember(context.Background(), t, cl, co); err != nil {
		t.Fatal(err)
	}
	b := storedCA(t, cl)
	saved, _ := os.ReadFile(savedCAPath(cl))
	if b == nil || !bytes.Equal(b, saved) {
		t.Fatal("with no cluster anywhere, the first member did not create and save the cluster CA")
	}
}
