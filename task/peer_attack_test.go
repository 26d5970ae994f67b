package task

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
)

// peerGet asks GET url on a member's peer port presenting kp, without
// checking the server (an attacker does not care who answers): the status
// code, or the error of a handshake or request the member refused.
func peerGet(url string, kp tls.Certificate) (int, error) {
	// Presented whatever CAs the peer port asks for: with Certificates
	// alone Go sends no certificate the server's list does not name, and
	// the refusal would be for no certificate at all.
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil }}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// The peer CA (certs/peer.go), in the attack's own form: an application holding only
// the certificate the exchange gave it (CN billing-api, role limited to
// /billing/) reached /members on the peer port, and from there raft
// itself (POST /raft with a forged MsgApp was committed). Neither that
// certificate nor an `env` root certificate, both from the cluster CA, is
// accepted on the peer port; both still work on the client port.
func TestPeerPortRefusesApplicationAndRootClientCertificates(t *testing.T) {
	k := newKit(t, "a")
	k.cl.TLS.Mode = config.TLSAuto
	k.cl.Access = &config.Access{
		Roles: []config.Role{{Name: "billing", ReadWrite: []string{"/billing/"}}},
		Users: []config.User{{Name: "billing-api", Roles: []string{"billing"}}},
	}
	m := k.member("a", nil)
	k.seed(m)
	ctx := context.Background()
	if _, err := m.reconcileAccess(ctx); err != nil {
		t.Fatalf("reconcile: %v", err)
	}

	// The application's certificate, as the exchange issues it: its own
	// key and request, signed by the cluster CA for the mapped user.
	csr, key, err := certs.NewCSR()
	if err != nil {
		t.Fatal(err)
	}
	appCert, err := certs.SignClientCSR(*m.trust.CA(), csr, "billing-api", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	app, err := tls.X509KeyPair(appCert, key)
	if err != nil {
		t.Fatal(err)
	}
	// The operator's `env` certificate: root, from the cluster CA.
	rootPair, err := certs.IssueClient(*m.trust.CA(), certs.RootUser, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	root, err := tls.X509KeyPair(rootPair.Cert, rootPair.Key)
	if err != nil {
		t.Fatal(err)
	}

	peer := m.peerURL(m.self)
	for name, kp := range map[string]tls.Certificate{"application (exchange)": app, "env root": root} {
		for _, path := range []string{"/members", "/raft/stream/message/1", "/version"} {
			if code, err := peerGet(peer+path, kp); err == nil {
				t.Errorf("%s certificate on the peer port: GET %s answered %d, want the handshake refused", name, path, code)
			}
		}
	}

	// The same certificates on the client port: the application within
	// its role, root as root.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := clientWith(t, m, app).Put(rctx, "/billing/x", "v"); err != nil {
		t.Errorf("the application's certificate on the client port: %v", err)
	}
	if _, err := clientWith(t, m, root).UserList(rctx); err != nil {
		t.Errorf("the root certificate on the client port: %v", err)
	}
}

// A TLS auto cluster of three members forms and replicates with its peers
// on the peer CA; no member's peer port accepts the certificate a member
// serves on its client port (cluster CA), and the members' own clients
// (root, cluster CA) still work on the client ports.
func TestThreeMemberTLSClusterTalksOverThePeerCA(t *testing.T) {
	k := newKit(t, "m0", "m1", "m2")
	k.cl.TLS.Mode = config.TLSAuto
	ms := map[string]*Member{}
	for _, n := range []string{"m0", "m1", "m2"} {
		ms[n] = k.member(n, nil)
	}
	all := k.cl.Provider.Static
	k.prov.Set(all[:1])
	defer runLoop(t, ms["m0"])()
	waitMemberList(t, ms["m0"], 1, 30*time.Second)
	k.prov.Set(all)
	for _, n := range []string{"m1", "m2"} {
		defer runLoop(t, ms[n])()
	}
	waitMemberList(t, ms["m0"], 3, 90*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rootClient(t, ms["m0"]).Put(ctx, "through-peers", "yes"); err != nil {
		t.Fatalf("put on m0: %v", err)
	}
	resp, err := rootClient(t, ms["m2"]).Get(ctx, "through-peers") // linearizable: through the leader
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "yes" {
		t.Fatalf("get on m2: %v %v", resp, err)
	}

	// The member's client-port certificate (cluster CA, server and client
	// use) is not a peer certificate.
	b, err := os.ReadFile(ms["m1"].trust.Files().Cert)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.X509KeyPair(b, b)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := os.ReadFile(ms["m1"].trust.PeerFiles().Cert)
	if err != nil {
		t.Fatal(err)
	}
	peerKP, err := tls.X509KeyPair(pb, pb)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if code, err := peerGet(m.peerURL(m.self)+"/members", kp); err == nil {
			t.Errorf("%s's peer port accepted m1's client-port certificate: %d", m.opts.Name, code)
		}
		// The control: m1's peer certificate is accepted.
		if code, err := peerGet(m.peerURL(m.self)+"/members", peerKP); err != nil || code != 200 {
			t.Errorf("%s's peer port with m1's peer certificate: %d %v", m.opts.Name, code, err)
		}
	}
}

// waitMemberList waits until m's etcd lists n started voters.
func waitMemberList(t *testing.T, m *Member, n int, within time.Duration) {
	t.Helper()
	var last error
	cli := rootClient(t, m)
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := cli.MemberList(ctx)
		cancel()
		if err != nil {
			last = err
			continue
		}
		voters := 0
		for _, mem := range resp.Members {
			if !mem.IsLearner && mem.Name != "" {
				voters++
			}
		}
		if voters == n {
			return
		}
		last = fmt.Errorf("%d started voters of %d members", voters, len(resp.Members))
	}
	t.Fatalf("%s never listed %d started voters: %v (%s)", m.opts.Name, n, last, m.reason())
}

// rootClient is a client on m's client port presenting m's own root
// client certificate (cluster CA), closed with the test.
func rootClient(t *testing.T, m *Member) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.clientURL(m.self)}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), TLS: m.trust.PeerTLS()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
