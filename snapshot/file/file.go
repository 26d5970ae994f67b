// Package file is a snapshot store in a local (or mounted) directory:
// OBJECT and OBJECT.meta.json, files 0600 in a 0700 directory. An object
// is written to a temporary file and renamed, then its metadata the same
// way, so a listing never shows a partial snapshot.
package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

const metaSuffix = ".meta.json"

// Store keeps snapshots in Dir.
type Store struct {
	Dir string
}

var _ snapshot.Store = (*Store)(nil)

// New returns a store on dir, creating it.
func New(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create snapshot dir: %w", err)
	}
	return &Store{Dir: dir}, nil
}

func writeAtomic(path string, r io.Reader) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".partial-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, r)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	return n, os.Rename(tmp.Name(), path)
}

// Put writes the object.
func (s *Store) Put(_ context.Context, name string, r io.Reader) (int64, error) {
	if err := snapshot.ValidName(name); err != nil {
		return 0, err
	}
	n, err := writeAtomic(filepath.Join(s.Dir, name), r)
	if err != nil {
		return n, fmt.Errorf("write %s: %w", name, err)
	}
	return n, nil
}

// PutMeta writes the metadata, making the object visible.
func (s *Store) PutMeta(_ context.Context, m snapshot.Meta) error {
	if err := snapshot.ValidName(m.Name); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if _, err := writeAtomic(filepath.Join(s.Dir, m.Name+metaSuffix), strings.NewReader(string(b))); err != nil {
		return fmt.Errorf("write metadata of %s: %w", m.Name, err)
	}
	return nil
}

func (s *Store) meta(name string) (snapshot.Meta, error) {
	var m snapshot.Meta
	b, err := os.ReadFile(filepath.Join(s.Dir, name+metaSuffix))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode metadata of %s: %w", name, err)
	}
	return m, nil
}

// Open opens an object.
func (s *Store) Open(_ context.Context, name string) (io.ReadCloser, snapshot.Meta, error) {
	if err := snapshot.ValidName(name); err != nil {
		return nil, snapshot.Meta{}, err
	}
	m, err := s.meta(name)
	if err != nil {
		return nil, m, err
	}
	f, err := os.Open(filepath.Join(s.Dir, name))
	return f, m, err
}

// List returns every object with metadata, oldest first.
func (s *Store) List(context.Context) ([]snapshot.Meta, error) {
	ents, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, err
	}
	var out []snapshot.Meta
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), metaSuffix)
		if !ok {
			continue
		}
		m, err := s.meta(name)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Delete removes the metadata first (the object is then invisible), then
// the object.
func (s *Store) Delete(_ context.Context, name string) error {
	if err := snapshot.ValidName(name); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(s.Dir, name+metaSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Remove(filepath.Join(s.Dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
