package task_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
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

	consulapi "github.com/hashicorp/consul/api"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord/consul"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/task"
)

// A member with a key encryption key that finds the plaintext cluster CA
// an earlier version stored keeps that CA, stores it sealed (the key never
// in the clear), stores the status CA, and deletes the plaintext copy. A
// read-only client then reads /status with a status CA certificate, which
// etcd's client port refuses; the cluster CA's key opens with the KEK only.
func TestSealedCAReplacesThePlaintextOne(t *testing.T) {
	cl, co := localCACluster(t, 1)
	bg := context.Background()
	ca := newCA(t)
	saveCA(t, cl, ca)
	if _, err := co.LoadOrStore(bg, "ca", ca.Bundle()); err != nil {
		t.Fatal(err)
	}
	kek := bytes.Repeat([]byte{1}, certs.KEKSize)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	m, err := task.New(ctx, caOptions(t, cl, co, kek))
	if err != nil {
		t.Fatal(err)
	}
	if b := storedCA(t, cl); b != nil {
		t.Fatalf("the plaintext CA is still in the coordinator:\n%s", b)
	}
	sealed, err := os.ReadFile(filepath.Join(cl.Coordination.Dir, "kv-ca-sealed"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, ca.Key) || bytes.Contains(sealed, []byte("PRIVATE KEY")) {
		t.Fatalf("the sealed CA holds a private key in the clear:\n%s", sealed)
	}
	if got, err := certs.OpenSealed(sealed, kek); err != nil || !bytes.Equal(got.Cert, ca.Cert) || !bytes.Equal(got.Key, ca.Key) {
		t.Fatalf("the sealed CA is not the saved one: %v", err)
	}
	if _, err := clusterca.Read(bg, co, cl.Name, nil); !errors.Is(err, clusterca.ErrCASealed) {
		t.Fatalf("ClusterCA without the KEK: %v, want ErrCASealed", err)
	}
	if _, err := clusterca.Read(bg, co, cl.Name, bytes.Repeat([]byte{2}, certs.KEKSize)); !errors.Is(err, certs.ErrWrongKEK) {
		t.Fatalf("ClusterCA with another KEK: %v, want ErrWrongKEK", err)
	}

	runUntilEnd(ctx, t, cancel, m)
	// Read-only: the status CA, no KEK.
	stTLS, _, err := backends.StatusTLS(bg, cl, co)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: stTLS}}
	defer hc.CloseIdleConnections()
	base := "https://127.0.0.1:" + itoa(cl.Provider.Static[0].StatusPort)
	waitStatus(t, hc, base)
	client := func(tc *tls.Config) error {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://127.0.0.1:" + itoa(cl.Provider.Static[0].ClientPort)}, TLS: tc, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		defer cli.Close()
		rctx, rcancel := context.WithTimeout(bg, 3*time.Second)
		defer rcancel()
		_, err = cli.Put(rctx, "k", "v")
		return err
	}
	if err := client(stTLS); err == nil {
		t.Fatal("etcd's client port accepted a status CA certificate")
	}
	etcdTLS, _, err := backends.EtcdTLS(bg, cl, co, kek)
	if err != nil {
		t.Fatal(err)
	}
	if err := client(etcdTLS); err != nil {
		t.Fatalf("put with a cluster CA certificate: %v", err)
	}

	// A member of the earlier version stores the plaintext CA again (after
	// the coordinator lost its state, here the record): the running member
	// deletes it at its next CA check.
	if err := os.Remove(filepath.Join(cl.Coordination.Dir, "record.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := co.LoadOrStore(bg, "ca", ca.Bundle()); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitFor(t, time.Minute, "the plaintext CA stored again to be deleted", func() (bool, string) {
		b := storedCA(t, cl)
		return b == nil, fmt.Sprintf("kv-ca holds %d bytes", len(b))
	})
}

// On a real Consul agent: a member of an earlier version left the cluster
// CA in the clear at <prefix>/kv/ca (its key in its data dir too). The
// member, restarted with a KEK, runs with that CA, and afterwards no value
// under the cluster's prefix holds the CA's key in the clear and the old
// path is gone; `status` (status CA, no KEK) reads /status, a member that
// starts without a KEK is refused with the reason, and the CA's key opens
// only with the KEK.
func TestSealedCAMigrationOnConsul(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Consul agent")
	}
	bg := context.Background()
	actx, acancel := context.WithTimeout(bg, time.Minute)
	defer acancel()
	agent, err := devagents.StartConsul(actx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Stop(10 * time.Second)
	ccfg := consulapi.DefaultConfig()
	ccfg.Address = strings.TrimPrefix(agent.Addr, "http://")
	cc, err := consulapi.NewClient(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	cl := caCluster(t, t.TempDir(), 1)
	cl.Coordination = config.Coordination{Kind: config.CoordConsul, Prefix: "etcd-nomad", SessionTTL: 10 * time.Second}
	prefix := "etcd-nomad/" + cl.Name
	co, err := consul.New(consul.Options{Client: cc, Prefix: prefix, Addr: agent.Addr})
	if err != nil {
		t.Fatal(err)
	}
	ca := newCA(t)
	saveCA(t, cl, ca)
	if _, err := cc.KV().Put(&consulapi.KVPair{Key: prefix + "/kv/ca", Value: ca.Bundle()}, nil); err != nil {
		t.Fatal(err)
	}
	if !clustertest.HoldsKeyOf(ca.Bundle(), ca.Cert) {
		t.Fatal("HoldsKeyOf does not see the key in a plaintext bundle")
	}
	opts := func(kek []byte) task.Options {
		return caOptions(t, cl, co, kek)
	}
	if _, err := task.New(bg, opts(nil)); err == nil || !strings.Contains(err.Error(), certs.KEKEnv) {
		t.Fatalf("a member without a KEK on Consul: %v, want a refusal naming %s", err, certs.KEKEnv)
	}
	kek := bytes.Repeat([]byte{3}, certs.KEKSize)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	m, err := task.New(ctx, opts(kek))
	if err != nil {
		t.Fatal(err)
	}
	runUntilEnd(ctx, t, cancel, m)
	stTLS, _, err := backends.StatusTLS(bg, cl, co)
	if err != nil {
		t.Fatal(err)
	}
	if len(stTLS.Certificates) != 1 || verifiesAgainst(stTLS.Certificates[0].Certificate[0], ca.Cert) {
		t.Fatal("status's client certificate is not from the status CA")
	}
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: stTLS}}
	defer hc.CloseIdleConnections()
	base := "https://127.0.0.1:" + itoa(cl.Provider.Static[0].StatusPort)
	waitStatus(t, hc, base)
	if !verifiesWith(t, cl, ca) {
		t.Fatal("the member's certificate is not from the cluster's CA")
	}
	clustertest.NoCAKeyInKV(t, cc.KV(), prefix+"/", ca.Cert, prefix+"/kv/ca")
	if got, err := clusterca.Read(bg, co, cl.Name, kek); err != nil || !bytes.Equal(got.Key, ca.Key) {
		t.Fatalf("the sealed CA with the KEK: %v", err)
	}
	if _, err := clusterca.Read(bg, co, cl.Name, nil); !errors.Is(err, clusterca.ErrCASealed) {
		t.Fatalf("the sealed CA without the KEK: %v, want ErrCASealed", err)
	}
}

// verifiesAgainst reports whether the DER certificate was issued by the
// PEM CA certificate root.
func verifiesAgainst(der, root []byte) bool {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return false
	}
	pool, _ := certs.Pool(root)
	_, err = c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

// runUntilEnd runs m until the test ends, then cancels it and fails the test
// if it does not stop within 15s.
func runUntilEnd(ctx context.Context, t *testing.T, cancel context.CancelFunc, m *task.Member) {
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("member did not stop within 15s")
		}
	})
}

// waitStatus waits until the member at base is healthy and hc reads its
// /status.
func waitStatus(t *testing.T, hc *http.Client, base string) {
	t.Helper()
	clustertest.WaitFor(t, time.Minute, "a healthy member and its /status read with the status CA", func() (bool, string) {
		hcode, hbody := get(t, hc, base+"/health")
		scode, sbody := get(t, hc, base+"/status")
		return hcode == http.StatusOK && scode == http.StatusOK, fmt.Sprintf("/health %d %s; /status %d %s", hcode, hbody, scode, sbody)
	})
}

// A KEK that does not open the sealed CA (the variable replaced) stops
// only members without a saved CA, with the reason; a member with a saved
// CA runs with it, as its peers trust it.
func TestWrongKEKStopsOnlyMembersWithoutASavedCA(t *testing.T) {
	cl, co := localCACluster(t, 1)
	bg := context.Background()
	ca := newCA(t)
	if _, err := clusterca.Offer(bg, co, ca, bytes.Repeat([]byte{1}, certs.KEKSize)); err != nil {
		t.Fatal(err)
	}
	opts := caOptions(t, cl, co, bytes.Repeat([]byte{2}, certs.KEKSize))
	if _, err := task.New(bg, opts); !errors.Is(err, certs.ErrWrongKEK) {
		t.Fatalf("a member without a saved CA and another KEK: %v, want ErrWrongKEK", err)
	}
	saveCA(t, cl, ca)
	if _, err := task.New(bg, opts); err != nil {
		t.Fatalf("a member with a saved CA and another KEK: %v", err)
	}
	if !verifiesWith(t, cl, ca) {
		t.Fatal("the member's certificate is not from its saved CA")
	}
}
