package main

// Taken over from the security review's
// TestAttackFingerprintWithoutKEKPrintsAPlantedPlaintextCA (804d397) and
// inverted: it passes while the attack fails.

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/coord/local"
)

func fingerprintConfig(t *testing.T, coordination string) string {
	t.Helper()
	dir := t.TempDir()
	hcl := fmt.Sprintf(`cluster "unit" {
  size     = 1
  data_dir = %q
  tls { mode = "auto" }
  provider "static" {
    member "m0" {
      address     = "127.0.0.1"
      client_port = 1
      peer_port   = 2
      status_port = 3
    }
  }
  %s
}
`, filepath.Join(dir, "data"), coordination)
	path := filepath.Join(dir, "cluster.hcl")
	if err := os.WriteFile(path, []byte(hcl), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// localClusterWithCA is a definition with local coordination whose
// coordinator holds a new cluster CA, sealed with kek when given.
func localClusterWithCA(t *testing.T, kek []byte) (string, *local.Coordinator, certs.Pair) {
	t.Helper()
	coordDir := t.TempDir()
	cfgPath := fingerprintConfig(t, fmt.Sprintf(`coordination "local" { dir = %q }`, coordDir))
	co, err := local.New(coordDir)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certs.NewCA("unit", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clusterca.Offer(context.Background(), co, ca, kek); err != nil {
		t.Fatal(err)
	}
	return cfgPath, co, ca
}

func runFingerprint(cfgPath string) (int, string) {
	ui := cli.NewMockUi()
	code := (&fingerprintCommand{ui: ui}).Run([]string{"-config", cfgPath})
	return code, strings.TrimSpace(ui.OutputWriter.String() + ui.ErrorWriter.String())
}

// A writer of Consul's keys who deletes ca-sealed and stores its own CA in
// the clear at ca must not get its fingerprint printed (and pinned into
// every application) because the operator ran `tls fingerprint` without
// ETCD_NOMAD_CA_KEK: with Consul coordination the command refuses without
// the KEK, before it reads anything, and says where the KEK is.
func TestFingerprintWithConsulRequiresTheKEK(t *testing.T) {
	// Nothing listens there: the refusal must come before any read.
	t.Setenv("CONSUL_HTTP_ADDR", "127.0.0.1:1")
	t.Setenv(certs.KEKEnv, "")
	os.Unsetenv(certs.KEKEnv)
	code, out := runFingerprint(fingerprintConfig(t, `coordination "consul" {}`))
	if code == 0 {
		t.Fatalf("without %s, tls fingerprint with Consul coordination exited 0: %q", certs.KEKEnv, out)
	}
	if !strings.Contains(out, certs.KEKEnv) || !strings.Contains(out, "nomad var get -item ca_kek nomad/jobs/") {
		t.Fatalf("the refusal does not say the KEK is needed and where it is: %q", out)
	}
}

// The local coordinator's directory is the machine's own (whoever writes it
// can write the members' data directories too): there, without a KEK, the
// plaintext CA is read; with the KEK a planted plaintext CA is refused.
func TestFingerprintWithTheKEKRefusesAPlantedPlaintextCA(t *testing.T) {
	bg := context.Background()
	kek := bytes.Repeat([]byte{8}, certs.KEKSize)
	cfgPath, co, ca := localClusterWithCA(t, kek)
	t.Setenv(certs.KEKEnv, base64.StdEncoding.EncodeToString(kek))
	if code, out := runFingerprint(cfgPath); code != 0 || out != certs.Fingerprint(ca.Cert) {
		t.Fatalf("control, with the KEK: %d %q", code, out)
	}
	evil, _ := certs.NewCA("unit", time.Now())
	if err := co.Delete(bg, clusterca.SealedKey); err != nil {
		t.Fatal(err)
	}
	if _, err := co.LoadOrStore(bg, clusterca.PlainKey, evil.Bundle()); err != nil {
		t.Fatal(err)
	}
	if code, out := runFingerprint(cfgPath); code == 0 {
		t.Fatalf("with the KEK and a planted plaintext CA, tls fingerprint printed %q", out)
	}
	os.Unsetenv(certs.KEKEnv)
	if code, out := runFingerprint(cfgPath); code != 0 || out != certs.Fingerprint(evil.Cert) {
		t.Fatalf("local coordination without the KEK: %d %q, want the plaintext CA", code, out)
	}
}
