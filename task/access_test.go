package task

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
)

func opsText(ops []accessOp) string {
	var s []string
	for _, o := range ops {
		s = append(s, o.String())
	}
	return strings.Join(s, "\n")
}

// The plan from an empty etcd creates roles and their grants, then users
// and their bindings (root with the root role), and turns auth on last
// (etcd refuses it before root exists); from a drifted etcd it revokes
// what the rules do not grant and deletes what they do not declare, but
// keeps root's other roles.
func TestPlanAccess(t *testing.T) {
	want := desiredAuth(&config.Access{
		Roles: []config.Role{{Name: "billing", ReadWrite: []string{"/billing/"}, Read: []string{"/config/"}}},
		Users: []config.User{{Name: "api", Roles: []string{"billing"}}},
	})
	empty := authState{Roles: map[string][]perm{}, Users: map[string][]string{}}
	got := opsText(planAccess(want, empty))
	wantOps := `role-add billing
grant billing READWRITE ["/billing/", "/billing0")
grant billing READ ["/config/", "/config0")
user-add api
user-grant api billing
user-add root
user-grant root root
auth-enable`
	if got != wantOps {
		t.Errorf("plan from empty:\n%s\nwant:\n%s", got, wantOps)
	}
	drifted := authState{Enabled: true,
		Roles: map[string][]perm{
			"billing": {{Key: "/billing/", RangeEnd: "/billing0", Type: authpb.READ}, {Key: "/other/", RangeEnd: "/other0", Type: authpb.READWRITE}},
			"old":     nil,
		},
		Users: map[string][]string{"root": {"root", "old"}, "api": {"billing", "old"}, "mallory": {"billing"}},
	}
	got = opsText(planAccess(want, drifted))
	wantOps = `grant billing READWRITE ["/billing/", "/billing0")
grant billing READ ["/config/", "/config0")
revoke billing READWRITE ["/other/", "/other0")
user-revoke api old
user-delete mallory
role-delete old`
	if got != wantOps {
		t.Errorf("plan from drifted:\n%s\nwant:\n%s", got, wantOps)
	}
	if ops := planAccess(want, want); len(ops) != 0 {
		t.Errorf("plan from the wanted state is not empty:\n%s", opsText(ops))
	}
}

// userClient is a client on m that presents a certificate for user,
// issued from m's cluster CA.
func userClient(t *testing.T, m *Member, user string) *clientv3.Client {
	t.Helper()
	p, err := certs.IssueClient(*m.trust.CA(), user, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	return clientWith(t, m, kp)
}

// clientWith is a client on m presenting kp.
func clientWith(t *testing.T, m *Member, kp tls.Certificate) *clientv3.Client {
	t.Helper()
	pool, _ := certs.Pool(m.trust.CA().Cert)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.clientURL(m.self)}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func putErr(cli *clientv3.Client, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := cli.Put(ctx, key, "v")
	return err
}

// On a real embedded etcd with TLS auto: once the rules are applied, a
// user's certificate writes under its role's prefix and is refused
// outside it, an undeclared name is refused everywhere, root (the
// member's own client) may do everything; a second pass changes nothing;
// a rule removed from the definition is revoked.
func TestAccessRulesAppliedAndRevoked(t *testing.T) {
	k := newKit(t, "a")
	k.cl.TLS.Mode = config.TLSAuto
	k.cl.Access = &config.Access{
		Roles: []config.Role{{Name: "billing", ReadWrite: []string{"/billing/"}, Read: []string{"/config/"}}},
		Users: []config.User{{Name: "billing-api", Roles: []string{"billing"}}},
	}
	m := k.member("a", nil)
	k.seed(m)
	ctx := context.Background()
	n, err := m.reconcileAccess(ctx)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if n != 8 {
		t.Errorf("%d changes on a fresh cluster, want 8", n)
	}
	app := userClient(t, m, "billing-api")
	if err := putErr(app, "/billing/invoice-1"); err != nil {
		t.Errorf("billing-api writes under /billing/: %v", err)
	}
	for _, key := range []string{"/config/x", "/other/x", "/billing"} {
		if err := putErr(app, key); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("billing-api writes %s: %v, want permission denied", key, err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	if _, err := app.Get(rctx, "/config/", clientv3.WithPrefix()); err != nil {
		t.Errorf("billing-api reads /config/: %v", err)
	}
	cancel()
	if err := putErr(userClient(t, m, "mallory"), "/billing/x"); err == nil {
		t.Errorf("an undeclared user wrote under /billing/")
	}
	// The member's own client is root: user management and membership
	// are admin-only.
	own, err := m.etcdClient([]string{m.clientURL(m.self)})
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 3*time.Second)
	if _, err := own.UserList(actx); err != nil {
		t.Errorf("the member's client is not root: %v", err)
	}
	cancel()
	if err := putErr(own, "/anything"); err != nil {
		t.Errorf("root writes: %v", err)
	}
	if n, err := m.reconcileAccess(ctx); err != nil || n != 0 {
		t.Errorf("second pass: %d changes, %v; want none", n, err)
	}

	// Revocation, one rule at a time: the role loses its write grant (the
	// user stays and may still read), then the user goes.
	k.cl.Access = &config.Access{
		Roles: []config.Role{{Name: "billing", Read: []string{"/billing/"}}},
		Users: []config.User{{Name: "billing-api", Roles: []string{"billing"}}},
	}
	if _, err := m.reconcileAccess(ctx); err != nil {
		t.Fatalf("reconcile after revoking the write grant: %v", err)
	}
	if err := putErr(app, "/billing/invoice-2"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("billing-api writes after its write grant was revoked: %v, want permission denied", err)
	}
	actx, cancel = context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := app.Get(actx, "/billing/invoice-1"); err != nil {
		t.Errorf("billing-api no longer reads /billing/: %v", err)
	}
	k.cl.Access = &config.Access{Roles: []config.Role{{Name: "billing", Read: []string{"/billing/"}}}}
	if _, err := m.reconcileAccess(ctx); err != nil {
		t.Fatalf("reconcile after removing the user: %v", err)
	}
	if _, err := app.Get(actx, "/billing/invoice-1"); err == nil {
		t.Errorf("billing-api still reads after its user was removed")
	}
	if _, err := own.UserGet(actx, "billing-api"); !errors.Is(err, rpctypes.ErrUserNotFound) {
		t.Errorf("user billing-api after removal: %v, want not found", err)
	}
}
