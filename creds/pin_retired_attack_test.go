package creds_test

// Taken over from the security review's
// TestAttackPinOnARetiredExposedCAStillSendsTheIdentity (804d397 with
// 7319ddb) and inverted where the fix reaches: creds still sends the
// identity under a pin on a retired CA (refusing would stop a running
// application at the rotation), but it says so loudly, at every fetch.

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/creds"
)

// The cluster CA "old" had its key in Consul in the clear: the operator
// runs `tls rotate-ca` to retire it. An application whose creds was pinned
// to old and whose allocation kept running through the rotation still
// trusts old, from the ca.crt it wrote: whoever holds old's key (any
// Consul snapshot of that time) and registers a service in Consul receives
// its workload identity. creds warns at every fetch that the pinned CA is
// no longer published and names the pin and what Consul publishes, so the
// operator re-pins (tls rotate-ca's last line says the same). On the
// reviewed commit creds logged nothing.
func TestPinOnARetiredCAWarnsToRePin(t *testing.T) {
	old, next, cross, pin := crossSignedRotation(t)
	idf := identityFile(t)
	dir := t.TempDir()
	bg := context.Background()
	var logs bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	both := append(append([]byte{}, old.Cert...), next.Cert...)

	// During the rotation (phase issue): a real member of the new CA
	// with the cross certificate.
	member := newExchanger(t, next, certs.WithChain(serverCert(t, next), cross))
	if _, err := creds.Fetch(bg, creds.Options{Catalog: catalog{ca: both, eps: []string{member.srv.URL}}, CAFingerprint: pin, IdentityFile: idf, Dir: dir, Logger: log}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "RE-PIN") {
		t.Fatalf("creds warned to re-pin while Consul still publishes the pinned CA: %q", logs.String())
	}
	// The rotation retired old (Consul publishes next alone; rotate-ca
	// deleted kv/ca-key-exposed). The attacker: old's key from a Consul
	// snapshot, and a service registration listed first.
	attacker := newExchanger(t, old, serverCert(t, old))
	r, err := creds.Fetch(bg, creds.Options{Catalog: catalog{ca: next.Cert, eps: []string{attacker.srv.URL, member.srv.URL}}, CAFingerprint: pin, IdentityFile: idf, Dir: dir, Logger: log})
	if err != nil {
		t.Fatalf("after the retirement: %v", err)
	}
	out := logs.String()
	if !strings.Contains(out, "RE-PIN") || !strings.Contains(out, pin) || !strings.Contains(out, certs.Fingerprint(next.Cert)) {
		t.Fatalf("creds answered by %s under a pin on a retired CA and did not warn to re-pin, naming the pin and the published CA; it logged: %q", r.Member, out)
	}
}
