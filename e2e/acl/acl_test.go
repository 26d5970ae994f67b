// Package acl_test runs etcd-nomad against real Consul and Nomad dev agents
// with ACLs enabled (default deny, bootstrapped): without a token the CLI
// names the missing token; with tokens a cluster deploys and becomes
// healthy, and no token appears in any output.
package acl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/coord/consul"
	"github.com/etcd-nomad/etcd-nomad/internal/clusterdef"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest/nomadjob"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/localmode"
)

var (
	binary  string
	cagent  *devagents.Agent
	nagent  *devagents.Agent
	workDir string
)

// TestMain builds etcd-nomad and starts Consul and Nomad dev agents with
// ACLs; in the short tier (-short) it does none of it and every test skips.
func TestMain(m *testing.M) {
	os.Exit(tier.Main(m, run))
}

func run(m *testing.M) int {
	var err error
	workDir, err = os.MkdirTemp("", "etcd-nomad-acl-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(workDir)
	if binary, err = nomadjob.Build(workDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if cagent, err = devagents.StartConsulWith(ctx, filepath.Join(workDir, "consul"), devagents.Options{ACL: true}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cagent.Stop(15 * time.Second)
	if nagent, err = devagents.StartNomadWith(ctx, filepath.Join(workDir, "nomad"), cagent.Addr, devagents.Options{ACL: true, ConsulToken: cagent.Token}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer nagent.Stop(30 * time.Second)
	return m.Run()
}

func writeDefinition(t *testing.T, name string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "cluster.hcl")
	def := clusterdef.Definition{Name: name, Size: 1, StaleAfter: "5s", Prefix: "etcd-nomad-acl", Nomad: clusterdef.SingleClient(cagent.Addr)}.HCL()
	if err := os.WriteFile(file, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// cli runs the etcd-nomad binary with the agents' addresses and extra env
// (and none of the caller's tokens), returning combined output and exit code.
func cli(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var base []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONSUL_HTTP_TOKEN") && !strings.HasPrefix(kv, "NOMAD_TOKEN") {
			base = append(base, kv)
		}
	}
	cmd.Env = append(append(base, "CONSUL_HTTP_ADDR="+strings.TrimPrefix(cagent.Addr, "http://"), "NOMAD_ADDR="+nagent.Addr), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%v: %v", args, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// assertClearError: non-zero exit, the message names want, and it is a
// short message, not a stack of HTTP errors.
func assertClearError(t *testing.T, out string, code int, want ...string) {
	t.Helper()
	t.Logf("exit %d:\n%s", code, out)
	if code == 0 {
		t.Fatalf("exit code 0, want non-zero; output:\n%s", out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output does not name %q:\n%s", w, out)
		}
	}
	if n := strings.Count(out, "Unexpected response code"); n > 1 {
		t.Errorf("output repeats %d raw HTTP errors:\n%s", n, out)
	}
	if lines := strings.Count(strings.TrimSpace(out), "\n") + 1; lines > 3 {
		t.Errorf("output has %d lines, want a short message:\n%s", lines, out)
	}
}

func TestNoTokenNamesTheMissingToken(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents with ACLs")
	file := writeDefinition(t, "acl-notoken")
	t.Run("status without CONSUL_HTTP_TOKEN", func(t *testing.T) {
		out, code := cli(t, nil, "status", "-config", file)
		assertClearError(t, out, code, "CONSUL_HTTP_TOKEN", cagent.Addr, "no Consul ACL token is set", `"etcd-nomad-acl/acl-notoken/"`)
	})
	t.Run("status with a wrong CONSUL_HTTP_TOKEN", func(t *testing.T) {
		out, code := cli(t, []string{"CONSUL_HTTP_TOKEN=00000000-0000-4000-8000-000000000000"}, "status", "-config", file)
		assertClearError(t, out, code, "CONSUL_HTTP_TOKEN", "unknown or lacks permission")
	})
	t.Run("status without NOMAD_TOKEN", func(t *testing.T) {
		out, code := cli(t, []string{"CONSUL_HTTP_TOKEN=" + cagent.Token}, "status", "-config", file)
		assertClearError(t, out, code, "NOMAD_TOKEN", nagent.Addr, "no Nomad ACL token is set")
	})
	t.Run("job run without NOMAD_TOKEN", func(t *testing.T) {
		out, code := cli(t, nil, "job", "run", "-binary", binary, "-timeout", "1m", file)
		assertClearError(t, out, code, "NOMAD_TOKEN", nagent.Addr, "no Nomad ACL token is set")
	})
}

// TestCoordinatorWithToken: the Consul coordinator's lock and record work
// under default-deny ACLs with a token, and are refused with ErrDenied
// without one.
func TestCoordinatorWithToken(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents with ACLs")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	newCoord := func(token string) *consul.Coordinator {
		cfg := consulapi.DefaultConfig()
		cfg.Address, cfg.Token = strings.TrimPrefix(cagent.Addr, "http://"), token
		c, err := consulapi.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		co, err := consul.New(consul.Options{Client: c, Prefix: "etcd-nomad-acl/coord", Addr: cagent.Addr, TokenSet: token != ""})
		if err != nil {
			t.Fatal(err)
		}
		return co
	}
	if _, err := newCoord("").Lock(ctx, "anonymous"); !errors.Is(err, consul.ErrDenied) {
		t.Fatalf("lock without a token: %v, want ErrDenied", err)
	}
	if _, err := newCoord("").Record(ctx); !errors.Is(err, consul.ErrDenied) || !strings.Contains(err.Error(), "CONSUL_HTTP_TOKEN") {
		t.Fatalf("record without a token: %v, want ErrDenied naming CONSUL_HTTP_TOKEN", err)
	}
	co := newCoord(cagent.Token)
	l, err := co.Lock(ctx, "tester")
	if err != nil {
		t.Fatalf("lock with the management token: %v", err)
	}
	defer l.Unlock(context.Background())
	if _, err := co.Record(ctx); !errors.Is(err, coord.ErrNoRecord) {
		t.Fatalf("record before creation: %v, want ErrNoRecord", err)
	}
	created, err := co.CreateRecord(ctx, l, coord.Record{Token: "t", Epoch: 1, Seeder: "tester"})
	if err != nil {
		t.Fatalf("create record: %v", err)
	}
	got, err := co.Record(ctx)
	if err != nil || got.Token != "t" || got.Index != created.Index {
		t.Fatalf("record = %+v, %v; want token t at index %d", got, err, created.Index)
	}
}

// TestJobRunWithTokens deploys a one-member cluster with `job run` under
// ACLs: the members get NOMAD_TOKEN from their workload identity (policy
// attached by job run) and CONSUL_HTTP_TOKEN from the job's Nomad variable.
func TestJobRunWithTokens(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents with ACLs")
	name := "acl-run"
	file := writeDefinition(t, name)
	// The members get a Consul token with exactly the policy docs/security.md
	// documents, not the management token.
	memberToken := consulMemberToken(t, "etcd-nomad-acl/"+name+"/")
	env := []string{"CONSUL_HTTP_TOKEN=" + cagent.Token, "NOMAD_TOKEN=" + nagent.Token}
	runEnv := []string{"CONSUL_HTTP_TOKEN=" + memberToken, "NOMAD_TOKEN=" + nagent.Token}
	t.Cleanup(func() {
		stop := exec.Command(devagentsNomad(t), "job", "stop", "-purge", "-address", nagent.Addr, name)
		stop.Env = append(os.Environ(), "NOMAD_TOKEN="+nagent.Token)
		_ = stop.Run()
	})
	out, code := cli(t, runEnv, "job", "run", "-binary", binary, "-timeout", "4m", "-store-consul-token", file)
	if code != 0 {
		t.Fatalf("job run under ACLs: exit %d\n%s%s", code, out, allocLogs(t, name))
	}
	for _, secret := range []string{cagent.Token, nagent.Token, memberToken} {
		if strings.Contains(out, secret) {
			t.Errorf("job run printed a token:\n%s", out)
		}
	}
	var last string
	clustertest.WaitFor(t, 3*time.Minute, "status shows a healthy leader", func() (bool, string) {
		var code int
		last, code = cli(t, env, "status", "-config", file)
		return code == 0 && strings.Contains(last, "leader"), last
	})
	t.Logf("job run:\n%s\nstatus:\n%s", out, last)
	for _, secret := range []string{cagent.Token, nagent.Token, memberToken} {
		if strings.Contains(last, secret) {
			t.Errorf("status printed a token:\n%s", last)
		}
	}
	if logs := allocLogs(t, name); strings.Contains(logs, cagent.Token) || strings.Contains(logs, nagent.Token) || strings.Contains(logs, memberToken) {
		t.Errorf("member logs contain a token")
	}
}

func devagentsNomad(t *testing.T) string {
	bin, err := devagents.Bin("nomad", devagents.NomadVersion)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// allocLogs is the stderr of every allocation of the job on the dev agent.
func allocLogs(t *testing.T, job string) string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(nagent.AllocDir, "*", "alloc", "logs", "etcd.std*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err == nil {
			fmt.Fprintf(&b, "--- %s\n%s", f, data)
		}
	}
	return b.String()
}

// TestMemberWithoutTokenSaysSo: a member (static provider, Consul
// coordination) started without CONSUL_HTTP_TOKEN logs which token is
// missing instead of raw HTTP errors, and keeps retrying.
func TestMemberWithoutTokenSaysSo(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents with ACLs")
	dir := t.TempDir()
	ports, err := localmode.AllocatePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	lay := localmode.Layout{Dir: dir}
	if err := lay.WriteConfig(localmode.Options{Name: "acl-member", ConsulPrefix: "etcd-nomad-acl"}, ports); err != nil {
		t.Fatal(err)
	}
	file := lay.Config()
	logPath := filepath.Join(dir, "member.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(binary, "member", "-config", file, "-name", "m0")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONSUL_HTTP_TOKEN") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "CONSUL_HTTP_ADDR="+strings.TrimPrefix(cagent.Addr, "http://"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	var logs string
	clustertest.WaitFor(t, time.Minute, "the member names CONSUL_HTTP_TOKEN", func() (bool, string) {
		b, _ := os.ReadFile(logPath)
		logs = string(b)
		select {
		case err := <-exited:
			exited <- err
			return true, logs
		default:
		}
		return strings.Contains(logs, "no Consul ACL token is set; set CONSUL_HTTP_TOKEN"), logs
	})
	if !strings.Contains(logs, "no Consul ACL token is set; set CONSUL_HTTP_TOKEN") {
		t.Fatalf("member exited without naming CONSUL_HTTP_TOKEN:\n%s", logs)
	}
	t.Logf("member log:\n%s", clustertest.SupervisorLines(logs, 5))
}

// consulMemberToken creates a Consul token with the members' documented
// policy on prefix: key_prefix write and session_prefix "" write.
func consulMemberToken(t *testing.T, prefix string) string {
	t.Helper()
	cfg := consulapi.DefaultConfig()
	cfg.Address, cfg.Token = strings.TrimPrefix(cagent.Addr, "http://"), cagent.Token
	c, err := consulapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rules := fmt.Sprintf("key_prefix %q {\n  policy = \"write\"\n}\nsession_prefix \"\" {\n  policy = \"write\"\n}\n", prefix)
	pol, _, err := c.ACL().PolicyCreate(&consulapi.ACLPolicy{Name: "etcd-nomad-member-" + strings.Trim(strings.ReplaceAll(prefix, "/", "-"), "-"), Rules: rules}, nil)
	if err != nil {
		t.Fatalf("create consul policy: %v", err)
	}
	tok, _, err := c.ACL().TokenCreate(&consulapi.ACLToken{Description: "etcd-nomad members", Policies: []*consulapi.ACLTokenPolicyLink{{ID: pol.ID}}}, nil)
	if err != nil {
		t.Fatalf("create consul token: %v", err)
	}
	return tok.SecretID
}
