package task_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/status"
	"github.com/etcd-nomad/etcd-nomad/task"
	"github.com/etcd-nomad/etcd-nomad/task/trust"
)

// docs/security.md's threat model, a Consul key writer: it plants a CA rotation or a plaintext CA.
// The attacker of these tests has key write on the coordinator (Consul KV,
// here the local coordinator's directory) and key read: it reads the
// cluster CA's certificate and its sealed blob, never the KEK or the CA's
// key.

// plantRotation stores r as the CA rotation record, as a coordinator
// writer does (replacing any record).
func plantRotation(t *testing.T, co coord.Coordinator, r trust.Rotation) {
	t.Helper()
	bg := context.Background()
	if r.Started.IsZero() {
		r.Started, r.Changed = time.Now(), time.Now()
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := co.Delete(bg, "ca-rotation"); err != nil {
		t.Fatal(err)
	}
	if _, err := co.LoadOrStore(bg, "ca-rotation", b); err != nil {
		t.Fatal(err)
	}
}

// clusterCACert is the cluster CA certificate as key read sees it: in
// the sealed blob (or the local coordinator's plaintext bundle).
func clusterCACert(t *testing.T, co coord.Coordinator) []byte {
	t.Helper()
	bg := context.Background()
	if b, err := co.Load(bg, clusterca.SealedKey); err == nil {
		c, err := certs.SealedCert(b)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	b, err := co.Load(bg, clusterca.PlainKey)
	if err != nil {
		t.Fatal(err)
	}
	p, err := certs.ParseBundle(b)
	if err != nil {
		t.Fatal(err)
	}
	return p.Cert
}

// selfCross is the cross certificate an attacker can make: its CA
// certified by its own key (it has no other).
func selfCross(t *testing.T, signer certs.Pair, subject []byte) []byte {
	t.Helper()
	c, err := certs.CrossSign(signer, certs.Pair{Cert: subject})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// trustedFile is the member's tls/ca.crt: what etcd trusts at its next
// start.
func trustedFile(t *testing.T, cl *config.Cluster) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cl.DataDir, "m0", "tls", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runMemberUntil runs m in the background; the returned function stops it
// and waits.
func runMemberUntil(t *testing.T, m *task.Member, ctx context.Context, cancel context.CancelFunc) func() {
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("member did not stop within 15s")
		}
	}
	t.Cleanup(stop)
	return stop
}

// putAs puts a key on m0's client port with the client certificate p,
// trusting the cluster CA.
func putAs(cl *config.Cluster, caCert []byte, p certs.Pair) error {
	pool, _ := certs.Pool(caCert)
	kp, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		return err
	}
	tc := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://127.0.0.1:" + itoa(cl.Provider.Static[0].ClientPort)}, TLS: tc, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, "issue29", "v")
	return err
}

// rotationStatus is what /status reports of the CAs, read as raw JSON
// (the refusal field is named "refused").
type rotationStatus struct {
	CA *struct {
		Issuer  string   `json:"issuer"`
		Trusted []string `json:"trusted"`
		Refused string   `json:"refused"`
	} `json:"ca"`
}

// A writer of the coordinator without the KEK plants a rotation record:
// phase trust, the cluster CA's public certificate as the old CA, its own
// CA in the clear as the new one, and a cross certificate it made itself.
// A member with a KEK refuses it: its trusted CAs do not change (not in
// ca.crt, not on /status), /status and the Consul check (/health, 429
// warning) name the refusal, and after a restart etcd's client port still
// refuses a CN=root certificate minted by the attacker's CA. On 6d70c97
// the member trusted the attacker's CA and, restarted, etcd accepted that
// root certificate.
func TestPlantedPlaintextCARotationIsRefused(t *testing.T) {
	cl, co := localCACluster(t, 1)
	bg := context.Background()
	kek := bytes.Repeat([]byte{7}, certs.KEKSize)
	ctx, cancel := context.WithCancel(bg)
	m, err := task.New(ctx, caOptions(t, cl, co, kek))
	if err != nil {
		t.Fatal(err)
	}
	stop := runMemberUntil(t, m, ctx, cancel)
	caCert := clusterCACert(t, co)
	ca, err := clusterca.Read(bg, co, cl.Name, kek) // the test's, not the attacker's
	if err != nil {
		t.Fatal(err)
	}
	stTLS, _, err := backends.StatusTLS(bg, cl, co)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: stTLS}}
	defer hc.CloseIdleConnections()
	base := "https://127.0.0.1:" + itoa(cl.Provider.Static[0].StatusPort)
	waitStatus(t, hc, base)

	evil := newCA(t)
	evilFP := certs.Fingerprint(evil.Cert)
	cross := selfCross(t, evil, evil.Cert)
	plantRotation(t, co, trust.Rotation{Phase: trust.PhaseTrust, OldCert: caCert, New: evil.Bundle(), Cross: cross, Chain: cross})

	var st rotationStatus
	var body string
	clustertest.WaitFor(t, 30*time.Second, "the member to refuse the planted rotation (or to trust the attacker's CA)", func() (bool, string) {
		var code int
		code, body = get(t, hc, base+"/status")
		st = rotationStatus{}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || st.CA == nil {
			return false, fmt.Sprintf("/status %d %s", code, body)
		}
		for _, fp := range st.CA.Trusted {
			if fp == evilFP {
				return true, ""
			}
		}
		return st.CA.Refused != "", body
	})
	for _, fp := range st.CA.Trusted {
		if fp == evilFP {
			t.Errorf("the member trusts the attacker's CA %s: /status %s", evilFP, body)
		}
	}
	if bytes.Contains(trustedFile(t, cl), evil.Cert) {
		t.Error("the attacker's CA is in the member's ca.crt: etcd trusts it at its next start")
	}
	if !strings.Contains(st.CA.Refused, "ca-rotation") {
		t.Errorf("/status does not name the refused rotation record: %q", st.CA.Refused)
	}
	if code, hb := get(t, hc, base+"/health"); code != http.StatusTooManyRequests || !strings.Contains(hb, "ca_rotation_refused") {
		t.Errorf("/health (the Consul check) = %d %q, want a 429 warning naming ca_rotation_refused", code, hb)
	}
	if sealed, err := co.Load(bg, clusterca.SealedKey); err != nil || !bytes.Equal(mustSealedCert(t, sealed), caCert) {
		t.Errorf("the coordinator's sealed CA changed: %v", err)
	}

	// Restarted, etcd loads ca.crt: the attacker's root certificate is
	// refused, the cluster CA's accepted.
	stop()
	ctx2, cancel2 := context.WithCancel(bg)
	m2, err := task.New(ctx2, caOptions(t, cl, co, kek))
	if err != nil {
		t.Fatal(err)
	}
	runMemberUntil(t, m2, ctx2, cancel2)
	// /health stays a 429 warning while the record is there.
	clustertest.WaitFor(t, time.Minute, "the restarted member healthy on /status", func() (bool, string) {
		code, body := get(t, hc, base+"/status")
		var h struct{ Healthy bool }
		return code == http.StatusOK && json.Unmarshal([]byte(body), &h) == nil && h.Healthy, body
	})
	good, err := certs.IssueClient(ca, certs.RootUser, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, 30*time.Second, "a put with the cluster CA's root certificate", func() (bool, string) {
		err := putAs(cl, caCert, good)
		return err == nil, fmt.Sprint(err)
	})
	bad, err := certs.IssueClient(evil, certs.RootUser, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := putAs(cl, caCert, bad); err == nil {
		t.Fatal("etcd's client port accepted CN=root minted by the attacker's CA")
	}
}

func mustSealedCert(t *testing.T, b []byte) []byte {
	t.Helper()
	c, err := certs.SealedCert(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Records whose new CA is not certified by the member's current CA are
// refused, whoever wrote them: a writer who somehow has a blob sealed with
// the KEK (or the local coordinator, whose CA is in the clear), with a
// cross certificate of its own making; and one that passes the cluster's
// own sealed CA as the new CA and its CA as the old one (the member
// already issues from the "new" CA: the record would only add the old
// one to its trust). The member restarts with each record planted (it
// follows the record at start) and its ca.crt, its member certificate and
// its saved CA stay the cluster CA's. Red on 6d70c97 for each.
func TestCARotationNotCertifiedByTheCurrentCAIsRefused(t *testing.T) {
	kek := bytes.Repeat([]byte{9}, certs.KEKSize)
	cases := []struct {
		name   string
		kek    []byte
		record func(t *testing.T, co coord.Coordinator, caCert []byte, evil certs.Pair) trust.Rotation
	}{
		{"sealed new CA, the attacker's cross certificate", kek, func(t *testing.T, co coord.Coordinator, caCert []byte, evil certs.Pair) trust.Rotation {
			sealed, err := certs.Seal(evil, kek)
			if err != nil {
				t.Fatal(err)
			}
			cross := selfCross(t, evil, evil.Cert)
			return trust.Rotation{Phase: trust.PhaseIssue, OldCert: caCert, New: sealed, Cross: cross, Chain: cross}
		}},
		{"the cluster's sealed CA as the new one, the attacker's as the old one", kek, func(t *testing.T, co coord.Coordinator, caCert []byte, evil certs.Pair) trust.Rotation {
			sealed, err := co.Load(context.Background(), clusterca.SealedKey)
			if err != nil {
				t.Fatal(err)
			}
			cross := selfCross(t, evil, caCert)
			return trust.Rotation{Phase: trust.PhaseTrust, OldCert: evil.Cert, New: sealed, Cross: cross, Chain: cross}
		}},
		{"local coordinator without a KEK, the attacker's cross certificate", nil, func(t *testing.T, co coord.Coordinator, caCert []byte, evil certs.Pair) trust.Rotation {
			cross := selfCross(t, evil, evil.Cert)
			return trust.Rotation{Phase: trust.PhaseIssue, OldCert: caCert, New: evil.Bundle(), Cross: cross, Chain: cross}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl, co := localCACluster(t, 1)
			bg := context.Background()
			if _, err := task.New(bg, caOptions(t, cl, co, tc.kek)); err != nil {
				t.Fatal(err)
			}
			ca, err := clusterca.Read(bg, co, cl.Name, tc.kek)
			if err != nil {
				t.Fatal(err)
			}
			evil := newCA(t)
			plantRotation(t, co, tc.record(t, co, ca.Cert, evil))
			if _, err := task.New(bg, caOptions(t, cl, co, tc.kek)); err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(trustedFile(t, cl), evil.Cert) {
				t.Error("the attacker's CA is in the member's ca.crt: etcd trusts it at its next start")
			}
			if !verifiesWith(t, cl, ca) {
				t.Error("the member's certificate is no longer issued by the cluster CA")
			}
			if b, _ := os.ReadFile(savedCAPath(cl)); !bytes.Equal(b, ca.Bundle()) {
				t.Error("the member's saved CA (tls/ca.bundle) was replaced")
			}
		})
	}
}

// A legitimate rotation record (new CA sealed with the KEK, cross
// certificate made with the current CA's key, as `tls rotate-ca` writes
// it) is still followed: the member trusts the new CA, and at phase issue
// issues from it.
func TestCARotationCertifiedByTheCurrentCAIsFollowed(t *testing.T) {
	cl, co := localCACluster(t, 1)
	bg := context.Background()
	kek := bytes.Repeat([]byte{5}, certs.KEKSize)
	if _, err := task.New(bg, caOptions(t, cl, co, kek)); err != nil {
		t.Fatal(err)
	}
	ca, err := clusterca.Read(bg, co, cl.Name, kek)
	if err != nil {
		t.Fatal(err)
	}
	next := newCA(t)
	sealed, err := certs.Seal(next, kek)
	if err != nil {
		t.Fatal(err)
	}
	cross, err := certs.CrossSign(ca, next)
	if err != nil {
		t.Fatal(err)
	}
	r := trust.Rotation{Phase: trust.PhaseTrust, OldCert: ca.Cert, New: sealed, Cross: cross, Chain: cross}
	plantRotation(t, co, r)
	if _, err := task.New(bg, caOptions(t, cl, co, kek)); err != nil {
		t.Fatal(err)
	}
	if tr := trustedFile(t, cl); !bytes.Contains(tr, next.Cert) || !bytes.Contains(tr, ca.Cert) {
		t.Fatal("phase trust: the member does not trust both CAs")
	}
	r.Phase = trust.PhaseIssue
	plantRotation(t, co, r)
	if _, err := task.New(bg, caOptions(t, cl, co, kek)); err != nil {
		t.Fatal(err)
	}
	if !verifiesWith(t, cl, next) {
		t.Fatal("phase issue: the member's certificate is not issued by the new CA")
	}
	// Restarted mid-rotation, issuing from the new CA: it still follows
	// (the old CA is one it trusts already).
	if _, err := task.New(bg, caOptions(t, cl, co, kek)); err != nil {
		t.Fatal(err)
	}
	if tr := trustedFile(t, cl); !bytes.Contains(tr, next.Cert) || !bytes.Contains(tr, ca.Cert) || !verifiesWith(t, cl, next) {
		t.Fatal("restarted at phase issue: the member does not trust both CAs or issue from the new one")
	}
}

// `tls rotate-ca` resumes the record the coordinator holds: a planted one
// (plaintext new CA with a KEK, or a cross certificate the cluster CA did
// not sign) is refused before anything, naming the record, and the cluster
// CA stays. On 6d70c97 the command waited for the members to follow it and
// would then have stored the attacker's CA, sealed, as the cluster CA.
func TestRotateCARefusesAPlantedRecord(t *testing.T) {
	cl, co := localCACluster(t, 1)
	bg := context.Background()
	kek := bytes.Repeat([]byte{4}, certs.KEKSize)
	if _, err := task.New(bg, caOptions(t, cl, co, kek)); err != nil {
		t.Fatal(err)
	}
	caCert := clusterCACert(t, co)
	evil := newCA(t)
	sealedEvil, err := certs.Seal(evil, kek)
	if err != nil {
		t.Fatal(err)
	}
	cross := selfCross(t, evil, evil.Cert)
	for _, r := range []trust.Rotation{
		{Phase: trust.PhaseTrust, OldCert: caCert, New: evil.Bundle(), Cross: cross, Chain: cross},
		{Phase: trust.PhaseIssue, OldCert: caCert, New: sealedEvil, Cross: cross, Chain: cross},
	} {
		plantRotation(t, co, r)
		ctx, cancel := context.WithTimeout(bg, 3*time.Second)
		err := trust.RotateCA(ctx, trust.RotateOptions{Cluster: cl, Coordinator: co, KEK: kek, Poll: 100 * time.Millisecond,
			Members: func(context.Context) ([]status.Member, error) {
				return []status.Member{{Name: "m0", CA: &status.RotationView{Issuer: certs.Fingerprint(evil.Cert), Trusted: []string{certs.Fingerprint(evil.Cert)}}}}, nil
			}})
		cancel()
		if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "ca-rotation") {
			t.Errorf("phase %s: rotate-ca resumed a planted record: %v, want a refusal naming ca-rotation", r.Phase, err)
		}
		if got := clusterCACert(t, co); !bytes.Equal(got, caCert) {
			t.Fatalf("phase %s: the cluster CA was replaced by the planted record's", r.Phase)
		}
	}
}

// The legitimate path through the checks: `tls rotate-ca` (trust.RotateCA,
// as the command runs it) rotates a running member with a KEK to a new
// CA, and the member ends trusting the new CA alone, issuing from it;
// the coordinator holds it sealed. Then a second rotation continues the
// chain. And a command interrupted after storing the new CA as the
// cluster CA (record still at phase issue) resumes.
func TestRotateCAStillRotatesARunningMember(t *testing.T) {
	cl, co := localCACluster(t, 1)
	bg := context.Background()
	kek := bytes.Repeat([]byte{3}, certs.KEKSize)
	ctx, cancel := context.WithCancel(bg)
	m, err := task.New(ctx, caOptions(t, cl, co, kek))
	if err != nil {
		t.Fatal(err)
	}
	runMemberUntil(t, m, ctx, cancel)
	first := clusterCACert(t, co)
	base := "https://127.0.0.1:" + itoa(cl.Provider.Static[0].StatusPort)
	members := func(ctx context.Context) ([]status.Member, error) {
		stTLS, _, err := backends.StatusTLS(ctx, cl, co)
		if err != nil {
			return nil, err
		}
		hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: stTLS}}
		defer hc.CloseIdleConnections()
		st, err := status.Fetch(ctx, hc, base)
		if err != nil {
			return []status.Member{{Name: "m0", Unreachable: true}}, nil
		}
		return []status.Member{st}, nil
	}
	rotate := func() {
		t.Helper()
		rctx, rcancel := context.WithTimeout(bg, 90*time.Second)
		defer rcancel()
		err := trust.RotateCA(rctx, trust.RotateOptions{Cluster: cl, Coordinator: co, KEK: kek, Members: members, Poll: 200 * time.Millisecond,
			Progress: func(s string) { t.Log("rotate-ca: " + s) }})
		if err != nil {
			t.Fatal(err)
		}
	}
	rotate()
	second := clusterCACert(t, co)
	if bytes.Equal(second, first) {
		t.Fatal("the cluster CA did not change")
	}
	if _, err := clusterca.Read(bg, co, cl.Name, kek); err != nil {
		t.Fatalf("the new cluster CA does not open with the KEK: %v", err)
	}
	clustertest.WaitFor(t, 30*time.Second, "the member to trust the new CA alone", func() (bool, string) {
		tr := trustedFile(t, cl)
		return bytes.Contains(tr, second) && !bytes.Contains(tr, first), string(tr)
	})
	rotate()
	if third := clusterCACert(t, co); bytes.Equal(third, second) {
		t.Fatal("the second rotation did not change the cluster CA")
	}
}

// A command interrupted between storing the new CA as the cluster CA and
// moving the record to phase retire resumes: the record's new CA is the
// cluster CA by then.
func TestRotateCAResumesAfterStoringTheNewCA(t *testing.T) {
	cl, co := localCACluster(t, 1)
	bg := context.Background()
	kek := bytes.Repeat([]byte{2}, certs.KEKSize)
	if _, err := task.New(bg, caOptions(t, cl, co, kek)); err != nil {
		t.Fatal(err)
	}
	ca, err := clusterca.Read(bg, co, cl.Name, kek)
	if err != nil {
		t.Fatal(err)
	}
	next := newCA(t)
	sealed, err := certs.Seal(next, kek)
	if err != nil {
		t.Fatal(err)
	}
	cross, err := certs.CrossSign(ca, next)
	if err != nil {
		t.Fatal(err)
	}
	plantRotation(t, co, trust.Rotation{Phase: trust.PhaseIssue, OldCert: ca.Cert, New: sealed, Cross: cross, Chain: cross})
	if err := co.Delete(bg, clusterca.SealedKey); err != nil {
		t.Fatal(err)
	}
	if _, err := clusterca.Offer(bg, co, next, kek); err != nil {
		t.Fatal(err)
	}
	fp := certs.Fingerprint(next.Cert)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	err = trust.RotateCA(ctx, trust.RotateOptions{Cluster: cl, Coordinator: co, KEK: kek, Poll: 50 * time.Millisecond,
		Members: func(context.Context) ([]status.Member, error) {
			return []status.Member{{Name: "m0", CA: &status.RotationView{Issuer: fp, Trusted: []string{fp}}}}, nil
		}})
	if err != nil {
		t.Fatalf("resume at phase issue with the new CA stored: %v", err)
	}
	if r, err := trust.LoadRotation(bg, co); err != nil || r.Phase != trust.PhaseDone {
		t.Fatalf("record after resuming: %+v, %v", r.Phase, err)
	}
}
