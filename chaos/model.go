// Package chaos records the history of a concurrent etcd client load and
// checks it for linearizability with porcupine: a register per key with
// put, get and compare-and-set (an etcd txn). Writes whose outcome is
// unknown (a timeout or an unavailable member after the request may have
// been sent) stay in the history as possibly applied, pending until the end.
// TestChaos (chaos_test.go) drives the load while it injects faults into a
// cluster on real Nomad and Consul agents.
package chaos

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is an operation on one key.
type Kind int

// The operations.
const (
	Get Kind = iota
	Put
	// CAS puts Value if the key holds Expect, else reads it (one txn).
	CAS
)

// Input is what a client asked.
type Input struct {
	Kind   Kind
	Key    string
	Value  string // Put, CAS
	Expect string // CAS; "" means the key is absent
}

// Output is what a client was told.
type Output struct {
	// Unknown: the call failed in a way that leaves its effect unknown.
	Unknown bool
	// Value is what a Get read, or what a failed CAS read ("" = absent).
	Value string
	// OK: a CAS succeeded.
	OK bool
}

// Model is the linearizable register-per-key specification, partitioned by
// key; the state of a partition is the key's value ("" = absent).
var Model = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(Input).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(string), input.(Input), output.(Output)
		switch in.Kind {
		case Get:
			return out.Unknown || out.Value == st, st
		case Put:
			return true, in.Value
		case CAS:
			if out.Unknown {
				// Pending to the end of the history: it applies wherever
				// it is placed if the key then holds Expect.
				if st == in.Expect {
					return true, in.Value
				}
				return true, st
			}
			if out.OK {
				return st == in.Expect, in.Value
			}
			return st != in.Expect && out.Value == st, st
		}
		return false, st
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(Input), output.(Output)
		res := ""
		switch {
		case out.Unknown:
			res = "?"
		case in.Kind == Get:
			res = fmt.Sprintf("%q", out.Value)
		case in.Kind == CAS && out.OK:
			res = "ok"
		case in.Kind == CAS:
			res = fmt.Sprintf("failed, read %q", out.Value)
		default:
			res = "ok"
		}
		switch in.Kind {
		case Get:
			return fmt.Sprintf("get(%s) -> %s", in.Key, res)
		case Put:
			return fmt.Sprintf("put(%s, %s) -> %s", in.Key, in.Value, res)
		}
		return fmt.Sprintf("cas(%s, %q -> %s) -> %s", in.Key, in.Expect, in.Value, res)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state.(string)) },
}

// History records operations from concurrent clients, with times relative
// to its start on the monotonic clock.
type History struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

// NewHistory starts an empty history.
func NewHistory() *History { return &History{start: time.Now()} }

// Now is the current history time; take it just before a call and just
// after it returns.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Add records one finished call. A Get whose result is unknown constrains
// nothing and is dropped; a write whose result is unknown is kept, pending
// to the end of the history (it may have been applied at any time after its
// call, or never).
func (h *History) Add(client int, in Input, out Output, call, ret int64) {
	if out.Unknown {
		if in.Kind == Get {
			return
		}
		ret = math.MaxInt64
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
}

// Operations returns a copy of the recorded operations.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// Stats counts the recorded operations by kind, and those pending.
func (h *History) Stats() (gets, puts, cases, pending int) {
	for _, op := range h.Operations() {
		switch op.Input.(Input).Kind {
		case Get:
			gets++
		case Put:
			puts++
		case CAS:
			cases++
		}
		if op.Output.(Output).Unknown {
			pending++
		}
	}
	return
}

// Check checks the history for linearizability within timeout. When it is
// not linearizable (or the check is inconclusive) and vizPath is not empty,
// the porcupine visualization is written there.
func (h *History) Check(timeout time.Duration, vizPath string) (porcupine.CheckResult, error) {
	res, info := porcupine.CheckOperationsVerbose(Model, h.Operations(), timeout)
	if res != porcupine.Ok && vizPath != "" {
		if err := porcupine.VisualizePath(Model, info, vizPath); err != nil {
			return res, fmt.Errorf("write visualization %s: %w", vizPath, err)
		}
	}
	return res, nil
}

// ReadBack reads every key once more through get and records each read as
// a Get of client: a write acknowledged early and lost later (the keys
// rotate, so nothing else reads it again) then contradicts the history.
// A read that fails is retried every pause until ctx ends; the error names
// the key no read answered.
func (h *History) ReadBack(ctx context.Context, client int, keys []string, pause time.Duration, get func(ctx context.Context, key string) (string, error)) error {
	for _, k := range keys {
		for {
			call := h.Now()
			v, err := get(ctx, k)
			ret := h.Now()
			if err == nil {
				h.Add(client, Input{Kind: Get, Key: k}, Output{Value: v}, call, ret)
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("read back %s: %w (last error: %v)", k, ctx.Err(), err)
			case <-time.After(pause):
			}
		}
	}
	return nil
}
