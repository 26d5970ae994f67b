package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord/local"
)

// A plaintext CA planted by a coordinator writer (docs/security.md), on the path `etcd-nomad env` takes (operatorCert, KEK
// from ETCD_NOMAD_CA_KEK): a writer of the coordinator deletes ca-sealed
// and stores its own CA in the clear at ca. The operator with the KEK is
// refused, with both keys named, and gets no certificate; on 6d70c97 env
// issued the operator's certificate from the attacker's CA and wrote its
// certificate as the CA to trust (the operator's session MITMed).
func TestEnvRefusesAPlaintextCAWithoutTheSealedOne(t *testing.T) {
	dir := t.TempDir()
	cl := &config.Cluster{Name: "unit", TLS: config.TLS{Mode: config.TLSAuto},
		Provider:     config.Provider{Kind: config.ProviderStatic},
		Coordination: config.Coordination{Kind: config.CoordLocal, Dir: filepath.Join(dir, "coord")}}
	co, err := local.New(cl.Coordination.Dir)
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	kek := bytes.Repeat([]byte{8}, certs.KEKSize)
	t.Setenv(certs.KEKEnv, base64.StdEncoding.EncodeToString(kek))
	ca, err := certs.NewCA("unit", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clusterca.Offer(bg, co, ca, kek); err != nil {
		t.Fatal(err)
	}
	if _, _, err := operatorCert(bg, cl, envOptions{User: certs.RootUser, TTL: time.Hour, Dir: filepath.Join(dir, "env-ok")}); err != nil {
		t.Fatalf("env with the sealed CA: %v", err)
	}
	evil, err := certs.NewCA("unit", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := co.Delete(bg, clusterca.SealedKey); err != nil {
		t.Fatal(err)
	}
	if _, err := co.LoadOrStore(bg, clusterca.PlainKey, evil.Bundle()); err != nil {
		t.Fatal(err)
	}
	f, _, err := operatorCert(bg, cl, envOptions{User: certs.RootUser, TTL: time.Hour, Dir: filepath.Join(dir, "env")})
	if err == nil || !strings.Contains(err.Error(), `"ca-sealed"`) || !strings.Contains(err.Error(), `"ca"`) {
		t.Fatalf("env with only a plaintext CA: %v (files %+v), want a refusal naming \"ca\" and \"ca-sealed\"", err, f)
	}
}
