// Package local is a coordinator for members on one machine: an flock on a
// file in a shared directory is the lock, and JSON files beside it hold the
// record. It is for `etcd-nomad local` and tests, never for members on
// different machines.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
)

// pollInterval is how often Lock retries a held flock. Short, because
// contention only happens at seed and membership changes.
const pollInterval = 20 * time.Millisecond

// Coordinator keeps its state in Dir.
type Coordinator struct {
	Dir string
}

var _ coord.Coordinator = (*Coordinator)(nil)

// New returns a coordinator on dir, creating it (0700) if needed.
func New(dir string) (*Coordinator, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create coordination dir: %w", err)
	}
	return &Coordinator{Dir: dir}, nil
}

type lock struct {
	c     *Coordinator
	f     *os.File
	fence uint64
	lost  chan struct{}
	once  sync.Once
}

func (l *lock) Lost() <-chan struct{} { return l.lost }
func (l *lock) Fence() uint64         { return l.fence }

func (l *lock) Unlock(context.Context) error {
	var err error
	l.once.Do(func() {
		err = l.f.Close() // closing the descriptor releases the flock
	})
	return err
}

// Lock takes the flock, polling until ctx ends.
func (c *Coordinator) Lock(ctx context.Context, holder string) (coord.Lock, error) {
	f, err := os.OpenFile(filepath.Join(c.Dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("flock: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for lock: %w", ctx.Err())
		case <-t.C:
		}
	}
	fence, err := readUint(filepath.Join(c.Dir, "fence"))
	if err == nil {
		fence++
		err = writeAtomic(filepath.Join(c.Dir, "fence"), []byte(strconv.FormatUint(fence, 10)+" "+holder+"\n"))
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("bump fence: %w", err)
	}
	return &lock{c: c, f: f, fence: fence, lost: make(chan struct{})}, nil
}

// held checks that l is this coordinator's lock and still the newest holder.
func (c *Coordinator) held(l coord.Lock) error {
	ll, ok := l.(*lock)
	if !ok || ll.c.Dir != c.Dir {
		return fmt.Errorf("lock from another coordinator: %w", coord.ErrLockLost)
	}
	cur, err := readUint(filepath.Join(c.Dir, "fence"))
	if err != nil {
		return fmt.Errorf("read fence: %w", err)
	}
	if cur != ll.fence {
		return fmt.Errorf("fence %d superseded by %d: %w", ll.fence, cur, coord.ErrLockLost)
	}
	return nil
}

func (c *Coordinator) recordPath() string { return filepath.Join(c.Dir, "record.json") }

// Record reads the record.
func (c *Coordinator) Record(context.Context) (coord.Record, error) {
	b, err := os.ReadFile(c.recordPath())
	if errors.Is(err, os.ErrNotExist) {
		return coord.Record{}, coord.ErrNoRecord
	}
	if err != nil {
		return coord.Record{}, fmt.Errorf("read record: %w", err)
	}
	r, err := coord.DecodeRecord(b)
	if err != nil {
		return coord.Record{}, fmt.Errorf("decode record %s: %w", c.recordPath(), err)
	}
	return r, nil
}

// CreateRecord writes r if no record exists.
func (c *Coordinator) CreateRecord(ctx context.Context, l coord.Lock, r coord.Record) (coord.Record, error) {
	if err := c.held(l); err != nil {
		return coord.Record{}, err
	}
	if _, err := c.Record(ctx); err == nil {
		return coord.Record{}, coord.ErrRecordExists
	} else if !errors.Is(err, coord.ErrNoRecord) {
		return coord.Record{}, err
	}
	r.Index = l.Fence()<<20 | 1
	return r, c.write(r)
}

// UpdateRecord replaces the record if unchanged since read.
func (c *Coordinator) UpdateRecord(ctx context.Context, l coord.Lock, r coord.Record) (coord.Record, error) {
	if err := c.held(l); err != nil {
		return coord.Record{}, err
	}
	cur, err := c.Record(ctx)
	if err != nil {
		return coord.Record{}, err
	}
	if cur.Index != r.Index {
		return coord.Record{}, fmt.Errorf("index %d, want %d: %w", cur.Index, r.Index, coord.ErrConflict)
	}
	r.Index = max(cur.Index+1, l.Fence()<<20|1)
	return r, c.write(r)
}

func (c *Coordinator) write(r coord.Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(c.recordPath(), b)
}

// Load returns the value stored under key, or coord.ErrNotStored.
func (c *Coordinator) Load(_ context.Context, key string) ([]byte, error) {
	path, err := c.kvPath(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", key, coord.ErrNotStored)
	}
	return b, err
}

// LoadOrStore stores value under key unless a value is stored. The link(2)
// of a complete temporary file makes the create atomic.
func (c *Coordinator) LoadOrStore(_ context.Context, key string, value []byte) ([]byte, error) {
	path, err := c.kvPath(key)
	if err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(path); err == nil {
		return b, nil
	}
	tmp, err := os.CreateTemp(c.Dir, ".kv-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(value); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("store %s: %w", key, err)
	}
	return os.ReadFile(path)
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, nil
	}
	return strconv.ParseUint(f[0], 10, 64)
}

func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Store overwrites the value Load reads under key (the snapshot lease);
// no fencing: callers that need exclusion hold the lock around it.
func (c *Coordinator) Store(ctx context.Context, key string, value []byte) error {
	return c.Put(ctx, key, value)
}

// Delete removes the value stored under key; an absent key is no error.
func (c *Coordinator) Delete(_ context.Context, key string) error {
	path, err := c.kvPath(key)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// Put writes an informational key (the cluster summary); no fencing.
func (c *Coordinator) Put(_ context.Context, key string, value []byte) error {
	path, err := c.kvPath(key)
	if err != nil {
		return err
	}
	return writeAtomic(path, value)
}

// Get reads an informational key Put wrote (the cluster summary), or
// coord.ErrNotStored.
func (c *Coordinator) Get(ctx context.Context, key string) ([]byte, error) {
	return c.Load(ctx, key)
}

// kvPath is the file of key, which must not name another directory.
func (c *Coordinator) kvPath(key string) (string, error) {
	if strings.ContainsAny(key, "/\\") || key == "" {
		return "", fmt.Errorf("invalid key %q", key)
	}
	return filepath.Join(c.Dir, "kv-"+key), nil
}

func (c *Coordinator) pausePath() string { return filepath.Join(c.Dir, "pause.json") }

// Pause reads the operator's pause (pause.json).
func (c *Coordinator) Pause(context.Context) (coord.Pause, error) {
	b, err := os.ReadFile(c.pausePath())
	if errors.Is(err, os.ErrNotExist) {
		return coord.Pause{}, coord.ErrNotPaused
	}
	if err != nil {
		return coord.Pause{}, fmt.Errorf("read pause: %w", err)
	}
	var p coord.Pause
	if err := json.Unmarshal(b, &p); err != nil {
		return coord.Pause{}, fmt.Errorf("decode %s: %w", c.pausePath(), err)
	}
	return p, nil
}

// SetPause writes the pause, or removes it when p is nil.
func (c *Coordinator) SetPause(_ context.Context, p *coord.Pause) error {
	if p == nil {
		if err := os.Remove(c.pausePath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove pause: %w", err)
		}
		return nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return writeAtomic(c.pausePath(), b)
}
