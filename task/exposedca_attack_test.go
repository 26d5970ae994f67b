package task_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/status"
	"github.com/etcd-nomad/etcd-nomad/task"
	"github.com/etcd-nomad/etcd-nomad/task/trust"
)

// Migration of a plaintext CA (docs/security.md): a member that migrates the plaintext cluster CA of an
// earlier version to the sealed form marks the CA's key exposed in the
// coordinator (clusterca.ExposedKey, kept across restarts) before it
// deletes the plaintext copy, and warns in /health, /status and `status`
// (status.Format) while it trusts that CA; `tls rotate-ca` (trust.RotateCA)
// ends the warning and deletes the mark. Before this change the migration
// said nothing: the key in every earlier Consul snapshot stayed valid
// silently.
func TestPlaintextCAMigrationWarnsUntilARotation(t *testing.T) {
	cl, co := localCACluster(t, 1)
	bg := context.Background()
	ca := newCA(t)
	saveCA(t, cl, ca)
	if _, err := co.LoadOrStore(bg, clusterca.PlainKey, ca.Bundle()); err != nil {
		t.Fatal(err)
	}
	kek := bytes.Repeat([]byte{4}, certs.KEKSize)
	ctx, cancel := context.WithCancel(bg)
	m, err := task.New(ctx, caOptions(t, cl, co, kek))
	if err != nil {
		t.Fatal(err)
	}
	runMemberUntil(t, m, ctx, cancel)
	fp := certs.Fingerprint(ca.Cert)
	clustertest.WaitFor(t, 30*time.Second, "the plaintext CA retired and marked exposed", func() (bool, string) {
		_, perr := co.Load(bg, clusterca.PlainKey)
		e, ok, err := clusterca.LoadExposure(bg, co)
		return errors.Is(perr, coord.ErrNotStored) && ok && e.CA == fp, fmt.Sprintf("plaintext: %v; mark %+v %v %v", perr, e, ok, err)
	})
	base := "https://127.0.0.1:" + itoa(cl.Provider.Static[0].StatusPort)
	stTLS, _, err := backends.StatusTLS(bg, cl, co)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: stTLS}}
	defer hc.CloseIdleConnections()
	clustertest.WaitFor(t, time.Minute, "/health and /status to warn of the exposed key", func() (bool, string) {
		code, body := get(t, hc, base+"/health")
		st, err := status.Fetch(bg, hc, base)
		return code == http.StatusOK && strings.Contains(body, "WARNING ca_key_exposed") && strings.Contains(body, fp) &&
				err == nil && strings.Contains(st.CAKeyExposed, "tls rotate-ca") &&
				strings.Contains(status.Format(status.Cluster{Members: []status.Member{st}}), "CA KEY EXPOSED"),
			fmt.Sprintf("/health %d %s; /status %q %v", code, body, st.CAKeyExposed, err)
	})

	members := func(ctx context.Context) ([]status.Member, error) {
		st, err := status.Fetch(ctx, hc, base)
		if err != nil {
			return []status.Member{{Name: "m0", Unreachable: true}}, nil
		}
		return []status.Member{st}, nil
	}
	rctx, rcancel := context.WithTimeout(bg, 90*time.Second)
	defer rcancel()
	var last string
	if err := trust.RotateCA(rctx, trust.RotateOptions{Cluster: cl, Coordinator: co, KEK: kek, Members: members, Poll: 200 * time.Millisecond,
		Progress: func(s string) { t.Log("rotate-ca: " + s); last = s }}); err != nil {
		t.Fatal(err)
	}
	// Applications pinned to the exposed CA still trust it: the command's
	// last line tells the operator to re-pin them, with the new
	// fingerprint.
	if next, err := clusterca.Read(bg, co, cl.Name, kek); err != nil || !strings.Contains(last, "re-pin") || !strings.Contains(last, certs.Fingerprint(next.Cert)) {
		t.Errorf("rotate-ca's last line %q does not tell to re-pin the applications to the new CA (%v)", last, err)
	}
	if _, ok, err := clusterca.LoadExposure(bg, co); ok || err != nil {
		t.Errorf("the mark after the rotation: %v %v, want none", ok, err)
	}
	clustertest.WaitFor(t, time.Minute, "/health and /status without the warning", func() (bool, string) {
		code, body := get(t, hc, base+"/health")
		st, err := status.Fetch(bg, hc, base)
		return code == http.StatusOK && !strings.Contains(body, "ca_key_exposed") && err == nil && st.CAKeyExposed == "",
			fmt.Sprintf("/health %d %s; /status %q %v", code, body, st.CAKeyExposed, err)
	})
}
