package consul

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/etcd-nomad/etcd-nomad/coord"
)

// An idle member read the cluster record and the pause key with consistent
// reads every supervisor loop (1 s), and checked the stored CA twice a
// minute: 126 Consul requests a minute per member on an idle cluster
// (bench h.idle-api). A Watched view answers those reads from one blocking
// query on the cluster's prefix instead, while that query is known to be
// current, and falls back to the coordinator's consistent reads otherwise.
//
// How current a watched copy is: Consul answers a blocking query as soon as
// anything under the prefix changes, or after watchWait (plus up to a
// sixteenth of it, Consul's jitter) with nothing changed. While the query
// is answered in time, the copy lags the store by the time an answer takes
// to arrive, as a consistent read issued a moment earlier would. A query
// not answered by then (the agent cut off from the servers, a stuck
// connection) is abandoned and the copy counts as unknown from that moment:
// reads go to Consul again, and fail as they did before.
//
// Members still make every decision that acts from consistent reads (the
// task re-observes before acting); the view only serves observations that
// end in waiting, and the CA check.
const (
	// watchWait is the blocking query's wait time.
	watchWait = time.Minute
	// watchSlack is added to watchWait and Consul's jitter before an
	// unanswered query counts as stuck.
	watchSlack = 5 * time.Second
	// watchRetry paces queries after a failed one.
	watchRetry = time.Second
)

// Watched is a read-only view of the coordinator answered from the watch
// while it is current (see above); reads fall back to the coordinator's
// consistent reads otherwise. Its watch runs until ctx ends.
type Watched struct {
	c *Coordinator

	wait     time.Duration // the blocking query's wait time
	deadline time.Duration // how long an answer may take before the copy is unknown

	mu         sync.Mutex
	pairs      map[string]*api.KVPair // by key, relative to the prefix
	validUntil time.Time              // the copy is current until then
	now        func() time.Time
}

// Watch starts watching the cluster's prefix (one blocking query at a
// time) until ctx ends and returns the view that reads from it.
func (c *Coordinator) Watch(ctx context.Context) *Watched {
	return c.watch(ctx, watchWait, watchSlack)
}

func (c *Coordinator) watch(ctx context.Context, wait, slack time.Duration) *Watched {
	w := &Watched{c: c, now: time.Now, wait: wait, deadline: wait + wait/16 + slack}
	go w.run(ctx)
	return w
}

func (w *Watched) run(ctx context.Context) {
	kv := w.c.o.Client.KV()
	prefix := w.c.o.Prefix + "/"
	var index uint64
	for ctx.Err() == nil {
		qctx, cancel := context.WithTimeout(ctx, w.deadline)
		pairs, meta, err := kv.List(prefix, (&api.QueryOptions{WaitIndex: index, WaitTime: w.wait}).WithContext(qctx))
		cancel()
		if err != nil {
			w.invalidate()
			select {
			case <-ctx.Done():
			case <-time.After(watchRetry):
			}
			continue
		}
		switch {
		case meta.LastIndex < index:
			// Consul's index went back (its state was restored or
			// lost): read afresh, as Consul's documentation says.
			index = 0
		default:
			index = meta.LastIndex
		}
		vals := make(map[string]*api.KVPair, len(pairs))
		for _, p := range pairs {
			vals[strings.TrimPrefix(p.Key, prefix)] = p
		}
		w.mu.Lock()
		w.pairs = vals
		w.validUntil = w.now().Add(w.deadline)
		w.mu.Unlock()
		if index == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(watchRetry):
			}
		}
	}
	w.invalidate()
}

func (w *Watched) invalidate() {
	w.mu.Lock()
	w.pairs, w.validUntil = nil, time.Time{}
	w.mu.Unlock()
}

// get returns key's value (relative to the prefix) and whether it is
// stored, with current false when the copy cannot answer.
func (w *Watched) get(key string) (pair *api.KVPair, stored, current bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pairs == nil || !w.now().Before(w.validUntil) {
		return nil, false, false
	}
	pair, stored = w.pairs[key]
	return pair, stored, true
}

// Current reports whether reads are answered from the watch now.
func (w *Watched) Current() bool {
	_, _, cur := w.get("")
	return cur
}

// Record is Coordinator.Record answered from the watch.
func (w *Watched) Record(ctx context.Context) (coord.Record, error) {
	p, stored, cur := w.get("record")
	switch {
	case !cur:
		return w.c.Record(ctx)
	case !stored:
		return coord.Record{}, coord.ErrNoRecord
	}
	r, err := coord.DecodeRecord(p.Value)
	if err != nil {
		return coord.Record{}, fmt.Errorf("decode %s: %w", w.c.key("record"), err)
	}
	r.Index = p.ModifyIndex
	return r, nil
}

// Pause is Coordinator.Pause answered from the watch.
func (w *Watched) Pause(ctx context.Context) (coord.Pause, error) {
	kp, stored, cur := w.get("pause")
	switch {
	case !cur:
		return w.c.Pause(ctx)
	case !stored:
		return coord.Pause{}, coord.ErrNotPaused
	}
	var p coord.Pause
	if err := json.Unmarshal(kp.Value, &p); err != nil {
		return coord.Pause{}, fmt.Errorf("decode %s: %w", w.c.key("pause"), err)
	}
	return p, nil
}

// Load is Coordinator.Load answered from the watch.
func (w *Watched) Load(ctx context.Context, key string) ([]byte, error) {
	p, stored, cur := w.get("kv/" + key)
	switch {
	case !cur:
		return w.c.Load(ctx, key)
	case !stored:
		return nil, fmt.Errorf("%s: %w", w.c.key("kv/"+key), coord.ErrNotStored)
	}
	return p.Value, nil
}

// LoadOrStore returns the value the watch holds under key, and only when
// it holds none (or cannot answer) stores value as Coordinator.LoadOrStore
// does: a member offering the CA it holds writes nothing while the
// coordinator holds one.
func (w *Watched) LoadOrStore(ctx context.Context, key string, value []byte) ([]byte, error) {
	if p, stored, cur := w.get("kv/" + key); cur && stored {
		return p.Value, nil
	}
	return w.c.LoadOrStore(ctx, key, value)
}
