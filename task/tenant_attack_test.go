package task

// A hostile tenant, as it would attack (docs/security.md, threat model: "an
// application mapped in `access`"): it holds the client certificate the
// exchange gives its job (CN billing-api, role billing: read_write on
// /billing/ and nothing else) and speaks etcd's gRPC API on a member's
// client port, trying everything that would reach the cluster or another
// tenant (shipping-api, read_write on /shipping/). The list follows etcd
// 3.6.16's checks: the admin-only RPCs (v3rpc/auth.go AuthAdmin.isPermitted:
// Compact, the maintenance server but Status and Alarm GET; the cluster
// server's membership changes, v3_server checkMembershipOperationPermission;
// every auth request, apply/apply_auth.go needAdminPermission), the key
// range checks of Range, Put, DeleteRange, Txn (compares and both branches,
// nested) and Watch, and the lease checks, which look only at the keys a
// lease holds (apply_auth.go checkLeasePuts, v3_server.go checkLeaseRenew,
// checkLeaseTimeToLive, checkLeaseLeases).

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
)

// tenantAccess is two tenants' rules: billing (the attacker) and shipping.
func tenantAccess() *config.Access {
	return &config.Access{
		Roles: []config.Role{{Name: "billing", ReadWrite: []string{"/billing/"}}, {Name: "shipping", ReadWrite: []string{"/shipping/"}}},
		Users: []config.User{{Name: "billing-api", Roles: []string{"billing"}, NomadJobs: []string{"billing"}},
			{Name: "shipping-api", Roles: []string{"shipping"}, NomadJobs: []string{"shipping"}}},
	}
}

// tenants seeds a one-member TLS auto cluster with tenantAccess applied
// and returns the member, root's client, and the two tenants' clients
// (certificates for their users from the cluster CA, as the exchange
// issues them: TestExchangeIssuesTheMappedUsersCertificate).
func tenants(t *testing.T) (m *Member, root, billing, shipping *clientv3.Client) {
	t.Helper()
	k := newKit(t, "a")
	k.cl.TLS.Mode = config.TLSAuto
	k.cl.Access = tenantAccess()
	m = k.member("a", nil)
	k.seed(m)
	if _, err := m.reconcileAccess(context.Background()); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return m, rootClient(t, m), userClient(t, m, "billing-api"), userClient(t, m, "shipping-api")
}

// denied reports why err is not etcd's permission refusal ("" when it is).
func denied(err error) string {
	switch {
	case err == nil:
		return "allowed"
	case errors.Is(err, rpctypes.ErrPermissionDenied) || strings.Contains(err.Error(), rpctypes.ErrPermissionDenied.Error()):
		return ""
	}
	return "failed otherwise: " + err.Error()
}

// Every path from the billing certificate to the cluster's administration
// or to another tenant's keys is refused with etcd's permission error, and
// none of them changed anything (root reads the state back). What etcd
// lets any authenticated user read is asserted at the end as the limit it
// is.
func TestTenantCertificateIsRefusedEveryAdminAndCrossTenantPath(t *testing.T) {
	m, root, app, victim := tenants(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	put(t, victim, "/shipping/secret", "s1")
	put(t, app, "/billing/own", "b1")
	put(t, root, "/billing-archive/x", "outside /billing/ by one byte")
	old := getRev(t, root, "/shipping/secret")
	put(t, victim, "/shipping/secret", "s2")
	self := uint64(m.proc.Server().Server.MemberID())
	raw := pb.NewMaintenanceClient(app.ActiveConnection())
	url := m.clientURL(m.self)

	// A Txn whose own parts are all inside /billing/ but for one.
	own := clientv3.Compare(clientv3.Value("/billing/own"), "=", "b1")
	outside := clientv3.Compare(clientv3.Value("/shipping/secret"), "=", "s2")
	txn := func(cmp []clientv3.Cmp, then, els []clientv3.Op) error {
		_, err := app.Txn(ctx).If(cmp...).Then(then...).Else(els...).Commit()
		return err
	}
	watch := func(key string, opts ...clientv3.OpOption) error {
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		defer wcancel()
		for wr := range app.Watch(clientv3.WithRequireLeader(wctx), key, opts...) {
			if err := wr.Err(); err != nil {
				return err
			}
			if len(wr.Events) > 0 {
				return nil
			}
		}
		return wctx.Err()
	}

	attempts := []struct {
		name string
		do   func() error
	}{
		// The cluster's administration (maintenance and KV servers).
		{"Compact", func() error { _, err := app.Compact(ctx, old+1); return err }},
		{"Compact physical", func() error { _, err := app.Compact(ctx, old+1, clientv3.WithCompactPhysical()); return err }},
		{"Defragment", func() error { _, err := app.Defragment(ctx, url); return err }},
		{"Snapshot", func() error {
			rc, err := app.Snapshot(ctx)
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(io.Discard, rc)
			return err
		}},
		{"Hash", func() error { _, err := raw.Hash(ctx, &pb.HashRequest{}); return err }},
		{"HashKV", func() error { _, err := app.HashKV(ctx, url, 0); return err }},
		{"MoveLeader", func() error { _, err := app.MoveLeader(ctx, self); return err }},
		{"Downgrade validate", func() error { _, err := app.Downgrade(ctx, clientv3.DowngradeValidate, "3.5.0"); return err }},
		{"Downgrade enable", func() error { _, err := app.Downgrade(ctx, clientv3.DowngradeEnable, "3.5.0"); return err }},
		{"Alarm activate NOSPACE", func() error {
			_, err := raw.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: self, Alarm: pb.AlarmType_NOSPACE})
			return err
		}},
		{"Alarm activate CORRUPT", func() error {
			_, err := raw.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: self, Alarm: pb.AlarmType_CORRUPT})
			return err
		}},
		{"Alarm disarm (AlarmRequest_DEACTIVATE)", func() error {
			_, err := app.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: self, Alarm: pb.AlarmType_NOSPACE})
			return err
		}},
		// Membership (cluster server).
		{"MemberAdd", func() error { _, err := app.MemberAdd(ctx, []string{"https://127.0.0.1:1"}); return err }},
		{"MemberAddAsLearner", func() error { _, err := app.MemberAddAsLearner(ctx, []string{"https://127.0.0.1:1"}); return err }},
		{"MemberRemove", func() error { _, err := app.MemberRemove(ctx, self); return err }},
		{"MemberPromote", func() error { _, err := app.MemberPromote(ctx, self); return err }},
		{"MemberUpdate", func() error { _, err := app.MemberUpdate(ctx, self, []string{"https://127.0.0.1:1"}); return err }},
		// Authorization (auth server; applied only for an admin).
		{"AuthDisable", func() error { _, err := app.AuthDisable(ctx); return err }},
		{"AuthEnable", func() error { _, err := app.AuthEnable(ctx); return err }},
		{"UserAdd", func() error { _, err := app.UserAdd(ctx, "mallory", "pw"); return err }},
		{"UserGrantRole root to itself", func() error { _, err := app.UserGrantRole(ctx, "billing-api", "root"); return err }},
		{"UserGrantRole shipping to itself", func() error { _, err := app.UserGrantRole(ctx, "billing-api", "shipping"); return err }},
		{"UserRevokeRole from the other tenant", func() error { _, err := app.UserRevokeRole(ctx, "shipping-api", "shipping"); return err }},
		{"UserDelete the other tenant", func() error { _, err := app.UserDelete(ctx, "shipping-api"); return err }},
		{"UserChangePassword of root", func() error { _, err := app.UserChangePassword(ctx, "root", "pw"); return err }},
		{"UserChangePassword of itself", func() error { _, err := app.UserChangePassword(ctx, "billing-api", "pw"); return err }},
		{"UserList", func() error { _, err := app.UserList(ctx); return err }},
		{"UserGet of the other tenant", func() error { _, err := app.UserGet(ctx, "shipping-api"); return err }},
		{"RoleAdd", func() error { _, err := app.RoleAdd(ctx, "everything"); return err }},
		{"RoleGrantPermission on its own role", func() error {
			_, err := app.RoleGrantPermission(ctx, "billing", "\x00", "\x00", clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		}},
		{"RoleRevokePermission of the other tenant", func() error {
			_, err := app.RoleRevokePermission(ctx, "shipping", "/shipping/", clientv3.GetPrefixRangeEnd("/shipping/"))
			return err
		}},
		{"RoleDelete of the other tenant", func() error { _, err := app.RoleDelete(ctx, "shipping"); return err }},
		{"RoleList", func() error { _, err := app.RoleList(ctx); return err }},
		{"RoleGet of the other tenant", func() error { _, err := app.RoleGet(ctx, "shipping"); return err }},
		{"RoleGet root", func() error { _, err := app.RoleGet(ctx, "root"); return err }},
		{"AuthStatus", func() error { _, err := app.AuthStatus(ctx); return err }},
		// The other tenant's keys and everything around its own prefix.
		{"Get the other tenant's key", func() error { _, err := app.Get(ctx, "/shipping/secret"); return err }},
		{"Get the other tenant's prefix", func() error { _, err := app.Get(ctx, "/shipping/", clientv3.WithPrefix()); return err }},
		{"Get a range that starts inside and ends outside", func() error {
			_, err := app.Get(ctx, "/billing/", clientv3.WithRange("/shipping0"))
			return err
		}},
		{"Get from its own key to the end (range_end \\x00)", func() error { _, err := app.Get(ctx, "/billing/", clientv3.WithFromKey()); return err }},
		{"Get the prefix without its slash (/billing-archive/ inside)", func() error { _, err := app.Get(ctx, "/billing", clientv3.WithPrefix()); return err }},
		{"Get everything (empty key, prefix)", func() error { _, err := app.Get(ctx, "", clientv3.WithPrefix()); return err }},
		{"Get everything (\\x00 from key)", func() error { _, err := app.Get(ctx, "\x00", clientv3.WithFromKey()); return err }},
		{"Get count only of everything", func() error {
			_, err := app.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
			return err
		}},
		{"Get keys only of the other prefix", func() error {
			_, err := app.Get(ctx, "/shipping/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
			return err
		}},
		{"Get the other key at an old revision", func() error { _, err := app.Get(ctx, "/shipping/secret", clientv3.WithRev(old)); return err }},
		{"Put the other tenant's key", func() error { _, err := app.Put(ctx, "/shipping/secret", "owned"); return err }},
		{"Put next to its prefix", func() error { _, err := app.Put(ctx, "/billing-archive/x", "owned"); return err }},
		{"Delete the other tenant's key", func() error { _, err := app.Delete(ctx, "/shipping/secret"); return err }},
		{"Delete a range that starts inside and ends outside", func() error {
			_, err := app.Delete(ctx, "/billing/", clientv3.WithRange("/shipping0"))
			return err
		}},
		{"Delete everything", func() error { _, err := app.Delete(ctx, "\x00", clientv3.WithFromKey()); return err }},
		{"Txn compare reads outside", func() error {
			return txn([]clientv3.Cmp{outside}, []clientv3.Op{clientv3.OpPut("/billing/leak", "y")}, nil)
		}},
		{"Txn compare on a range that ends outside", func() error {
			return txn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision("/billing/"), ">", 0).WithRange("/shipping0")}, nil, nil)
		}},
		{"Txn then-branch reads outside", func() error { return txn([]clientv3.Cmp{own}, []clientv3.Op{clientv3.OpGet("/shipping/secret")}, nil) }},
		{"Txn else-branch (not taken) writes outside", func() error {
			return txn([]clientv3.Cmp{own}, []clientv3.Op{clientv3.OpPut("/billing/ok", "y")}, []clientv3.Op{clientv3.OpPut("/shipping/secret", "owned")})
		}},
		{"Txn else-branch deletes outside", func() error {
			return txn([]clientv3.Cmp{own}, nil, []clientv3.Op{clientv3.OpDelete("/shipping/", clientv3.WithPrefix())})
		}},
		{"Txn nested in the then-branch writes outside", func() error {
			inner := clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut("/shipping/secret", "owned")}, nil)
			return txn([]clientv3.Cmp{own}, []clientv3.Op{inner}, nil)
		}},
		{"Watch the other tenant's prefix", func() error { return watch("/shipping/", clientv3.WithPrefix()) }},
		{"Watch a range that starts inside and ends outside", func() error { return watch("/billing/", clientv3.WithRange("/shipping0")) }},
		{"Watch everything", func() error { return watch("\x00", clientv3.WithFromKey()) }},
		{"Watch the other key from an old revision", func() error { return watch("/shipping/secret", clientv3.WithRev(old)) }},
		{"Watch with a previous value", func() error { return watch("/shipping/secret", clientv3.WithPrevKV(), clientv3.WithRev(old)) }},
	}
	for _, a := range attempts {
		if why := denied(a.do()); why != "" {
			t.Errorf("%s: %s, want etcd's permission refusal", a.name, why)
		}
	}
	// etcd's HTTP/JSON gateway on the same port: it refuses a certificate
	// with a CN (it would reach gRPC as the member's own connection).
	pair, err := certs.IssueClient(*m.trust.CA(), "billing-api", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.X509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		t.Fatal(err)
	}
	pool, _ := certs.Pool(m.trust.CA().Cert)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	for path, body := range map[string]string{
		"/v3/kv/range":               `{"key":"` + base64.StdEncoding.EncodeToString([]byte("/shipping/secret")) + `"}`,
		"/v3/kv/put":                 `{"key":"` + base64.StdEncoding.EncodeToString([]byte("/shipping/secret")) + `","value":"b3duZWQ="}`,
		"/v3/kv/compaction":          `{"revision":"` + fmt.Sprint(old+1) + `"}`,
		"/v3/maintenance/defragment": `{}`,
		"/v3/maintenance/snapshot":   `{}`,
		"/v3/auth/disable":           `{}`,
		"/v3/auth/user/grant":        `{"user":"billing-api","role":"root"}`,
		"/v3/cluster/member/remove":  `{"ID":"` + fmt.Sprint(self) + `"}`,
	} {
		resp, err := hc.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Errorf("gateway %s: %v", path, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "CommonName") {
			t.Errorf("gateway %s with the tenant's certificate: %s %s, want 400 (a CN is refused)", path, resp.Status, b)
		}
	}
	// A documented limit: etcd serves its own /metrics, /debug/vars,
	// /version and /health on the client port to any certificate of the
	// cluster CA (embed's serveClients; no setting removes them), so a
	// tenant reads cluster-wide counters (puts, keys, leases granted,
	// gRPC calls by method): a side channel on other tenants' activity,
	// beside what Status already shows (security review, session 11).
	for _, path := range []string{"/metrics", "/debug/vars"} {
		resp, err := hc.Get(url + path)
		if err != nil {
			t.Errorf("client port %s: %v", path, err)
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("limit changed: the client port's %s answered a tenant %s: update docs/security.md's threat model", path, resp.Status)
		}
	}
	// Password authentication does not stand in for the certificate: the
	// access block's users have no password, and root's is none either.
	for _, user := range []string{"root", "shipping-api", "billing-api"} {
		for _, pw := range []string{"", "root", user} {
			if _, err := app.Authenticate(ctx, user, pw); err == nil {
				t.Errorf("Authenticate %s with password %q gave a token", user, pw)
			}
		}
	}

	// Nothing changed: root reads everything back.
	if v := getVal(t, root, "/shipping/secret"); v != "s2" {
		t.Errorf("/shipping/secret is %q after the attempts, want s2", v)
	}
	if v := getVal(t, root, "/billing-archive/x"); v != "outside /billing/ by one byte" {
		t.Errorf("/billing-archive/x is %q after the attempts", v)
	}
	if r, err := root.Get(ctx, "/shipping/secret", clientv3.WithRev(old)); err != nil || len(r.Kvs) != 1 {
		t.Errorf("revision %d compacted away by a tenant: %v %v", old, r, err)
	}
	if as, err := root.AlarmList(ctx); err != nil || len(as.Alarms) != 0 {
		t.Errorf("alarms after the attempts: %v %v", as, err)
	}
	if ml, err := root.MemberList(ctx); err != nil || len(ml.Members) != 1 || ml.Members[0].ID != self || ml.Members[0].PeerURLs[0] != m.peerURL(m.self) {
		t.Errorf("membership after the attempts: %v %v", ml, err)
	}
	if st, err := readAuth(ctx, root); err != nil || !st.Enabled || fmt.Sprint(st.Users) != fmt.Sprint(desiredAuth(tenantAccess()).Users) || fmt.Sprint(st.Roles) != fmt.Sprint(desiredAuth(tenantAccess()).Roles) {
		t.Errorf("authorization after the attempts: %+v %v", st, err)
	}
	if err := putErr(victim, "/shipping/after"); err != nil {
		t.Errorf("the other tenant after the attempts: %v", err)
	}

	// Within its own prefix the certificate works (the control), through
	// the same kinds of request.
	if err := txn([]clientv3.Cmp{own}, []clientv3.Op{clientv3.OpPut("/billing/ok", "y", clientv3.WithPrevKV()), clientv3.OpGet("/billing/", clientv3.WithPrefix())},
		[]clientv3.Op{clientv3.OpDelete("/billing/gone")}); err != nil {
		t.Errorf("Txn within /billing/: %v", err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = app.Put(context.Background(), "/billing/watched", "w")
	}()
	if err := watch("/billing/", clientv3.WithPrefix()); err != nil {
		t.Errorf("Watch within /billing/: %v", err)
	}

	// The documented limits: what etcd lets any authenticated user see.
	// Status (leader, revision, raft index and term, DB size), the alarm
	// list, the member list (names, peer and client URLs), its own user
	// and its own roles' permissions.
	if _, err := app.Status(ctx, url); err != nil {
		t.Errorf("limit changed: Status refused to a tenant (%v): update docs/security.md's threat model", err)
	}
	if _, err := app.AlarmList(ctx); err != nil {
		t.Errorf("limit changed: AlarmList refused to a tenant (%v)", err)
	}
	if _, err := app.MemberList(ctx); err != nil {
		t.Errorf("limit changed: MemberList refused to a tenant (%v)", err)
	}
	if _, err := app.UserGet(ctx, "billing-api"); err != nil {
		t.Errorf("limit changed: UserGet of itself refused (%v)", err)
	}
	if _, err := app.RoleGet(ctx, "billing"); err != nil {
		t.Errorf("limit changed: RoleGet of its own role refused (%v)", err)
	}
}

// getRev is key's mod revision as read through cli.
func getRev(t *testing.T, cli *clientv3.Client, key string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, key)
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("get %s: %v %v", key, r, err)
	}
	return r.Kvs[0].ModRevision
}

// A lease that holds another tenant's key is out of reach: the attacker
// can neither revoke it, keep it alive, read it, list the leases, nor
// attach a key of its own to it; the victim's key stays.
func TestTenantCannotTouchAnotherTenantsLeaseThatHoldsItsKeys(t *testing.T) {
	_, root, app, victim := tenants(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gr, err := victim.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := victim.Put(ctx, "/shipping/held", "mine", clientv3.WithLease(gr.ID)); err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct {
		name string
		do   func() error
	}{
		{"LeaseRevoke", func() error { _, err := app.Revoke(ctx, gr.ID); return err }},
		{"LeaseKeepAlive", func() error { _, err := app.KeepAliveOnce(ctx, gr.ID); return err }},
		{"LeaseTimeToLive with keys", func() error { _, err := app.TimeToLive(ctx, gr.ID, clientv3.WithAttachedKeys()); return err }},
		{"LeaseLeases", func() error { _, err := app.Leases(ctx); return err }},
		{"Put its own key on the lease", func() error { _, err := app.Put(ctx, "/billing/on-theirs", "x", clientv3.WithLease(gr.ID)); return err }},
		{"Txn put on the lease", func() error {
			_, err := app.Txn(ctx).Then(clientv3.OpPut("/billing/on-theirs", "x", clientv3.WithLease(gr.ID))).Commit()
			return err
		}},
	} {
		if why := denied(a.do()); why != "" {
			t.Errorf("%s on a lease holding /shipping/held: %s, want etcd's permission refusal", a.name, why)
		}
	}
	// The limit: without its keys, any lease's remaining and granted TTL
	// is anyone's to read (etcd checks LeaseTimeToLive only with keys).
	if ttl, err := app.TimeToLive(ctx, gr.ID); err != nil || ttl.GrantedTTL != 60 {
		t.Errorf("limit changed: LeaseTimeToLive without keys on another tenant's lease: %v %v (update docs/security.md)", ttl, err)
	}
	if v := getVal(t, root, "/shipping/held"); v != "mine" {
		t.Errorf("/shipping/held is %q, want mine", v)
	}
	if ttl, err := root.TimeToLive(ctx, gr.ID, clientv3.WithAttachedKeys()); err != nil || ttl.TTL <= 0 || len(ttl.Keys) != 1 {
		t.Errorf("the victim's lease after the attempts: %v %v", ttl, err)
	}
}

// The documented limit (etcd checks a lease against the keys it holds,
// not against who granted it): a lease that holds no key yet is anyone's
// who knows its id. A concurrency.Session is one from its grant until its
// first lock or election key, and for as long as it holds none. etcd
// draws the ids it chooses from the member's request-id counter, so an
// attacker found the victim's a few ids after its own (LeaseTimeToLive
// answers anyone about any lease), or listed it with LeaseLeases, which
// etcd answers with every lease while none holds a key the caller may not
// read. Members now give a grant without an id a random one
// (etcdproc.RandomLeaseID), and answer LeaseLeases to root alone (etcdproc.RootLeaseList):
// neither probing nor the list finds it. Given the id by other means, the
// attacker still reads the lease, keeps it alive, revokes it (the
// victim's session ends), or
// attaches a key of its own to it (the victim may no longer put on its
// own lease, renew or revoke it: its session ends too, and its lock is
// refused).
func TestTenantCanTakeAnotherTenantsKeylessLease(t *testing.T) {
	_, root, app, victim := tenants(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mine, err := app.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	// TTL 6 s: a session renews every third of it, and learns of a
	// revocation at its next renewal.
	revoked, err := concurrency.NewSession(victim, concurrency.WithTTL(6))
	if err != nil {
		t.Fatal(err)
	}
	poisoned, err := concurrency.NewSession(victim, concurrency.WithTTL(6))
	if err != nil {
		t.Fatal(err)
	}

	// Probing the ids around the attacker's own finds nothing (etcd's
	// own choice put the victim's 2 and 4 ids after it).
	for id := mine.ID - 64; id < mine.ID+1024; id++ {
		if r, err := app.TimeToLive(ctx, id); id != mine.ID && err == nil && r.TTL > 0 {
			t.Errorf("probing around lease %x found the lease %x (the victim's sessions: %x, %x)", mine.ID, id, revoked.Lease(), poisoned.Lease())
			break
		}
	}
	// Nor does LeaseLeases, which etcd answers with every lease while
	// none holds a key the caller may not read: members answer it to
	// root alone.
	if ls, err := app.Leases(ctx); denied(err) != "" {
		t.Errorf("LeaseLeases by a tenant while no lease holds a key: %v %v, want refused", ls, err)
	}
	if ls, err := root.Leases(ctx); err != nil || len(ls.Leases) != 3 {
		t.Errorf("LeaseLeases by root: %v %v, want the 3 leases", ls, err)
	}

	// The limit: given the id by other means (a log line, an error
	// message), the lease is the attacker's.
	if _, err := app.KeepAliveOnce(ctx, revoked.Lease()); err != nil {
		t.Errorf("keeping the victim's key-less lease alive: %v (limit changed? update docs/security.md)", err)
	}

	if _, err := app.Revoke(ctx, revoked.Lease()); err != nil {
		t.Errorf("revoking the victim's key-less lease: %v (limit changed? update docs/security.md)", err)
	}
	select {
	case <-revoked.Done():
	case <-time.After(10 * time.Second):
		t.Errorf("the victim's session survived the revocation of its lease")
	}

	if _, err := app.Put(ctx, "/billing/squat", "x", clientv3.WithLease(poisoned.Lease())); err != nil {
		t.Errorf("attaching a key to the victim's key-less lease: %v (limit changed? update docs/security.md)", err)
	}
	lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
	err = concurrency.NewMutex(poisoned, "/shipping/lock").Lock(lctx)
	lcancel()
	if why := denied(err); why != "" {
		t.Errorf("the victim's lock on its poisoned session: %s, want refused", why)
	}
	if _, err := victim.Revoke(ctx, poisoned.Lease()); denied(err) != "" {
		t.Errorf("the victim revoking its own poisoned lease: %v, want refused", err)
	}
	select {
	case <-poisoned.Done():
	case <-time.After(10 * time.Second):
		t.Errorf("the victim's session kept renewing a lease that holds the attacker's key")
	}
}

// etcd has no per-tenant quota (a documented limit): one tenant writing
// under its own prefix until the database passes quota_backend_bytes
// stops every tenant's writes and lease grants, root's too, until its
// keys are deleted. What the product owes meanwhile: reads keep working
// for everyone, the member neither restarts nor stops answering (its
// /health verdict stays healthy and says NOSPACE), its NOSPACE
// maintenance compacts and defragments but keeps the alarm while the live
// data is above 90% of the quota, and loses no acknowledged key. Once
// root deletes the tenant's keys, the next maintenance (within
// reclaimBackoff of the one that failed) disarms the alarm and everyone
// writes again.
func TestTenantFillingTheQuotaStopsEveryTenantUntilRootDeletesItsKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a 1 MiB quota and waits out the maintenance backoff")
	}
	k := newKit(t, "a")
	k.cl.TLS.Mode = config.TLSAuto
	k.cl.Access = tenantAccess()
	k.cl.Etcd.QuotaBackendBytes = config.MinQuotaBackendBytes
	k.cl.Etcd.DefragRatio = 0 // NOSPACE alone
	m := k.member("a", nil)
	runLoop(t, m)
	waitUntil(t, 30*time.Second, "the member leads", func() (bool, string) { return m.etcdServerLeader() != 0, m.reason() })
	m.mu.Lock()
	e := m.proc.Server()
	m.mu.Unlock()
	root := rootClient(t, m)
	waitUntil(t, 30*time.Second, "the access rules applied", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := readAuth(ctx, root)
		return err == nil && st.Enabled && len(st.Roles) == 2, fmt.Sprintf("%+v %v", st, err)
	})
	app, victim := userClient(t, m, "billing-api"), userClient(t, m, "shipping-api")
	put(t, victim, "/shipping/before", "kept")

	// The attack: unique keys of 8 KiB under /billing/, retried through
	// NOSPACE (the maintenance disarms it while compaction and
	// defragmentation still make room) until the maintenance gives up.
	ctx := context.Background()
	value := strings.Repeat("b", 8<<10)
	acked := map[string]bool{}
	refused := 0
	start := time.Now()
	for i := 0; ; {
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("after %d keys and %d NOSPACE refusals the quota never stayed full: %s", len(acked), refused, m.reason())
		}
		key := fmt.Sprintf("/billing/fill/%04d", i)
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := app.Put(pctx, key, value)
		cancel()
		if err == nil {
			acked[key] = true
			i++
			continue
		}
		if !errors.Is(err, rpctypes.ErrNoSpace) {
			t.Fatalf("put %s: %v", key, err)
		}
		refused++
		if strings.Contains(m.reason(), "NOSPACE kept") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the tenant wrote %d keys of 8 KiB (%d refusals with NOSPACE) in %s: %s", len(acked), refused, time.Since(start).Round(time.Millisecond), m.reason())

	// Every tenant's writes and lease grants fail, root's too; reads work.
	for name, cli := range map[string]*clientv3.Client{"the other tenant": victim, "root": root, "the attacker": app} {
		key := "/shipping/during"
		if cli == app {
			key = "/billing/during"
		}
		if err := putErr(cli, key); !errors.Is(err, rpctypes.ErrNoSpace) {
			t.Errorf("limit changed: %s's put while the tenant fills the quota: %v, want NOSPACE (update docs/security.md)", name, err)
		}
	}
	gctx, gcancel := context.WithTimeout(ctx, 5*time.Second)
	if _, err := victim.Grant(gctx, 10); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Errorf("the other tenant's lease grant while full: %v, want NOSPACE", err)
	}
	gcancel()
	if v := getVal(t, victim, "/shipping/before"); v != "kept" {
		t.Errorf("the other tenant reads /shipping/before as %q while full", v)
	}
	// The member: the same etcd, answering, healthy, saying NOSPACE.
	m.mu.Lock()
	same := m.proc.Server() == e
	m.mu.Unlock()
	if !same {
		t.Errorf("the member restarted etcd while full: %s", m.reason())
	}
	hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
	st, err := m.health(hctx)
	hcancel()
	if err != nil || !st.Healthy || !st.NoSpace {
		t.Errorf("health while full: healthy %v, nospace %v, %v; want healthy and NOSPACE", st.Healthy, st.NoSpace, err)
	}
	checkKept := func(when string) {
		t.Helper()
		r, err := root.Get(ctx, "/billing/fill/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, kv := range r.Kvs {
			have[string(kv.Key)] = true
		}
		for key := range acked {
			if !have[key] {
				t.Errorf("%s: acknowledged %s lost", when, key)
			}
		}
	}
	checkKept("after the maintenance that kept NOSPACE")

	// Root deletes the tenant's keys (a delete is not refused under
	// NOSPACE); the next maintenance compacts, defragments and disarms.
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	dr, err := root.Delete(dctx, "/billing/fill/", clientv3.WithPrefix())
	dcancel()
	if err != nil {
		t.Fatalf("root deleting the tenant's keys under NOSPACE: %v", err)
	}
	if dr.Deleted < int64(len(acked)) {
		t.Errorf("root deleted %d keys, the tenant had %d acknowledged", dr.Deleted, len(acked))
	}
	deleted := time.Now()
	waitUntil(t, reclaimBackoff+time.Minute, "every tenant writes again", func() (bool, string) {
		for _, cli := range []*clientv3.Client{victim, root} {
			if err := putErr(cli, "/shipping/after"); err != nil {
				return false, fmt.Sprintf("%v; %s", err, m.reason())
			}
		}
		return putErr(app, "/billing/after") == nil, m.reason()
	})
	t.Logf("root's delete to writes again: %s", time.Since(deleted).Round(time.Millisecond))
	if v := getVal(t, root, "/shipping/before"); v != "kept" {
		t.Errorf("/shipping/before is %q after the maintenance", v)
	}
	m.mu.Lock()
	same = m.proc.Server() == e
	m.mu.Unlock()
	if !same {
		t.Errorf("the member restarted etcd during the maintenance: %s", m.reason())
	}
}
