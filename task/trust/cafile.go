package trust

import (
	"errors"
	"fmt"
	"os"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/datadir"
)

// The cluster CA the member's certificates were issued from is saved
// next to them (datadir.Dir.CAFile).

// readCA returns the saved cluster CA, or nil if none is saved.
func readCA(d datadir.Dir) (*certs.Pair, error) {
	b, err := os.ReadFile(d.CAFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p, err := certs.ParseBundle(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.CAFile(), err)
	}
	return &p, nil
}

// writeCA saves ca as the member's cluster CA (datadir.Dir.CAFile).
func writeCA(d datadir.Dir, ca certs.Pair) error {
	if err := os.MkdirAll(d.TLSDir(), 0o700); err != nil {
		return err
	}
	p := d.CAFile()
	if err := os.WriteFile(p+".tmp", ca.Bundle(), 0o600); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}
