package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/clusterdef"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Members on agents with TLS: a Consul agent that serves HTTPS only and
// requires client certificates, and a Nomad agent with TLS on HTTP and RPC
// that requires them too (devagents' TLS mode, certificates from a CA made
// here). The job names nothing about Nomad (its members use the task API
// socket) and Consul's HTTPS address, CA and a client certificate
// (nomad { consul { } }). The operator's side uses the ecosystem's
// variables (NOMAD_CACERT, NOMAD_CLIENT_CERT, CONSUL_CACERT, ...):
// 'etcd-nomad job run' deploys three members, they pass their checks in
// Consul, 'etcd-nomad status' reads them, and the cluster serves a write.
func TestMemberOnTLSAgents(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	const name, size = "e2e-tls", 3
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	tl, err := devagents.NewTLS(filepath.Join(dir, "tls"))
	if err != nil {
		t.Fatal(err)
	}
	startCtx, startCancel := context.WithTimeout(ctx, 2*time.Minute)
	defer startCancel()
	ca, err := devagents.StartConsulWith(startCtx, filepath.Join(dir, "consul"), devagents.Options{TLS: tl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ca.Stop(15 * time.Second) })
	na, err := devagents.StartNomadWith(startCtx, filepath.Join(dir, "nomad"), ca.Addr, devagents.Options{TLS: tl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { na.Stop(30 * time.Second) })

	// The operator's shell (and this test's clients): this pair of agents,
	// over TLS.
	for _, kv := range append(tl.NomadEnv(na.Addr), tl.ConsulEnv(ca.Addr)...) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ncli, err := nomadapi.NewClient(nomadapi.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ccli, err := consulapi.NewClient(consulapi.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(dir, "cluster.hcl")
	def := clusterdef.Definition{Name: name, Size: size, StaleAfter: "5s", Prefix: "etcd-nomad-e2e",
		Nomad: clusterdef.SingleClientTLS(ca.Addr, tl.CAFile, tl.ClientCertFile, tl.ClientKeyFile)}.HCL()
	if err := os.WriteFile(file, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpAllocLogs(t, ncli, na.AllocDir, name)
		}
		if out, err := exec.Command(nomadBin, "job", "stop", "-detach", "-yes", name).CombinedOutput(); err != nil {
			t.Logf("nomad job stop: %v\n%s", err, out)
		}
		stopCtx, stopCancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer stopCancel()
		if err := nomadglue.WaitStopped(stopCtx, ncli, name, ""); err != nil {
			t.Error(err)
		}
	})

	out, err := exec.Command(binary, "job", "run", "-binary", binary, "-timeout", "4m", file).CombinedOutput()
	if err != nil {
		t.Fatalf("etcd-nomad job run with TLS agents: %v\n%s", err, out)
	}
	rendered, err := exec.Command(binary, "job", "render", "-binary", binary, file).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`NOMAD_ADDR             = "${NOMAD_UNIX_ADDR}"`, `CONSUL_CACERT          = "` + tl.CAFile + `"`, `CONSUL_CLIENT_CERT     = "` + tl.ClientCertFile + `"`} {
		if !strings.Contains(string(rendered), want) {
			t.Errorf("rendered job lacks %s", want)
		}
	}

	waitFor(t, 2*time.Minute, fmt.Sprintf("%d passing Consul checks over HTTPS", size), func() (bool, string) {
		ch, err := status.ConsulChecks(ctx, ccli, name)
		if err != nil {
			return false, err.Error()
		}
		return ch.Passing == size && ch.Total == size, fmt.Sprintf("%d/%d passing\n%s", ch.Passing, ch.Total, strings.Join(ch.Lines, "\n"))
	})

	if out, err := exec.Command(binary, "status", "-config", file).CombinedOutput(); err != nil {
		t.Errorf("etcd-nomad status with TLS agents: %v\n%s", err, out)
	} else {
		t.Logf("etcd-nomad status:\n%s", out)
	}

	cl, _, diags := config.LoadFile(file)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	kek, err := jobs.EnsureCAKEK(ctx, ncli, name, "")
	if err != nil {
		t.Fatal(err)
	}
	kekBytes, err := certs.ParseKEK(kek)
	if err != nil {
		t.Fatal(err)
	}
	bc, err := backends.OpenClient(cl)
	if err != nil {
		t.Fatal(err)
	}
	tc, _, err := bc.EtcdTLS(ctx, kekBytes)
	if err != nil {
		t.Fatal(err)
	}
	st, err := status.Gather(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	var eps []string
	for _, m := range st.Members {
		if m.ClientURL != "" {
			eps = append(eps, m.ClientURL)
		}
	}
	if len(eps) != size {
		t.Fatalf("status found %d member endpoints, want %d: %+v", len(eps), size, st.Members)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: tc, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	putCtx, putCancel := context.WithTimeout(ctx, 10*time.Second)
	defer putCancel()
	if _, err := cli.Put(putCtx, "/tls/greeting", "hello"); err != nil {
		t.Fatalf("put: %v", err)
	}
	voters, learners, _, err := memberList(cli)
	if err != nil || voters != size || learners != 0 {
		t.Errorf("member list: %d voters, %d learners (%v), want %d voters", voters, learners, err, size)
	}
}

// dumpAllocLogs logs the supervisor's lines of each allocation of job on
// the Nomad client whose alloc_dir is allocDir.
func dumpAllocLogs(t *testing.T, cli *nomadapi.Client, allocDir, job string) {
	list, _, err := cli.Jobs().Allocations(job, true, nil)
	if err != nil {
		t.Logf("allocations of %s: %v", job, err)
		return
	}
	for _, a := range list {
		b, err := os.ReadFile(filepath.Join(allocDir, a.ID, "alloc", "logs", "etcd.stderr.0"))
		if err != nil {
			continue
		}
		t.Logf("=== alloc %s (%s, %s)\n%s", a.ID[:8], a.ClientStatus, a.DesiredStatus, clustertest.SupervisorLines(string(b), 40))
	}
}
