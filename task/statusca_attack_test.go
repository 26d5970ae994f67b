package task_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/task"
)

// A writer of the coordinator's keys stores a status CA of its own under
// status-ca. Members never accept its certificates (they derive the status
// CA from the cluster CA), but every read-only client (`status`, `tls
// status-cert`, Prometheus) issues from the stored one, so the attacker
// blinds them all; storing it create-only, members never replaced it
// (security review of session 11, suspected LOW). Now a member replaces it
// at start and at every CA check, and /status answers the stored issuer's
// certificates again.
func TestPlantedStatusCAIsReplacedByTheMembers(t *testing.T) {
	cl, co := localCACluster(t, 1)
	bg := context.Background()
	ca := newCA(t)
	saveCA(t, cl, ca)
	kek := bytes.Repeat([]byte{5}, certs.KEKSize)
	if _, err := clusterca.Offer(bg, co, ca, kek); err != nil {
		t.Fatal(err)
	}
	planted, err := certs.StatusCA(newCA(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := co.Delete(bg, clusterca.StatusKey); err != nil {
		t.Fatal(err)
	}
	if _, err := co.LoadOrStore(bg, clusterca.StatusKey, planted.Bundle()); err != nil {
		t.Fatal(err)
	}
	want, err := certs.StatusCA(ca)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(bg)
	m, err := task.New(ctx, caOptions(t, cl, co, kek))
	if err != nil {
		t.Fatal(err)
	}
	runMemberUntil(t, m, ctx, cancel)
	clustertest.WaitFor(t, 30*time.Second, "the planted status CA replaced by the one the cluster CA derives", func() (bool, string) {
		b, err := co.Load(bg, clusterca.StatusKey)
		return err == nil && bytes.Equal(b, want.Bundle()), fmt.Sprintf("stored %s (%v), want %s", certs.Fingerprint(b), err, certs.Fingerprint(want.Cert))
	})
	stTLS, _, err := backends.StatusTLS(bg, cl, co)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: stTLS}}
	defer hc.CloseIdleConnections()
	base := "https://127.0.0.1:" + itoa(cl.Provider.Static[0].StatusPort)
	clustertest.WaitFor(t, 30*time.Second, "/status to answer the stored status CA's certificate", func() (bool, string) {
		code, body := get(t, hc, base+"/status")
		return code == http.StatusOK, fmt.Sprintf("%d %.200s", code, body)
	})
}
