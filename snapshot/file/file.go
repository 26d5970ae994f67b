// Package file is a snapshot store in a local (or mounted) directory:
// OBJECT and OBJECT.meta.json, files 0600 in a 0700 directory. An object
// is written to a temporary file and renamed, then its metadata the same
// way, so a listing never shows a partial snapshot. A store belongs to
// one cluster: several clusters may share a directory (one mounted path
// in every definition) and never list, open, prune or restore each
// other's snapshots.
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
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

const metaSuffix = ".meta.json"

// Store keeps the snapshots of Cluster in Dir.
type Store struct {
	Dir     string
	Cluster string
	// Log, optional, receives the metadata List could not read (listed
	// refused by name, or skipped), once per version of the file.
	// Defaults to nowhere.
	Log hclog.Logger

	mu       sync.Mutex
	reported map[string]fileVersion // skipped metadata already logged

	// afterReadDir, in tests, runs between List's ReadDir and its reads
	// of the metadata: a deletion there (retention's) is what List meets.
	afterReadDir func()
}

// fileVersion tells one version of a file from another (a skipped
// metadata file rewritten is reported again).
type fileVersion struct {
	size int64
	mod  time.Time
}

var _ snapshot.Store = (*Store)(nil)

// New returns the store of cluster on dir, creating the directory.
func New(dir, cluster string) (*Store, error) {
	if cluster == "" {
		return nil, errors.New("file snapshot store: a cluster name is required")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create snapshot dir: %w", err)
	}
	return &Store{Dir: dir, Cluster: cluster}, nil
}

// own refuses a name that is not one of this store's cluster's objects.
// It is reported as absent: to this store, it is.
func (s *Store) own(name string) error {
	if err := snapshot.ValidName(name); err != nil {
		return err
	}
	if !snapshot.OfCluster(name, s.Cluster) {
		return fmt.Errorf("snapshot %s is not one of cluster %s's: %w", name, s.Cluster, os.ErrNotExist)
	}
	return nil
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
	if err := s.own(name); err != nil {
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
	if err := s.own(m.Name); err != nil {
		return err
	}
	if m.Cluster != s.Cluster {
		return fmt.Errorf("metadata of %s names cluster %q, the store is cluster %s's", m.Name, m.Cluster, s.Cluster)
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

// errNotRegular reports a directory, FIFO, device or socket where a
// file of the store should be: nothing a member writes.
var errNotRegular = errors.New("not a regular file")

// openRegular opens path for reading, refusing what is not a regular
// file: a FIFO a store writer planted blocked os.Open (and with it every
// listing, which has no context to give up on) until a writer came.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%s)", path, errNotRegular, info.Mode().Type())
	}
	return f, nil
}

// meta reads the metadata of name, at most snapshot.MaxMetaSize of it:
// undecodable, larger, or naming another object or cluster is
// snapshot.ErrCorruptMeta (the S3 store checks the name as well).
func (s *Store) meta(name string) (snapshot.Meta, error) {
	f, err := openRegular(filepath.Join(s.Dir, name+metaSuffix))
	if err != nil {
		return snapshot.Meta{}, err
	}
	defer f.Close()
	m, err := snapshot.DecodeMeta(f)
	if err != nil {
		return m, fmt.Errorf("metadata of %s: %w", name, err)
	}
	if m.Name != name {
		return snapshot.Meta{}, fmt.Errorf("metadata of %s names object %.80q: %w", name, m.Name, snapshot.ErrCorruptMeta)
	}
	if m.Cluster != s.Cluster {
		return snapshot.Meta{}, fmt.Errorf("metadata of %s names cluster %.80q, the store is cluster %s's: %w", name, m.Cluster, s.Cluster, snapshot.ErrCorruptMeta)
	}
	return m, nil
}

// Open opens an object.
func (s *Store) Open(_ context.Context, name string) (io.ReadCloser, snapshot.Meta, error) {
	if err := s.own(name); err != nil {
		return nil, snapshot.Meta{}, err
	}
	m, err := s.meta(name)
	if err != nil {
		return nil, m, err
	}
	f, err := openRegular(filepath.Join(s.Dir, name))
	if err != nil {
		return nil, m, err
	}
	return f, m, nil
}

// List returns every object of the cluster with metadata, oldest first.
// Other clusters' snapshots in the same directory are not listed, so
// retention never prunes them and "latest" is never theirs. One bad entry
// neither fails the listing (a failing List holds every seed, recovery
// and save) nor hides its object: metadata deleted since the directory
// was read (retention, another member's) is skipped; metadata that is
// corrupt, oversize, unreadable (permissions, a symlink) or names another
// object or cluster is listed as what its file name encodes
// (snapshot.NameMeta), which authentication refuses, and reported to
// Log; a directory, FIFO or the like under a metadata name, which no
// member writes and which only a writer able to delete the genuine file
// could put there, is skipped and reported. Only the directory failing,
// or a read failing otherwise, fails List.
func (s *Store) List(context.Context) ([]snapshot.Meta, error) {
	ents, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, err
	}
	if s.afterReadDir != nil {
		s.afterReadDir()
	}
	var out []snapshot.Meta
	bad := map[string]skippedMeta{}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), metaSuffix)
		if !ok || !snapshot.OfCluster(name, s.Cluster) {
			continue
		}
		if e.Type()&os.ModeSymlink != 0 {
			// Never followed (it could name any file the member reads):
			// listed by its name, refused, as unreadable metadata is.
			// Skipping it hid its object.
			why := fmt.Errorf("%w: a symbolic link, not followed", snapshot.ErrCorruptMeta)
			nm, ok := snapshot.NameMeta(name, s.Cluster, why)
			bad[e.Name()] = skippedMeta{versionOf(e), why, ok}
			if ok {
				out = append(out, nm)
			}
			continue
		}
		if !e.Type().IsRegular() {
			bad[e.Name()] = skippedMeta{versionOf(e), fmt.Errorf("%w (%s)", errNotRegular, e.Type()), false}
			continue
		}
		m, err := s.meta(name)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue // deleted since ReadDir
		case errors.Is(err, errNotRegular):
			bad[e.Name()] = skippedMeta{versionOf(e), err, false}
			continue
		case errors.Is(err, snapshot.ErrCorruptMeta), errors.Is(err, os.ErrPermission), errors.Is(err, syscall.ELOOP):
			nm, ok := snapshot.NameMeta(name, s.Cluster, err)
			bad[e.Name()] = skippedMeta{versionOf(e), err, ok}
			if ok {
				out = append(out, nm)
			}
			continue
		case err != nil:
			return nil, err
		}
		out = append(out, m)
	}
	s.report(bad)
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

type skippedMeta struct {
	v   fileVersion
	why error
	// listed: the object was listed by its name, refused; else skipped.
	listed bool
}

func versionOf(e os.DirEntry) fileVersion {
	info, err := e.Info()
	if err != nil {
		return fileVersion{}
	}
	return fileVersion{size: info.Size(), mod: info.ModTime()}
}

// report logs the metadata files a listing could not read, each once per
// version (a member lists every loop), and forgets those no longer there.
func (s *Store) report(bad map[string]skippedMeta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string]fileVersion, len(bad))
	for name, b := range bad {
		if v, ok := s.reported[name]; (!ok || v != b.v) && s.Log != nil {
			msg := "snapshot listing: skipping metadata that is no regular file or names no object of the cluster"
			if b.listed {
				msg = "snapshot listing: corrupt metadata, its object listed by name and refused"
			}
			s.Log.Warn(msg, "path", filepath.Join(s.Dir, name), "error", b.why)
		}
		next[name] = b.v
	}
	s.reported = next
}

// Delete removes the metadata first (the object is then invisible), then
// the object.
func (s *Store) Delete(_ context.Context, name string) error {
	if err := s.own(name); err != nil {
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
