package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/jobs"
)

// installDoc is the document (moved out of the README) that holds the
// paths an operator follows to install a cluster.
var installDoc = filepath.Join("..", "docs", "install.md")

// readmeSection is the section of installDoc whose first sh block is the
// path an operator follows on their own Nomad cluster.
const readmeSection = "## On your own Nomad cluster"

// readmeCommands returns the commands of the n-th (from 0) ```sh block
// after heading in installDoc, comments and blank lines dropped, in order.
func readmeCommands(t *testing.T, heading string, n int) []string {
	t.Helper()
	b, err := os.ReadFile(installDoc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s has no section %q", installDoc, heading)
	}
	text = text[i:]
	for k := 0; ; k++ {
		start := strings.Index(text, "\n```sh\n")
		if start < 0 {
			t.Fatalf("%s section %q has no sh block %d", installDoc, heading, n)
		}
		text = text[start+len("\n```sh\n"):]
		if k == n {
			break
		}
	}
	text = text[:strings.Index(text, "\n```")]
	var cmds []string
	for line := range strings.SplitSeq(text, "\n") {
		if j := strings.Index(line, "#"); j >= 0 && (j == 0 || line[j-1] == ' ') {
			line = line[:j]
		}
		if line = strings.TrimSpace(line); line != "" {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// The sections the agent tests run literally are where they look, and
// hold the commands they run: without agents (-short too), so a moved or
// edited document fails here before the long tests.
func TestInstallDocHoldsTheCommandsTheAgentTestsRun(t *testing.T) {
	for _, c := range []struct {
		heading string
		n       int
		want    []string
	}{
		{readmeSection, 0, []string{"etcd-nomad validate cluster.hcl", "etcd-nomad job render cluster.hcl > etcd.nomad.hcl", "nomad job run etcd.nomad.hcl", "etcd-nomad status -config cluster.hcl"}},
		{dockerSection, 1, []string{"etcd-nomad validate cluster.hcl", "etcd-nomad job render cluster.hcl > etcd.nomad.hcl", "nomad job run etcd.nomad.hcl"}},
	} {
		got := readmeCommands(t, c.heading, c.n)
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s %q block %d: %q, want %q", installDoc, c.heading, c.n, got, c.want)
		}
	}
}

// The documented path on one's own Nomad cluster (installDoc, once the
// README's), run literally: validate,
// job render, the plain `nomad job run`, status. Nobody creates the
// cluster CA's key encryption key first (not `etcd-nomad job run`, not the
// test): the members create it in the job's variable. The cluster must
// come up healthy, answer etcdctl over TLS with the credentials `env`
// gives, and keep its CA in Consul sealed. Before members created the KEK themselves every
// member exited with "set ETCD_NOMAD_CA_KEK" until Nomad failed it.
func TestReadmeNomadPathComesUpWithTheCASealed(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	cmds := readmeCommands(t, readmeSection, 0)
	t.Logf("%s %q: %q", installDoc, readmeSection, cmds)
	c := newCluster(t, "readme", 3)
	// The definition names the binary, as installDoc asks (no -binary).
	def := strings.Replace(mustRead(t, c.file), "  nomad {\n", fmt.Sprintf("  nomad {\n    binary = %q\n", binary), 1)
	if err := os.WriteFile(c.file, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if kek, err := jobs.ReadCAKEK(ctx, nomadClient(t), c.name, ""); err != nil || kek != "" {
		t.Fatalf("the job's variable holds a key before the documented path (%v): not a plain run", err)
	}

	env := operatorEnv(t)
	start := time.Now()
	runLines(t, c.dir, env, cmds, 4*time.Minute)
	t.Logf("the documented path took %s", time.Since(start).Round(100*time.Millisecond))
	c.waitPassing(3, time.Minute)

	// etcdctl over TLS with the credentials the documented `env` line gives.
	etcdctl, err := devagents.Bin("etcdctl", devagents.EtcdctlVersion)
	if err != nil {
		t.Fatalf("etcdctl (make tools): %v", err)
	}
	sh := exec.CommandContext(ctx, "sh", "-c", `eval $(etcd-nomad env -config cluster.hcl) && case "$ETCDCTL_ENDPOINTS" in https://*) ;; *) exit 3;; esac && "$ETCDCTL" endpoint health && "$ETCDCTL" put readme path && "$ETCDCTL" get readme --print-value-only`)
	sh.Dir, sh.Env = c.dir, append(env, "ETCDCTL="+etcdctl)
	out, err := sh.CombinedOutput()
	if err != nil || strings.Count(string(out), "is healthy") != 3 || !strings.HasSuffix(strings.TrimSpace(string(out)), "path") {
		t.Fatalf("etcdctl over TLS: %v\n%s", err, out)
	}

	// One key, created by a member, in the job's variable; the CA in
	// Consul sealed with it, nowhere in the clear.
	text, err := jobs.ReadCAKEK(ctx, nomadClient(t), c.name, "")
	if err != nil || text == "" {
		t.Fatalf("the job's variable holds no key after the run: %v", err)
	}
	kek, err := certs.ParseKEK(text)
	if err != nil {
		t.Fatal(err)
	}
	co, err := backends.Coordinator(c.config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := co.Load(ctx, clusterca.SealedKey); err != nil {
		t.Fatalf("no sealed CA in Consul: %v", err)
	}
	ca, err := clusterca.Read(ctx, co, c.name, kek)
	if err != nil {
		t.Fatalf("the sealed CA does not open with the variable's key: %v", err)
	}
	prefix := "etcd-nomad-e2e/" + c.name + "/"
	clustertest.NoCAKeyInKV(t, consulClient(t).KV(), prefix, ca.Cert, prefix+"kv/ca")
	created := 0
	for _, a := range c.allocs() {
		if strings.Contains(allocLog(a.ID), "created the cluster CA's key encryption key") {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d members say they created the key encryption key, want 1", created)
	}
}

// operatorEnv is an operator's environment: etcd-nomad and nomad on PATH.
func operatorEnv(t *testing.T) []string {
	t.Helper()
	bin := t.TempDir()
	for name, target := range map[string]string{"etcd-nomad": binary, "nomad": nomadBin} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	return append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "XDG_RUNTIME_DIR="+t.TempDir())
}

// runLines runs each line with sh in dir and env, logging its output, and
// fails t at the first that fails or when they take longer than timeout.
func runLines(t *testing.T, dir string, env, lines []string, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, line := range lines {
		sh := exec.CommandContext(ctx, "sh", "-c", line)
		sh.Dir, sh.Env = dir, env
		// At the deadline the whole command goes (sh forks nomad, which
		// keeps following a deployment whose members never pass).
		sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		sh.Cancel = func() error { return syscall.Kill(-sh.Process.Pid, syscall.SIGTERM) }
		sh.WaitDelay = 10 * time.Second
		out, err := sh.CombinedOutput()
		t.Logf("$ %s (%s)\n%s", line, time.Since(start).Round(time.Second), out)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
