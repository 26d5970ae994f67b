package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// docs/install.md's plain 'nomad job run' path starts members whose template
// rendered no ETCD_NOMAD_CA_KEK (the variable had none yet). memberCommand
// takes the key from the variable (memberKEK), while backends.OpenMember
// built the snapshot encryption from the environment alone: the member
// must still authenticate its snapshots with the key it holds, or it
// writes every snapshot and delta without a MAC and refuses the MAC'd
// ones (review data11 F2).
func TestMemberWithKEKFromTheVariableAuthenticatesSnapshots(t *testing.T) {
	cl, _, diags := config.LoadFile("../../examples/nomad.hcl")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	t.Setenv(certs.KEKEnv, "")            // the template rendered none
	t.Setenv("NOMAD_ALLOC_ID", "alloc-1") // a member in a Nomad allocation
	if !kekInJobVariable(cl) {
		t.Fatal("the example is not a KEK-in-variable cluster: the test proves nothing")
	}
	enc, err := backends.Encryption(cl) // what backends.OpenMember sets
	if err != nil {
		t.Fatal(err)
	}
	store, err := file.New(filepath.Join(t.TempDir(), "store"), cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	parts := &backends.Member{Store: store, Encryption: enc}
	kek := bytes.Repeat([]byte{5}, 32) // what memberKEK returns from the variable
	sn, err := memberSnapshots(cl, parts, kek)
	if err != nil {
		t.Fatal(err)
	}
	want, err := snapshot.DeriveMACKey(kek, cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	if sn == nil || !bytes.Equal(sn.Encryption.MACKey, want) {
		t.Fatalf("the member holds the cluster's KEK (from the job variable) but its snapshot encryption has MAC key %x, want %x: it writes unauthenticated snapshots and deltas", sn.Encryption.MACKey, want)
	}
	if sn, err := memberSnapshots(cl, &backends.Member{}, kek); err != nil || sn != nil {
		t.Fatalf("without a snapshot block: %v, %v", sn, err)
	}
}
