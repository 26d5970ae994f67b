package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/certs"
)

// tls status-cert writes what Prometheus needs to scrape /metrics: the
// cluster CA certificate to trust and a client certificate that chains to
// the status CA, never to the cluster CA (etcd's ports would take that),
// its key 0600, named as -name says.
func TestStatusCertChainsToTheStatusCAOnly(t *testing.T) {
	cfgPath, _, ca := localClusterWithCA(t, nil)
	dir := filepath.Join(t.TempDir(), "prom")
	ui := cli.NewMockUi()
	if code := (&statusCertCommand{ui: ui}).Run([]string{"-config", cfgPath, "-dir", dir, "-ttl", "48h"}); code != 0 {
		t.Fatalf("tls status-cert: %d %s", code, ui.ErrorWriter.String())
	}
	t.Logf("output:\n%s", ui.OutputWriter.String())
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if fi, err := os.Stat(filepath.Join(dir, "status.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("status.key: %v %v, want 0600", fi, err)
	}
	if got := read("ca.crt"); certs.Fingerprint(got) != certs.Fingerprint(ca.Cert) {
		t.Errorf("ca.crt is not the cluster CA certificate")
	}
	blk, _ := pem.Decode(read("status.crt"))
	if blk == nil {
		t.Fatal("status.crt: no PEM")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "prometheus" || time.Until(cert.NotAfter) > 48*time.Hour {
		t.Errorf("CN %q, not after %s: want prometheus, within 48h", cert.Subject.CommonName, cert.NotAfter)
	}
	sca, err := certs.StatusCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	verify := func(root []byte) error {
		pool, err := certs.Pool(root)
		if err != nil {
			return err
		}
		_, err = cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err
	}
	if err := verify(sca.Cert); err != nil {
		t.Errorf("status.crt does not chain to the status CA: %v", err)
	}
	if err := verify(ca.Cert); err == nil {
		t.Errorf("status.crt chains to the cluster CA: etcd's ports would take it")
	}
	if !strings.Contains(ui.OutputWriter.String(), "cert_file: "+filepath.Join(dir, "status.crt")) {
		t.Errorf("output does not name the files: %s", ui.OutputWriter.String())
	}
}
