package task_test

// Attacks of the security review of the rotation fixes (2026-11-26): a
// coordinator writer (Consul key read and write, no KEK) plants trust
// through the bytes of the CA rotation record that the first fix read
// only in part (the first PEM block) and then stored whole.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/tlsutil"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/task"
	"github.com/etcd-nomad/etcd-nomad/task/trust"
)

// The attacker "rotates" the cluster CA to itself: New = the sealed blob
// key read gives (kv/ca-sealed), Cross = the cluster CA's own self-signed
// certificate, OldCert = the cluster CA followed by the attacker's CA. The
// member wrote OldCert whole into ca.crt, and etcd's client port took a
// CN=root certificate the attacker minted. Refused now: an old CA or cross
// certificate is exactly one certificate, a rotation to the same key is
// none, and trust is built from parsed certificates only.
func TestSelfRotationWithAnAppendedCAIsRefused(t *testing.T) {
	cl, co := localCACluster(t, 1)
	bg := context.Background()
	kek := bytes.Repeat([]byte{7}, certs.KEKSize)
	if _, err := task.New(bg, caOptions(t, cl, co, kek)); err != nil {
		t.Fatal(err)
	}
	sealed, err := co.Load(bg, clusterca.SealedKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert := mustSealedCert(t, sealed)
	evil := newCA(t)
	for name, old := range map[string][]byte{
		"appended CA":   append(append([]byte{}, caCert...), evil.Cert...),
		"same CA alone": caCert,
	} {
		plantRotation(t, co, trust.Rotation{Phase: trust.PhaseTrust, OldCert: old, New: sealed, Cross: caCert, Started: time.Now()})
		if _, err := task.New(bg, caOptions(t, cl, co, kek)); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(trustedFile(t, cl), evil.Cert) {
			t.Fatalf("%s: the attacker's CA is in the member's ca.crt", name)
		}
		if _, err := certs.OnlyCert(trustedFile(t, cl)); err != nil {
			t.Fatalf("%s: ca.crt holds more than the cluster CA: %v", name, err)
		}
	}
}

// During a real rotation (written by rotate-ca with the KEK), a member
// restarted at phase issue holds only the new CA and took the record's
// old peer CA when it trusted it already, checking only blocks of type
// CERTIFICATE; the attacker appended its own peer CA as a "TRUSTED
// CERTIFICATE" block, and etcd's loader (which takes every block) trusted
// it on the peer port. Now a record adds no peer CA: only certificates
// the member trusts already are kept, each encoded again.
func TestRotationRecordPlantsNoPeerCA(t *testing.T) {
	cl, co := localCACluster(t, 1)
	bg := context.Background()
	kek := bytes.Repeat([]byte{8}, certs.KEKSize)
	if _, err := task.New(bg, caOptions(t, cl, co, kek)); err != nil {
		t.Fatal(err)
	}
	ca, err := clusterca.Read(bg, co, cl.Name, kek)
	if err != nil {
		t.Fatal(err)
	}
	next := newCA(t)
	sealedNext, err := certs.Seal(next, kek)
	if err != nil {
		t.Fatal(err)
	}
	cross, err := certs.CrossSign(ca, next)
	if err != nil {
		t.Fatal(err)
	}
	peerOld, _ := certs.PeerCACert(ca)
	peerCross, _ := certs.PeerCross(ca, next)
	r := trust.Rotation{Phase: trust.PhaseTrust, OldCert: ca.Cert, New: sealedNext, Cross: cross, Chain: cross,
		PeerOld: peerOld, PeerCross: peerCross, PeerChain: peerCross, Started: time.Now(), Changed: time.Now()}
	plantRotation(t, co, r)
	if _, err := task.New(bg, caOptions(t, cl, co, kek)); err != nil {
		t.Fatal(err)
	}
	r.Phase = trust.PhaseIssue
	plantRotation(t, co, r)
	if _, err := task.New(bg, caOptions(t, cl, co, kek)); err != nil {
		t.Fatal(err)
	}
	evil := newCA(t)
	evilPeerCA, _ := certs.PeerCACert(evil)
	blk, _ := pem.Decode(evilPeerCA)
	for _, typ := range []string{"TRUSTED CERTIFICATE", "CERTIFICATE"} {
		r.PeerOld = append(append([]byte{}, peerOld...), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: blk.Bytes})...)
		r.PeerChain = append(append([]byte{}, peerCross...), []byte("-----BEGIN JUNK-----\nAAAA\n-----END JUNK-----\n")...)
		r.Started = r.Started.Add(time.Second)
		plantRotation(t, co, r)
		if _, err := task.New(bg, caOptions(t, cl, co, kek)); err != nil {
			t.Fatal(err)
		}
		pool, err := tlsutil.NewCertPool([]string{filepath.Join(cl.DataDir, "m0", "tls", "peer-ca.crt")})
		if err != nil {
			t.Fatalf("%s: etcd cannot load peer-ca.crt: %v", typ, err)
		}
		evilPeer, err := certs.IssuePeer(evil, []string{"127.0.0.1"}, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := certs.Leaf(evilPeer.Cert)
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
			t.Fatalf("%s block: etcd's peer pool verifies the attacker's peer certificate", typ)
		}
	}
}
