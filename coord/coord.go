// Package coord declares what members need from a coordinator: one lock that
// serializes decisions taken by a single member (seed, membership changes,
// recovery) and a cluster record written create-only and compare-and-set,
// fenced by the lock. Implementations live in sub-packages: coord/local
// (flock on a shared directory) and, later, coord/consul.
//
// Like Consul's own locks, a lock here prefers liveness: a holder can lose it
// without knowing at once. That is why every write of the record is fenced —
// a write made by a stale holder is refused — and why the record is the
// commit point of a seed, not the lock.
package coord

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Sentinel errors.
var (
	// ErrNoRecord: no cluster record exists.
	ErrNoRecord = errors.New("no cluster record")
	// ErrRecordExists: CreateRecord found a record already.
	ErrRecordExists = errors.New("cluster record already exists")
	// ErrConflict: the record changed since it was read.
	ErrConflict = errors.New("cluster record changed since it was read")
	// ErrLockLost: the lock passed to a write is no longer held.
	ErrLockLost = errors.New("coordination lock lost")
	// ErrNotStored: Load found no value under the key.
	ErrNotStored = errors.New("no value stored")
	// ErrBadRecord: the stored record is not one a coordinator wrote.
	ErrBadRecord = errors.New("malformed cluster record")
)

// Record is the committed truth about the current cluster incarnation:
// the planner's record, stored as its JSON (planner.Record documents each
// field). Index is the modify index a coordinator read it at;
// UpdateRecord compares it.
type Record = planner.Record

// NewToken returns a fresh random cluster token (Record.Token).
func NewToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// DecodeRecord decodes a stored record. The coordinator's store is shared
// with whoever holds a token on it, so a value no writer produces (not a
// JSON object, no token, epoch 0: "null" and "{}" would decode to a zero
// record) is refused with ErrBadRecord rather than read as a cluster of
// epoch 0. Unknown fields are ignored (a newer writer's).
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	if !bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("{")) {
		return Record{}, fmt.Errorf("not a JSON object: %w", ErrBadRecord)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrBadRecord, err)
	}
	if r.Token == "" || r.Epoch == 0 {
		return Record{}, fmt.Errorf("token %q, epoch %d (every record has a token and an epoch of at least 1): %w", r.Token, r.Epoch, ErrBadRecord)
	}
	return r, nil
}

// Lock is a held coordination lock.
type Lock interface {
	// Lost is closed when the lock is known to be lost.
	Lost() <-chan struct{}
	// Fence is the lock's fencing token: it grows with every acquisition.
	Fence() uint64
	// Unlock releases the lock. It is safe to call more than once.
	Unlock(ctx context.Context) error
}

// Coordinator is the lock and record store shared by all members of one
// cluster.
type Coordinator interface {
	// Lock blocks until the lock is held by holder or ctx ends.
	Lock(ctx context.Context, holder string) (Lock, error)
	// Record returns the cluster record, or ErrNoRecord.
	Record(ctx context.Context) (Record, error)
	// CreateRecord writes r if no record exists, else ErrRecordExists. It
	// fails with ErrLockLost if l is no longer held.
	CreateRecord(ctx context.Context, l Lock, r Record) (Record, error)
	// UpdateRecord replaces the record if its index still equals r.Index,
	// else ErrConflict; ErrLockLost if l is no longer held.
	UpdateRecord(ctx context.Context, l Lock, r Record) (Record, error)
	// LoadOrStore stores value under key unless one is stored, and returns
	// the stored value (used for the cluster CA, created once).
	LoadOrStore(ctx context.Context, key string, value []byte) ([]byte, error)
	// Load returns the value stored under key, or ErrNotStored. It only
	// reads: read-only commands use it (the cluster CA), so that they
	// never store anything and need no write permission.
	Load(ctx context.Context, key string) ([]byte, error)
	// Delete removes the value stored under key (LoadOrStore's); a key
	// with no value is not an error. Members use it to retire the
	// plaintext cluster CA of earlier versions once it is sealed.
	Delete(ctx context.Context, key string) error
	// Pause returns the operator's pause, or ErrNotPaused.
	Pause(ctx context.Context) (Pause, error)
	// SetPause stores p, or with p nil removes the pause. It is an
	// operator's flag, not fenced by the lock: every member reads it
	// each loop and obeys it.
	SetPause(ctx context.Context, p *Pause) error
}

// ErrNotPaused: Pause found no pause.
var ErrNotPaused = errors.New("not paused")

// Pause is an operator's order to every member: no membership change, no
// recovery and no maintenance until it is removed. A member with data
// still starts it (Rejoin), and an operator's own recovery still proceeds.
type Pause struct {
	// By names who paused (user@host), Reason why; both informational.
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since"`
}

// String describes p for logs, /health and status.
func (p Pause) String() string {
	s := "paused by " + p.By + " since " + p.Since.UTC().Format(time.RFC3339)
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	return s
}
