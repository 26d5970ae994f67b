package integration_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
)

const accessRules = `
  access {
    role "billing" {
      read_write = ["/billing/"]
    }
    user "billing-api" {
      roles = ["billing"]
    }
  }
}
`

// evalEnv runs `eval $(etcd-nomad env ARGS...)` in a POSIX shell, as the
// docs/clients.md tells operators to, and returns the ETCDCTL_* variables it set.
func evalEnv(t *testing.T, args ...string) map[string]string {
	t.Helper()
	script := `eval $("$BIN" env "$@") && printf '%s\n' "$ETCDCTL_ENDPOINTS" "$ETCDCTL_CACERT" "$ETCDCTL_CERT" "$ETCDCTL_KEY"`
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Env = append(os.Environ(), "BIN="+binary)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("eval $(etcd-nomad env %s): %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("env set %q", lines)
	}
	t.Logf("env: %s", strings.TrimSpace(stderr.String()))
	return map[string]string{"ETCDCTL_ENDPOINTS": lines[0], "ETCDCTL_CACERT": lines[1], "ETCDCTL_CERT": lines[2], "ETCDCTL_KEY": lines[3]}
}

func envClient(t *testing.T, env map[string]string) *clientv3.Client {
	t.Helper()
	tlsCfg, err := certs.ClientConfig(certs.Files{CA: env["ETCDCTL_CACERT"], Cert: env["ETCDCTL_CERT"], Key: env["ETCDCTL_KEY"]})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(env["ETCDCTL_ENDPOINTS"], ","), TLS: tlsCfg, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func certCN(t *testing.T, path string) (string, time.Time) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.Subject.CommonName, c.NotAfter
}

// A 3-member cluster whose definition declares access rules: `eval $(env)`
// gives the operator root (member list, user list, any key) through
// private files; `env -user billing-api` gives that user, which the
// leader's rules confine to /billing/. With the pinned etcdctl built
// (make tools), the same eval line drives a real etcdctl.
func TestEnvAndAccessRules(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	dir := t.TempDir()
	tc := newCluster(t, dir, 3, 5*time.Second)
	cfg := tc.lay.Config()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := strings.TrimSuffix(strings.TrimRight(string(b), "\n"), "}") + accessRules
	if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	tc.startAll()
	tc.waitHealthy(60 * time.Second)

	credDir := filepath.Join(dir, "creds", "root")
	env := evalEnv(t, "-config", cfg, "-dir", credDir)
	if n := len(strings.Split(env["ETCDCTL_ENDPOINTS"], ",")); n != 3 {
		t.Errorf("%d endpoints, want 3: %s", n, env["ETCDCTL_ENDPOINTS"])
	}
	for path, want := range map[string]os.FileMode{credDir: 0o700, env["ETCDCTL_CERT"]: 0o600, env["ETCDCTL_KEY"]: 0o600, env["ETCDCTL_CACERT"]: 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %s, want %s", path, fi.Mode().Perm(), want)
		}
	}
	cn, until := certCN(t, env["ETCDCTL_CERT"])
	if cn != certs.RootUser {
		t.Errorf("operator certificate CN %q, want root", cn)
	}
	if d := time.Until(until); d > time.Hour || d < 50*time.Minute {
		t.Errorf("operator certificate valid for %s more, want about 1h", d)
	}
	ca, err := os.ReadFile(env["ETCDCTL_CACERT"])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(ca), "PRIVATE KEY") {
		t.Fatalf("the CA's private key was written beside the client certificate")
	}
	root := envClient(t, env)
	app := envClient(t, evalEnv(t, "-config", cfg, "-dir", filepath.Join(dir, "creds", "app"), "-user", "billing-api"))

	// The leader applies the rules within a loop or two of being healthy.
	waitFor(t, 30*time.Second, "billing-api confined to /billing/", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := app.Put(ctx, "/other/x", "v")
		if !errors.Is(err, rpctypes.ErrPermissionDenied) {
			return false, "put /other/x: " + errs(err)
		}
		_, err = app.Put(ctx, "/billing/x", "v")
		return err == nil, "put /billing/x: " + errs(err)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ml, err := root.MemberList(ctx)
	if err != nil || len(ml.Members) != 3 {
		t.Fatalf("member list as root: %v (%d members)", err, len(ml.Members))
	}
	ul, err := root.UserList(ctx)
	if err != nil {
		t.Fatalf("user list as root: %v", err)
	}
	if got := strings.Join(ul.Users, ","); got != "billing-api,root" {
		t.Errorf("etcd users %s, want billing-api,root", got)
	}
	if _, err := root.Put(ctx, "/other/x", "v"); err != nil {
		t.Errorf("root writes /other/x: %v", err)
	}

	etcdctl, err := devagents.Bin("etcdctl", devagents.EtcdctlVersion)
	if err != nil {
		t.Logf("real etcdctl not checked: %v", err)
		return
	}
	sh := exec.Command("sh", "-c", `eval $("$BIN" env -config "$CFG" -dir "$DIR") && "$ETCDCTL" member list && "$ETCDCTL" get /billing/x --print-value-only`)
	sh.Env = append(os.Environ(), "BIN="+binary, "CFG="+cfg, "DIR="+credDir, "ETCDCTL="+etcdctl)
	var stderr strings.Builder
	sh.Stderr = &stderr
	out, err := sh.Output()
	if err != nil {
		t.Fatalf("etcdctl with the eval line: %v\n%s%s", err, out, stderr.String())
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 4 || lines[3] != "v" || !strings.Contains(lines[0], "started") {
		t.Errorf("etcdctl member list + get printed:\n%s", out)
	}
}
