package backends_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord/consul"
	"github.com/etcd-nomad/etcd-nomad/coord/local"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
)

// The cluster CA is never replaced: the CLI only reads it (docs/design.md,
// the safety invariants' table). `etcd-nomad status` created a new cluster CA when none was in
// the coordinator (after Consul lost its state), which members starting
// next adopted. Read-only commands must only read.

func autoCluster(kind, dir string) *config.Cluster {
	return &config.Cluster{Name: "main", TLS: config.TLS{Mode: config.TLSAuto},
		Coordination: config.Coordination{Kind: kind, Dir: dir, Prefix: "etcd-nomad", SessionTTL: 10 * time.Second}}
}

func TestDefect6StatusDoesNotCreateTheClusterCA(t *testing.T) {
	dir := t.TempDir()
	cl := autoCluster(config.CoordLocal, dir)
	co, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = backends.StatusTLS(context.Background(), cl, co)
	if !errors.Is(err, clusterca.ErrNoClusterCA) {
		t.Fatalf("ClientTLS without a CA in the coordinator: %v, want ErrNoClusterCA", err)
	}
	for _, want := range []string{"not in the coordinator", "lost its state", "ca.bundle"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "kv-ca")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("status stored a cluster CA (%v)", err)
	}
}

// With ACLs on, a token with key read on the cluster's prefix is enough
// for the CLI's client certificate (the CA is read, never created).
func TestDefect6StatusNeedsOnlyKeyRead(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Consul agent")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	agent, err := devagents.StartConsulWith(ctx, t.TempDir(), devagents.Options{ACL: true})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Stop(10 * time.Second)
	client := func(token string) *consulapi.Client {
		cfg := consulapi.DefaultConfig()
		cfg.Address, cfg.Token = strings.TrimPrefix(agent.Addr, "http://"), token
		c, err := consulapi.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	mgmt := client(agent.Token)
	rules := `key_prefix "etcd-nomad/main/" {
  policy = "read"
}
`
	pol, _, err := mgmt.ACL().PolicyCreate(&consulapi.ACLPolicy{Name: "etcd-nomad-status", Rules: rules}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := mgmt.ACL().TokenCreate(&consulapi.ACLToken{Policies: []*consulapi.ACLTokenPolicyLink{{ID: pol.ID}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := autoCluster(config.CoordConsul, "")
	co, err := consul.New(consul.Options{Client: client(tok.SecretID), Prefix: "etcd-nomad/main", Addr: agent.Addr, TokenSet: true})
	if err != nil {
		t.Fatal(err)
	}

	// No CA yet: the read-only token reads nothing, and is told so (not
	// refused for lacking write).
	if _, _, err := backends.StatusTLS(ctx, cl, co); !errors.Is(err, clusterca.ErrNoClusterCA) {
		t.Fatalf("ClientTLS with no CA stored: %v, want ErrNoClusterCA", err)
	}

	ca, err := certs.NewCA("main", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgmt.KV().Put(&consulapi.KVPair{Key: "etcd-nomad/main/kv/ca", Value: ca.Bundle()}, nil); err != nil {
		t.Fatal(err)
	}
	tc, scheme, err := backends.StatusTLS(ctx, cl, co)
	if err != nil {
		t.Fatalf("ClientTLS with a key-read token: %v", err)
	}
	if scheme != "https" || len(tc.Certificates) != 1 || tc.RootCAs == nil {
		t.Fatalf("client TLS: scheme %s, %d certificates", scheme, len(tc.Certificates))
	}
	kv, _, err := mgmt.KV().Get("etcd-nomad/main/kv/ca", nil)
	if err != nil || kv == nil || string(kv.Value) != string(ca.Bundle()) {
		t.Fatalf("the stored CA changed (%v)", err)
	}

	// Members of this version store the CA sealed and the status CA: the
	// read-only token gets a status CA certificate (never the cluster
	// CA's), and etcd certificates only with the KEK.
	wco, err := consul.New(consul.Options{Client: mgmt, Prefix: "etcd-nomad/main"})
	if err != nil {
		t.Fatal(err)
	}
	kek := bytes.Repeat([]byte{5}, certs.KEKSize)
	if _, err := clusterca.Offer(ctx, wco, ca, kek); err != nil {
		t.Fatal(err)
	}
	tc, _, err = backends.StatusTLS(ctx, cl, co)
	if err != nil {
		t.Fatalf("ClientTLS with a key-read token, sealed CA: %v", err)
	}
	leaf, _ := x509.ParseCertificate(tc.Certificates[0].Certificate[0])
	if pool, _ := certs.Pool(ca.Cert); leaf == nil || verifies(leaf, pool) {
		t.Fatal("status's certificate is issued by the cluster CA: read-only clients must not hold one")
	}
	st, err := certs.StatusCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	if pool, _ := certs.Pool(st.Cert); !verifies(leaf, pool) {
		t.Fatal("status's certificate is not issued by the status CA")
	}
	if _, _, err := backends.EtcdTLS(ctx, cl, co, nil); !errors.Is(err, clusterca.ErrCASealed) {
		t.Fatalf("EtcdClientTLS without the KEK: %v, want ErrCASealed", err)
	}
	if _, _, err := backends.EtcdTLS(ctx, cl, co, kek); err != nil {
		t.Fatalf("EtcdClientTLS with the KEK and a key-read token: %v", err)
	}
}

func verifies(c *x509.Certificate, roots *x509.CertPool) bool {
	_, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}
