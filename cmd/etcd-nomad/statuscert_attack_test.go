package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
)

// tls status-cert promises a certificate that opens /status and /metrics
// and nothing else. Where the coordinator held no status CA but the
// cluster CA in the clear (members of earlier versions), it issued from
// the cluster CA itself, silently, and -name root made a 720 h etcd root
// certificate for Prometheus (security review, session 11, F6). It
// refuses both.
func TestStatusCertNeverIssuesFromTheClusterCAOrAsRoot(t *testing.T) {
	cfgPath, co, _ := localClusterWithCA(t, nil)
	run := func(args ...string) (int, string) {
		ui := cli.NewMockUi()
		code := (&statusCertCommand{ui: ui}).Run(append([]string{"-config", cfgPath, "-dir", filepath.Join(t.TempDir(), "prom")}, args...))
		return code, ui.ErrorWriter.String()
	}
	if code, out := run("-name", "root"); code == 0 || !strings.Contains(out, "root") {
		t.Errorf("-name root: exit %d %q, want a refusal naming root", code, out)
	}
	if err := co.Delete(context.Background(), clusterca.StatusKey); err != nil {
		t.Fatal(err)
	}
	if code, out := run(); code == 0 || !strings.Contains(out, "status CA") {
		t.Errorf("with no status CA stored: exit %d %q, want a refusal (the cluster CA would open etcd)", code, out)
	}
}

// A writer of Consul's keys (no KEK) replaces ca-sealed with a CA of its
// own sealed under its own key, and status-ca with a status CA of its own:
// `tls status-cert` used to write the attacker's certificate to ca.crt, so
// the monitor trusted whoever the attacker registered as a member and took
// its forged metrics (security review of session 11, suspected LOW). Now
// ca.crt comes from the CA that opens with the cluster's KEK (the status
// CA derived from it), or is checked against a pin; neither planted key is
// taken.
func TestStatusCertTrustsOnlyTheSealedOrPinnedCA(t *testing.T) {
	kek := bytes.Repeat([]byte{7}, certs.KEKSize)
	cfgPath, co, ca := localClusterWithCA(t, kek)
	bg := context.Background()
	attackerCA, err := certs.NewCA("unit", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	attackerStatus, err := certs.StatusCA(attackerCA)
	if err != nil {
		t.Fatal(err)
	}
	realSealed, err := co.Load(bg, clusterca.SealedKey)
	if err != nil {
		t.Fatal(err)
	}
	plant := func(key string, b []byte) {
		t.Helper()
		if err := co.Delete(bg, key); err != nil {
			t.Fatal(err)
		}
		if _, err := co.LoadOrStore(bg, key, b); err != nil {
			t.Fatal(err)
		}
	}
	forged, err := certs.Seal(attackerCA, bytes.Repeat([]byte{8}, certs.KEKSize))
	if err != nil {
		t.Fatal(err)
	}
	plant(clusterca.SealedKey, forged)
	plant(clusterca.StatusKey, attackerStatus.Bundle())

	run := func(env string, args ...string) (int, string, string) {
		t.Setenv(certs.KEKEnv, env)
		dir := filepath.Join(t.TempDir(), "prom")
		ui := cli.NewMockUi()
		code := (&statusCertCommand{ui: ui}).Run(append([]string{"-config", cfgPath, "-dir", dir}, args...))
		return code, ui.ErrorWriter.String(), dir
	}
	kekEnv := base64.StdEncoding.EncodeToString(kek)
	if code, out, _ := run(kekEnv); code == 0 {
		t.Errorf("with the KEK and a forged ca-sealed: exit 0, want a refusal (%q)", out)
	}
	if code, out, _ := run("", "-ca-fingerprint", certs.Fingerprint(ca.Cert)); code == 0 || !strings.Contains(out, certs.Fingerprint(attackerCA.Cert)) || !strings.Contains(out, certs.Fingerprint(ca.Cert)) {
		t.Errorf("pinned, with a forged ca-sealed: exit %d %q, want a refusal naming both CAs", code, out)
	}

	// The real sealed CA back, the planted status CA left: with the KEK
	// the certificate chains to the status CA members derive.
	plant(clusterca.SealedKey, realSealed)
	code, out, dir := run(kekEnv)
	if code != 0 {
		t.Fatalf("with the KEK: exit %d %q", code, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "ca.crt")); err != nil || certs.Fingerprint(b) != certs.Fingerprint(ca.Cert) {
		t.Errorf("ca.crt is %s (%v), want the cluster CA %s", certs.Fingerprint(b), err, certs.Fingerprint(ca.Cert))
	}
	want, err := certs.StatusCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := certs.Pool(want.Cert)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "status.crt"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("status.crt: no PEM")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("status.crt does not chain to the status CA the members derive (it came from the planted one): %v", err)
	}
}

// With Consul coordination and neither the KEK nor a pin, `tls
// status-cert` refuses before it reads anything, and says both ways.
func TestStatusCertWithConsulNeedsTheKEKOrAPin(t *testing.T) {
	t.Setenv("CONSUL_HTTP_ADDR", "127.0.0.1:1")
	t.Setenv(certs.KEKEnv, "")
	t.Setenv("ETCD_NOMAD_CA_FINGERPRINT", "")
	ui := cli.NewMockUi()
	code := (&statusCertCommand{ui: ui}).Run([]string{"-config", fingerprintConfig(t, `coordination "consul" {}`), "-dir", filepath.Join(t.TempDir(), "prom")})
	out := ui.ErrorWriter.String()
	if code == 0 || !strings.Contains(out, certs.KEKEnv) || !strings.Contains(out, "-ca-fingerprint") {
		t.Fatalf("exit %d %q: want a refusal naming %s and -ca-fingerprint", code, out, certs.KEKEnv)
	}
}
