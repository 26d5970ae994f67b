// Package consul is the coordinator for members on many machines: a Consul
// session lock serializes decisions, and the cluster record lives in Consul
// KV, written by transactions that check the lock holder's session
// (check-session) and the record's index (cas).
//
// Consul's locks prefer liveness over safety: a session can be invalidated
// (TTL missed, node lost) while its holder still believes it holds the lock.
// Every write here is therefore fenced inside the same transaction by
// check-session on the lock key: a stale holder's write fails with
// coord.ErrLockLost, whatever it believes. The record's create-only write is
// the commit point of a seed.
package consul

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/etcd-nomad/etcd-nomad/coord"
)

// Defaults.
const (
	// DefaultSessionTTL: Consul's minimum is 10s. A holder that stops
	// renewing loses the lock after at most twice the TTL (Consul's grace).
	DefaultSessionTTL = 15 * time.Second
	// DefaultLockDelay is short because every write is fenced; Consul's 15s
	// default would only slow recovery after a holder dies.
	DefaultLockDelay = time.Second
	// acquirePoll is the retry interval while the lock is held elsewhere,
	// on top of blocking queries that return as soon as the key changes.
	acquirePoll = 250 * time.Millisecond
)

// Options configure a Coordinator.
type Options struct {
	// Client is a Consul API client (address and token from
	// CONSUL_HTTP_ADDR / CONSUL_HTTP_TOKEN via api.DefaultConfig).
	Client *api.Client
	// Prefix is the KV prefix of this cluster, e.g. "etcd-nomad/main".
	Prefix string
	// SessionTTL, optional, defaults to DefaultSessionTTL.
	SessionTTL time.Duration
	// LockDelay, optional, defaults to DefaultLockDelay.
	LockDelay time.Duration
	// Addr and TokenSet, optional, describe the client in errors when
	// Consul's ACLs refuse a request (EnvClient fills them).
	Addr     string
	TokenSet bool
}

// Coordinator implements coord.Coordinator on Consul.
type Coordinator struct {
	o Options

	mu  sync.Mutex
	own map[string]bool // sessions this process created and still holds
}

var _ coord.Coordinator = (*Coordinator)(nil)

// New returns a coordinator.
func New(o Options) (*Coordinator, error) {
	if o.Client == nil || o.Prefix == "" {
		return nil, errors.New("consul coordinator: client and prefix are required")
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.LockDelay == 0 {
		o.LockDelay = DefaultLockDelay
	}
	o.Prefix = strings.TrimSuffix(o.Prefix, "/")
	return &Coordinator{o: o, own: map[string]bool{}}, nil
}

func (c *Coordinator) key(name string) string { return c.o.Prefix + "/" + name }

type lock struct {
	c       *Coordinator
	session string
	fence   uint64
	lost    chan struct{}
	done    chan struct{}
	once    sync.Once
	lostMu  sync.Once
}

func (l *lock) Lost() <-chan struct{} { return l.lost }
func (l *lock) Fence() uint64         { return l.fence }
func (l *lock) markLost()             { l.lostMu.Do(func() { close(l.lost) }) }

// Unlock releases the key and destroys the session.
func (l *lock) Unlock(ctx context.Context) error {
	var err error
	l.once.Do(func() {
		close(l.done)
		q := (&api.WriteOptions{}).WithContext(ctx)
		_, _, rerr := l.c.o.Client.KV().Release(&api.KVPair{Key: l.c.key("lock"), Session: l.session}, q)
		_, derr := l.c.o.Client.Session().Destroy(l.session, q)
		err = errors.Join(rerr, derr)
		l.c.mu.Lock()
		delete(l.c.own, l.session)
		l.c.mu.Unlock()
		l.markLost()
	})
	return err
}

// Lock creates a TTL session (not tied to the node's serfHealth check, so a
// flapping agent does not drop it) and acquires the lock key with it. A
// lock held under the same holder name by a session another process created
// is taken back at once: that process was this member's previous life.
func (c *Coordinator) Lock(ctx context.Context, holder string) (coord.Lock, error) {
	se := &api.SessionEntry{
		Name:      "etcd-nomad lock " + c.o.Prefix + " " + holder,
		TTL:       c.o.SessionTTL.String(),
		LockDelay: c.o.LockDelay,
		Behavior:  api.SessionBehaviorRelease,
	}
	id, _, err := c.o.Client.Session().CreateNoChecks(se, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("create consul session: %w", c.denied("create a session", err))
	}
	c.mu.Lock()
	c.own[id] = true
	c.mu.Unlock()
	l := &lock{c: c, session: id, lost: make(chan struct{}), done: make(chan struct{})}
	go func() {
		// RenewPeriodic returns when the session is invalidated or done
		// is closed; either way the lock is gone.
		_ = c.o.Client.Session().RenewPeriodic(se.TTL, id, nil, l.done)
		l.markLost()
	}()
	kv := c.o.Client.KV()
	var waitIndex uint64
	for {
		ok, _, err := kv.Acquire(&api.KVPair{Key: c.key("lock"), Value: []byte(holder), Session: id}, (&api.WriteOptions{}).WithContext(ctx))
		if err != nil {
			_ = l.Unlock(context.Background())
			return nil, fmt.Errorf("acquire %s: %w", c.key("lock"), c.denied("write "+c.key("lock"), err))
		}
		if ok {
			break
		}
		// Held elsewhere (or in lock-delay): wait for the key to change.
		q := (&api.QueryOptions{WaitIndex: waitIndex, WaitTime: 5 * time.Second}).WithContext(ctx)
		pair, meta, err := kv.Get(c.key("lock"), q)
		if ctx.Err() != nil {
			_ = l.Unlock(context.Background())
			return nil, fmt.Errorf("wait for lock: %w", ctx.Err())
		}
		if err == nil {
			waitIndex = meta.LastIndex
			if pair != nil && pair.Session != "" && string(pair.Value) == holder && !c.owns(pair.Session) {
				// Held under this holder's name by a session this process
				// did not create: a previous process of this same member
				// that died holding it (a member's name belongs to one
				// process at a time).
				// Waiting out its TTL would stall a restarted seeder or
				// recovery for up to twice the TTL; its writes are fenced
				// by session, so ending that session is safe.
				if _, err := c.o.Client.Session().Destroy(pair.Session, (&api.WriteOptions{}).WithContext(ctx)); err == nil {
					waitIndex = 0
					continue
				}
			}
			if pair == nil || pair.Session == "" {
				waitIndex = 0 // free (maybe in lock-delay): poll
				select {
				case <-ctx.Done():
				case <-time.After(acquirePoll):
				}
			}
		}
	}
	pair, _, err := kv.Get(c.key("lock"), (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil || pair == nil || pair.Session != id {
		_ = l.Unlock(context.Background())
		return nil, fmt.Errorf("read lock after acquire: %w", errors.Join(err, coord.ErrLockLost))
	}
	l.fence = pair.ModifyIndex
	go l.watch(pair.ModifyIndex)
	return l, nil
}

// owns tells whether this process created session id and still holds it.
func (c *Coordinator) owns(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.own[id]
}

// watch closes lost when the lock key no longer names this session.
func (l *lock) watch(index uint64) {
	kv := l.c.o.Client.KV()
	for {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-l.done:
			case <-ctx.Done():
			}
			cancel()
		}()
		pair, meta, err := kv.Get(l.c.key("lock"), (&api.QueryOptions{WaitIndex: index, WaitTime: time.Minute}).WithContext(ctx))
		cancel()
		select {
		case <-l.done:
			return
		default:
		}
		if err != nil {
			time.Sleep(acquirePoll)
			continue
		}
		if pair == nil || pair.Session != l.session {
			l.markLost()
			return
		}
		index = meta.LastIndex
	}
}

func (c *Coordinator) session(l coord.Lock) (string, error) {
	ll, ok := l.(*lock)
	if !ok || ll.c != c {
		return "", fmt.Errorf("lock from another coordinator: %w", coord.ErrLockLost)
	}
	select {
	case <-ll.lost:
		return "", coord.ErrLockLost
	default:
	}
	return ll.session, nil
}

// Record reads the record with a consistent read.
func (c *Coordinator) Record(ctx context.Context) (coord.Record, error) {
	pair, _, err := c.o.Client.KV().Get(c.key("record"), (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return coord.Record{}, fmt.Errorf("read %s: %w", c.key("record"), c.denied("read "+c.key("record"), err))
	}
	if pair == nil {
		return coord.Record{}, coord.ErrNoRecord
	}
	r, err := coord.DecodeRecord(pair.Value)
	if err != nil {
		return coord.Record{}, fmt.Errorf("decode %s: %w", c.key("record"), err)
	}
	r.Index = pair.ModifyIndex
	return r, nil
}

// CreateRecord writes r if no record exists, in one transaction with a
// check that l's session still holds the lock.
func (c *Coordinator) CreateRecord(ctx context.Context, l coord.Lock, r coord.Record) (coord.Record, error) {
	return c.writeRecord(ctx, l, r, 0, coord.ErrRecordExists)
}

// UpdateRecord replaces the record if its index is still r.Index.
func (c *Coordinator) UpdateRecord(ctx context.Context, l coord.Lock, r coord.Record) (coord.Record, error) {
	if r.Index == 0 {
		return coord.Record{}, fmt.Errorf("update without an index: %w", coord.ErrConflict)
	}
	return c.writeRecord(ctx, l, r, r.Index, coord.ErrConflict)
}

func (c *Coordinator) writeRecord(ctx context.Context, l coord.Lock, r coord.Record, index uint64, casErr error) (coord.Record, error) {
	sid, err := c.session(l)
	if err != nil {
		return coord.Record{}, err
	}
	r.Index = 0
	b, err := json.Marshal(r)
	if err != nil {
		return coord.Record{}, err
	}
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: c.key("lock"), Session: sid}},
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: c.key("record"), Value: b, Index: index}},
	}
	ok, resp, _, err := c.o.Client.Txn().Txn(ops, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return coord.Record{}, fmt.Errorf("record transaction: %w", c.denied("write "+c.key("record"), err))
	}
	if !ok {
		for _, e := range resp.Errors {
			if e.OpIndex == 0 {
				return coord.Record{}, fmt.Errorf("fence check failed (%s): %w", e.What, coord.ErrLockLost)
			}
		}
		return coord.Record{}, casErr
	}
	for _, res := range resp.Results {
		if res.KV != nil && res.KV.Key == c.key("record") {
			r.Index = res.KV.ModifyIndex
		}
	}
	return r, nil
}

// LoadOrStore stores value under key unless one is stored (KV cas with
// index 0), and returns the stored value.
func (c *Coordinator) LoadOrStore(ctx context.Context, key string, value []byte) ([]byte, error) {
	kv := c.o.Client.KV()
	k := c.key("kv/" + key)
	ok, _, err := kv.CAS(&api.KVPair{Key: k, Value: value}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", k, c.denied("write "+k, err))
	}
	if ok {
		return value, nil
	}
	pair, _, err := kv.Get(k, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", k, c.denied("read "+k, err))
	}
	if pair == nil {
		return nil, fmt.Errorf("read %s: vanished after a failed create", k)
	}
	return pair.Value, nil
}

// Load returns the value stored under key, or coord.ErrNotStored. It is a
// consistent read: a value stored a moment ago by another member is seen.
// It needs key read permission only.
func (c *Coordinator) Load(ctx context.Context, key string) ([]byte, error) {
	return c.read(ctx, c.key("kv/"+key))
}

// read is a consistent read of the full key k, or coord.ErrNotStored.
func (c *Coordinator) read(ctx context.Context, k string) ([]byte, error) {
	pair, _, err := c.o.Client.KV().Get(k, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", k, c.deniedRead("read "+k, err))
	}
	if pair == nil {
		return nil, fmt.Errorf("%s: %w", k, coord.ErrNotStored)
	}
	return pair.Value, nil
}

// Store overwrites the value Load reads under key (the snapshot lease);
// no fencing: callers that need exclusion hold the lock around it.
func (c *Coordinator) Store(ctx context.Context, key string, value []byte) error {
	k := c.key("kv/" + key)
	_, err := c.o.Client.KV().Put(&api.KVPair{Key: k, Value: value}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("write %s: %w", k, c.denied("write "+k, err))
	}
	return nil
}

// Delete removes the value stored under key; an absent key is no error.
func (c *Coordinator) Delete(ctx context.Context, key string) error {
	k := c.key("kv/" + key)
	if _, err := c.o.Client.KV().Delete(k, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("delete %s: %w", k, c.denied("write "+k, err))
	}
	return nil
}

// Put writes an informational key (the cluster summary); no fencing.
func (c *Coordinator) Put(ctx context.Context, key string, value []byte) error {
	_, err := c.o.Client.KV().Put(&api.KVPair{Key: c.key(key), Value: value}, (&api.WriteOptions{}).WithContext(ctx))
	return c.denied("write "+c.key(key), err)
}

// Get reads an informational key Put wrote (the cluster summary), or
// coord.ErrNotStored. A consistent read; key read permission only.
func (c *Coordinator) Get(ctx context.Context, key string) ([]byte, error) {
	return c.read(ctx, c.key(key))
}

// Pause reads the operator's pause (key "pause"), consistently.
func (c *Coordinator) Pause(ctx context.Context) (coord.Pause, error) {
	k := c.key("pause")
	pair, _, err := c.o.Client.KV().Get(k, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return coord.Pause{}, fmt.Errorf("read %s: %w", k, c.deniedRead("read "+k, err))
	}
	if pair == nil {
		return coord.Pause{}, coord.ErrNotPaused
	}
	var p coord.Pause
	if err := json.Unmarshal(pair.Value, &p); err != nil {
		return coord.Pause{}, fmt.Errorf("decode %s: %w", k, err)
	}
	return p, nil
}

// SetPause writes the pause, or deletes it when p is nil.
func (c *Coordinator) SetPause(ctx context.Context, p *coord.Pause) error {
	k := c.key("pause")
	q := (&api.WriteOptions{}).WithContext(ctx)
	if p == nil {
		_, err := c.o.Client.KV().Delete(k, q)
		return c.denied("delete "+k, err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = c.o.Client.KV().Put(&api.KVPair{Key: k, Value: b}, q)
	return c.denied("write "+k, err)
}
