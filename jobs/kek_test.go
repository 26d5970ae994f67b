package jobs

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/certs"
)

// memVars is an in-memory Nomad variable store with Nomad's check-and-set
// semantics (a create checks index 0, an update the index read), for the
// pure logic of the members' key; the real one is exercised by e2e
// TestReadmeNomadPathComesUpWithTheCASealed.
type memVars struct {
	mu     sync.Mutex
	vars   map[string]*api.Variable
	index  uint64
	writes int
	deny   bool
	// hold makes the first hold reads wait, each with what it read,
	// until all of them have read: members that all find no key.
	hold int
	gate chan struct{}
}

func (m *memVars) Peek(path string, _ *api.QueryOptions) (*api.Variable, *api.QueryMeta, error) {
	m.mu.Lock()
	var c *api.Variable
	if v, ok := m.vars[path]; ok {
		c = new(*v)
		c.Items = maps.Clone(v.Items)
	}
	wait := m.gate
	if m.hold > 0 {
		if m.hold--; m.hold == 0 {
			close(m.gate)
		}
	} else {
		wait = nil
	}
	m.mu.Unlock()
	if wait != nil {
		<-wait
	}
	return c, nil, nil
}

func (m *memVars) write(v *api.Variable, check uint64) (*api.Variable, *api.WriteMeta, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.deny {
		return nil, nil, errors.New("Unexpected response code: 403 (Permission denied)")
	}
	var cur uint64
	if old, ok := m.vars[v.Path]; ok {
		cur = old.ModifyIndex
	}
	if cur != check {
		return nil, nil, api.ErrCASConflict{CheckIndex: check, Conflict: &api.Variable{ModifyIndex: cur}}
	}
	m.index++
	m.writes++
	c := *v
	c.Items = maps.Clone(v.Items)
	c.ModifyIndex = m.index
	if m.vars == nil {
		m.vars = map[string]*api.Variable{}
	}
	m.vars[v.Path] = &c
	return &c, nil, nil
}

func (m *memVars) CheckedCreate(v *api.Variable, _ *api.WriteOptions) (*api.Variable, *api.WriteMeta, error) {
	return m.write(v, 0)
}

func (m *memVars) CheckedUpdate(v *api.Variable, _ *api.WriteOptions) (*api.Variable, *api.WriteMeta, error) {
	return m.write(v, v.ModifyIndex)
}

func sealed(b bool) func(context.Context) (bool, error) {
	return func(context.Context) (bool, error) { return b, nil }
}

func same(err error) error { return err }

func TestDecideKEK(t *testing.T) {
	for _, tc := range []struct {
		held   string
		sealed bool
		want   kekStep
	}{
		{"", false, kekCreate},
		{"", true, kekRefuse},
		{"k", false, kekUse},
		{"k", true, kekUse},
	} {
		if got := decideKEK(tc.held, tc.sealed); got != tc.want {
			t.Errorf("decideKEK(%q, sealed=%v) = %v, want %v", tc.held, tc.sealed, got, tc.want)
		}
	}
}

// Members that all start without a key, at once, and all find none, end
// with one key: the variable's, written by exactly one of them.
func TestRacingMembersEndWithOneKEK(t *testing.T) {
	const n = 8
	vars := &memVars{hold: n, gate: make(chan struct{})}
	keys := make([]string, n)
	created := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			keys[i], created[i], errs[i] = memberCAKEK(context.Background(), vars, same, "etcd", "", sealed(false))
		})
	}
	wg.Wait()
	winners := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("member %d: %v", i, errs[i])
		}
		if keys[i] != keys[0] {
			t.Fatalf("member %d uses another key than member 0", i)
		}
		if created[i] {
			winners++
		}
	}
	if winners != 1 || vars.writes != 1 {
		t.Fatalf("%d members say they created the key, %d writes; want 1 and 1", winners, vars.writes)
	}
	if v, _, _ := vars.Peek(TokenVariable("etcd"), nil); v.Items[CAKEKKey] != keys[0] {
		t.Fatal("the members' key is not the variable's")
	}
}

// The members' Consul token, stored before, stays beside the new key.
func TestMemberKEKKeepsTheConsulToken(t *testing.T) {
	vars := &memVars{}
	if _, _, err := vars.CheckedCreate(&api.Variable{Path: TokenVariable("etcd"), Items: api.VariableItems{TokenKey: "tok"}}, nil); err != nil {
		t.Fatal(err)
	}
	kek, created, err := memberCAKEK(context.Background(), vars, same, "etcd", "", sealed(false))
	if err != nil || !created {
		t.Fatalf("created=%v err=%v", created, err)
	}
	v, _, _ := vars.Peek(TokenVariable("etcd"), nil)
	if v.Items[TokenKey] != "tok" || v.Items[CAKEKKey] != kek {
		t.Fatalf("variable holds %d items, consul token kept: %v", len(v.Items), v.Items[TokenKey] == "tok")
	}
}

// A key in the variable is used as it is, never replaced; a broken one is
// reported, not overwritten.
func TestMemberKEKUsesTheStoredKeyAndNeverReplacesIt(t *testing.T) {
	stored, _ := certs.NewKEK()
	for _, tc := range []struct{ item, wantErr string }{{stored, ""}, {"not-a-key", "not replaced"}} {
		vars := &memVars{}
		vars.CheckedCreate(&api.Variable{Path: TokenVariable("etcd"), Items: api.VariableItems{CAKEKKey: tc.item}}, nil)
		kek, created, err := memberCAKEK(context.Background(), vars, same, "etcd", "", sealed(true))
		if tc.wantErr == "" && (err != nil || kek != stored || created) {
			t.Fatalf("stored key: created=%v err=%v, same key %v", created, err, kek == stored)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Fatalf("broken key: err=%v, want %q", err, tc.wantErr)
		}
		if vars.writes != 1 {
			t.Fatalf("%d writes, want only the test's", vars.writes)
		}
	}
}

// A CA sealed with a key the variable no longer holds: the member says so
// and creates no key (a new one would open nothing and seal nothing).
func TestMemberKEKRefusesWhenTheSealedCAsKeyIsGone(t *testing.T) {
	vars := &memVars{}
	_, _, err := memberCAKEK(context.Background(), vars, same, "etcd", "", sealed(true))
	if !errors.Is(err, ErrKEKLost) {
		t.Fatalf("err = %v, want ErrKEKLost", err)
	}
	if vars.writes != 0 {
		t.Fatalf("%d writes, want none", vars.writes)
	}
}

// Where the workload identity may not write (Nomad ACLs), the member's
// error names the one command an operator runs first.
func TestMemberKEKWriteDeniedNamesTheFirstCommand(t *testing.T) {
	vars := &memVars{deny: true}
	_, _, err := memberCAKEK(context.Background(), vars, memberDenied(nil, "etcd", ""), "etcd", "", sealed(false))
	want := "nomad var put -check-index 0 nomad/jobs/etcd ca_kek=$(openssl rand -base64 32)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to name %q", err, want)
	}
}
