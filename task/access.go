package task

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/authpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
)

// accessState paces the leader's comparison of etcd's auth with the
// access rules.
type accessState struct {
	next time.Time // the leader's next comparison
}

// etcd's authorization follows the definition's access block. The etcd
// leader compares etcd's users, roles and permissions with it; when they
// differ it takes the coordinator's lock, reads them again and changes
// what differs, then turns auth on. The block owns etcd's users and roles:
// one it does not declare is removed (root excepted), so a rule deleted
// from the definition is revoked. Users have no password: etcd names a
// client by its certificate's CN, and the members' own clients present
// CN=root (setupTLS).
//
// During a rolling update that changes the rules, members of both
// versions may lead in turn: each applies its own, and the new rules hold
// once every member runs them.

// Pacing of the leader's comparison (a handful of reads).
const (
	accessCheckEvery = 30 * time.Second
	accessRetry      = 5 * time.Second
)

// perm is one granted key range.
type perm struct {
	Key, RangeEnd string
	Type          authpb.Permission_Type
}

func (p perm) String() string {
	return fmt.Sprintf("%s [%q, %q)", p.Type, p.Key, p.RangeEnd)
}

// authState is etcd's authorization as read, or as the definition wants it.
type authState struct {
	Enabled bool
	// Roles maps a role (root left out) to its permissions, sorted.
	Roles map[string][]perm
	// Users maps a user to its roles.
	Users map[string][]string
}

// accessOp is one change to etcd's authorization.
type accessOp struct {
	Kind string // role-add, grant, revoke, user-add, user-grant, user-revoke, user-delete, role-delete, auth-enable
	Name string // role or user
	Role string // user-grant, user-revoke
	Perm perm   // grant, revoke
}

func (o accessOp) String() string {
	switch o.Kind {
	case "grant", "revoke":
		return fmt.Sprintf("%s %s %s", o.Kind, o.Name, o.Perm)
	case "user-grant", "user-revoke":
		return fmt.Sprintf("%s %s %s", o.Kind, o.Name, o.Role)
	}
	return strings.TrimSpace(o.Kind + " " + o.Name)
}

// desiredAuth is what a declares, root included.
func desiredAuth(a *config.Access) authState {
	st := authState{Enabled: true, Roles: map[string][]perm{}, Users: map[string][]string{certs.RootUser: {"root"}}}
	for _, r := range a.Roles {
		var ps []perm
		for _, g := range []struct {
			prefixes []string
			t        authpb.Permission_Type
		}{{r.ReadWrite, authpb.READWRITE}, {r.Read, authpb.READ}, {r.Write, authpb.WRITE}} {
			for _, p := range g.prefixes {
				ps = append(ps, perm{Key: p, RangeEnd: clientv3.GetPrefixRangeEnd(p), Type: g.t})
			}
		}
		st.Roles[r.Name] = sortPerms(ps)
	}
	for _, u := range a.Users {
		st.Users[u.Name] = append([]string(nil), u.Roles...)
	}
	return st
}

func sortPerms(ps []perm) []perm {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Key != ps[j].Key {
			return ps[i].Key < ps[j].Key
		}
		return ps[i].RangeEnd < ps[j].RangeEnd
	})
	return ps
}

// planAccess lists the changes that turn have into want, in an order
// that keeps every step valid for etcd: roles and their permissions before
// the users bound to them, removals after, auth turned on last (etcd
// refuses it without a root user holding the root role).
func planAccess(want, have authState) []accessOp {
	var ops []accessOp
	for _, r := range sortedKeys(want.Roles) {
		if _, ok := have.Roles[r]; !ok {
			ops = append(ops, accessOp{Kind: "role-add", Name: r})
		}
		cur := map[[2]string]authpb.Permission_Type{}
		for _, p := range have.Roles[r] {
			cur[[2]string{p.Key, p.RangeEnd}] = p.Type
		}
		wanted := map[[2]string]bool{}
		for _, p := range want.Roles[r] {
			k := [2]string{p.Key, p.RangeEnd}
			wanted[k] = true
			if t, ok := cur[k]; !ok || t != p.Type {
				ops = append(ops, accessOp{Kind: "grant", Name: r, Perm: p})
			}
		}
		for _, p := range have.Roles[r] {
			if !wanted[[2]string{p.Key, p.RangeEnd}] {
				ops = append(ops, accessOp{Kind: "revoke", Name: r, Perm: p})
			}
		}
	}
	for _, u := range sortedKeys(want.Users) {
		cur, ok := have.Users[u]
		if !ok {
			ops = append(ops, accessOp{Kind: "user-add", Name: u})
		}
		for _, r := range want.Users[u] {
			if !slices.Contains(cur, r) {
				ops = append(ops, accessOp{Kind: "user-grant", Name: u, Role: r})
			}
		}
		if u == certs.RootUser {
			continue // root keeps whatever else an operator gave it
		}
		for _, r := range cur {
			if !slices.Contains(want.Users[u], r) {
				ops = append(ops, accessOp{Kind: "user-revoke", Name: u, Role: r})
			}
		}
	}
	for _, u := range sortedKeys(have.Users) {
		if _, ok := want.Users[u]; !ok {
			ops = append(ops, accessOp{Kind: "user-delete", Name: u})
		}
	}
	for _, r := range sortedKeys(have.Roles) {
		if _, ok := want.Roles[r]; !ok {
			ops = append(ops, accessOp{Kind: "role-delete", Name: r})
		}
	}
	if want.Enabled && !have.Enabled {
		ops = append(ops, accessOp{Kind: "auth-enable"})
	}
	return ops
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// readAuth reads etcd's authorization state through cli (as root once
// auth is on).
func readAuth(ctx context.Context, cli *clientv3.Client) (authState, error) {
	st := authState{Roles: map[string][]perm{}, Users: map[string][]string{}}
	as, err := cli.AuthStatus(ctx)
	if err != nil {
		return st, fmt.Errorf("auth status: %w", err)
	}
	st.Enabled = as.Enabled
	rl, err := cli.RoleList(ctx)
	if err != nil {
		return st, fmt.Errorf("list roles: %w", err)
	}
	for _, r := range rl.Roles {
		if r == "root" {
			continue
		}
		rg, err := cli.RoleGet(ctx, r)
		if err != nil {
			return st, fmt.Errorf("read role %s: %w", r, err)
		}
		var ps []perm
		for _, p := range rg.Perm {
			ps = append(ps, perm{Key: string(p.Key), RangeEnd: string(p.RangeEnd), Type: p.PermType})
		}
		st.Roles[r] = sortPerms(ps)
	}
	ul, err := cli.UserList(ctx)
	if err != nil {
		return st, fmt.Errorf("list users: %w", err)
	}
	for _, u := range ul.Users {
		ug, err := cli.UserGet(ctx, u)
		if err != nil {
			return st, fmt.Errorf("read user %s: %w", u, err)
		}
		st.Users[u] = ug.Roles
	}
	return st, nil
}

// applyAccess carries out one change.
func applyAccess(ctx context.Context, cli *clientv3.Client, op accessOp) error {
	var err error
	switch op.Kind {
	case "role-add":
		_, err = cli.RoleAdd(ctx, op.Name)
	case "grant":
		_, err = cli.RoleGrantPermission(ctx, op.Name, op.Perm.Key, op.Perm.RangeEnd, clientv3.PermissionType(op.Perm.Type))
	case "revoke":
		_, err = cli.RoleRevokePermission(ctx, op.Name, op.Perm.Key, op.Perm.RangeEnd)
	case "user-add":
		_, err = cli.UserAddWithOptions(ctx, op.Name, "", &clientv3.UserAddOptions{NoPassword: true})
	case "user-grant":
		_, err = cli.UserGrantRole(ctx, op.Name, op.Role)
	case "user-revoke":
		_, err = cli.UserRevokeRole(ctx, op.Name, op.Role)
	case "user-delete":
		_, err = cli.UserDelete(ctx, op.Name)
	case "role-delete":
		_, err = cli.RoleDelete(ctx, op.Name)
	case "auth-enable":
		_, err = cli.AuthEnable(ctx)
	default:
		err = fmt.Errorf("unknown change %q", op.Kind)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// applyAccess carries out SideJobs.ReconcileAccess: the leader of a running
// cluster compares etcd's authorization with the access rules (when due).
func (m *Member) applyAccess(ctx context.Context) {
	n, err := m.reconcileAccess(ctx)
	if err != nil {
		m.access.next = m.now().Add(accessRetry)
		m.log.Warn("access rules not applied", "error", err)
		return
	}
	m.access.next = m.now().Add(accessCheckEvery)
	if n > 0 {
		m.log.Info("access rules applied", "changes", n)
	}
}

// reconcileAccess makes etcd's authorization match the access rules and
// returns the number of changes made. It reads without the lock, and
// takes it only to change something: it reads again under it, since
// another member may have changed the rules in between.
func (m *Member) reconcileAccess(ctx context.Context) (int, error) {
	cli, err := m.etcdClient([]string{m.clientURL(m.self)})
	if err != nil {
		return 0, err
	}
	want := desiredAuth(m.opts.Cluster.Access)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	have, err := readAuth(rctx, cli)
	cancel()
	if err != nil {
		return 0, err
	}
	if len(planAccess(want, have)) == 0 {
		return 0, nil
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	l, err := m.opts.Coordinator.Lock(lctx, m.opts.Name)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("lock: %w", err)
	}
	defer func() { _ = l.Unlock(context.Background()) }()
	actx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if have, err = readAuth(actx, cli); err != nil {
		return 0, err
	}
	ops := planAccess(want, have)
	for i, op := range ops {
		select {
		case <-l.Lost():
			return i, fmt.Errorf("lock lost after %d of %d changes", i, len(ops))
		default:
		}
		if err := applyAccess(actx, cli, op); err != nil {
			return i, err
		}
		m.log.Info("access", "change", op.String())
	}
	return len(ops), nil
}
