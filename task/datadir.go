package task

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/datadir"
)

// dataDir is the member's directory (datadir.Dir) with the cluster CA
// saved beside its certificates.
type dataDir struct{ datadir.Dir }

// hasEtcdData is datadir.Dir.HasEtcdData, for the CA code (task/ca.go)
// until it moves next to the certificates.
func (d dataDir) hasEtcdData() bool { return d.HasEtcdData() }

// caFile keeps the cluster CA (certificate and key) the member's
// certificates were issued from, next to them.
func (d dataDir) caFile() string { return filepath.Join(d.TLSDir(), "ca.bundle") }

// readCA returns the saved cluster CA, or nil if none is saved.
func (d dataDir) readCA() (*certs.Pair, error) {
	b, err := os.ReadFile(d.caFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p, err := certs.ParseBundle(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.caFile(), err)
	}
	return &p, nil
}

func (d dataDir) writeCA(ca certs.Pair) error {
	if err := os.MkdirAll(d.TLSDir(), 0o700); err != nil {
		return err
	}
	p := d.caFile()
	if err := os.WriteFile(p+".tmp", ca.Bundle(), 0o600); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}
