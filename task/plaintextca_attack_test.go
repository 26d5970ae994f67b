package task_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/task"
)

// Item 3: the attacker deletes ca-sealed and writes its own CA in the
// clear at ca. A member with a KEK and no saved CA refuses to start,
// naming both keys; one with a saved CA keeps its own, stores it sealed
// again and leaves the plaintext one alone; `snapshot save`'s and `env`'s
// read of the CA (clusterca.Read via backends.EtcdTLS) refuses it naming
// both keys. On 6d70c97 all of them adopted the attacker's CA.
func TestPlaintextCAWithoutTheSealedOneIsRefused(t *testing.T) {
	cl, co := localCACluster(t, 1)
	bg := context.Background()
	kek := bytes.Repeat([]byte{6}, certs.KEKSize)
	if _, err := task.New(bg, caOptions(t, cl, co, kek)); err != nil {
		t.Fatal(err)
	}
	ca, err := clusterca.Read(bg, co, cl.Name, kek)
	if err != nil {
		t.Fatal(err)
	}
	evil := newCA(t)
	if err := co.Delete(bg, clusterca.SealedKey); err != nil {
		t.Fatal(err)
	}
	if _, err := co.LoadOrStore(bg, clusterca.PlainKey, evil.Bundle()); err != nil {
		t.Fatal(err)
	}
	namesBoth := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), `"ca-sealed"`) && strings.Contains(err.Error(), `"ca"`)
	}
	if _, _, err := backends.EtcdTLS(bg, cl, co, kek); !namesBoth(err) {
		t.Errorf("snapshot/env's read of the CA: %v, want a refusal naming \"ca\" and \"ca-sealed\"", err)
	}
	// A member without a saved CA (a new one).
	cl.Provider.Static = append(cl.Provider.Static, config.StaticMember{Name: "m1", Address: "127.0.0.1", ClientPort: 1, PeerPort: 2, StatusPort: 3})
	fresh := caOptions(t, cl, co, kek)
	fresh.Name = "m1"
	if _, err := task.New(bg, fresh); !namesBoth(err) {
		t.Errorf("a member without a saved CA: %v, want a refusal naming \"ca\" and \"ca-sealed\"", err)
	}
	if _, err := os.Stat(filepath.Join(cl.DataDir, "m1", "tls", "ca.bundle")); err == nil {
		if b, _ := os.ReadFile(filepath.Join(cl.DataDir, "m1", "tls", "ca.bundle")); bytes.Equal(b, evil.Bundle()) {
			t.Error("the new member saved the attacker's CA as its own")
		}
	}
	// A member with a saved CA: its own, stored sealed again; the
	// attacker's plaintext CA is not adopted.
	if _, err := task.New(bg, caOptions(t, cl, co, kek)); err != nil {
		t.Fatal(err)
	}
	if !verifiesWith(t, cl, ca) || bytes.Contains(trustedFile(t, cl), evil.Cert) {
		t.Error("the member with a saved CA took the attacker's")
	}
	if got, err := clusterca.Read(bg, co, cl.Name, kek); err != nil || !clusterca.Same(got, ca) {
		t.Errorf("after the member started, the coordinator's CA: %v, want the member's stored sealed again", err)
	}
}
