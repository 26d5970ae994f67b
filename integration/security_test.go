package integration_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/internal/tier"
)

// Known secrets handed to a real member and the CLI: none may appear in
// their logs or output.
const (
	testPassphrase = "pass-phrase-7f3a9c1e-never-logged"
	testAWSSecret  = "aws-secret-2b8d4e6f-never-logged"
)

// TestSecretsAndPermissions runs a one-member cluster with TLS auto and an
// encrypted file snapshot store, saves a snapshot with the CLI, then checks
// (1) the snapshot passphrase, an AWS secret key in the environment and the
// TLS private keys never appear in the member's log or the CLI's output,
// and (2) every file the member, the coordinator, the snapshot store and
// the CLI wrote is 0600-or-stricter and every directory 0700-or-stricter.
func TestSecretsAndPermissions(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	t.Setenv("ETCD_NOMAD_TEST_PASSPHRASE", testPassphrase)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testAWSSecret)
	dir := t.TempDir()
	tc := newCluster(t, dir, 1, 5*time.Second)
	tc.opts.SnapshotDir = filepath.Join(dir, "snapshots")
	tc.opts.SnapshotPassphraseEnv = "ETCD_NOMAD_TEST_PASSPHRASE"
	if err := tc.lay.WriteConfig(tc.opts, tc.ports); err != nil {
		t.Fatal(err)
	}
	tc.startAll()
	tc.waitHealthy(60 * time.Second)
	// `snapshot save` stamps what the streaming member's data runs and
	// refuses while the record is not yet confirmed (a record the data
	// disagrees with): wait for the confirmation, as an operator would.
	tc.waitConfirmed(60 * time.Second)
	putKeys(t, tc.client(), "k", 10)
	cfg := tc.lay.Config()
	var outputs strings.Builder
	for _, args := range [][]string{
		{"snapshot", "save", "-config", cfg},
		{"snapshot", "list", "-config", cfg},
		{"snapshot", "verify", "-config", cfg, "latest"},
		{"status", "-config", cfg},
	} {
		outputs.WriteString(cli(t, args...))
	}
	if !strings.Contains(outputs.String(), ": OK") {
		t.Fatalf("snapshot verify did not pass:\n%s", outputs.String())
	}
	// Stop the member so its log is complete.
	if err := tc.sup.Stop("m0", 20*time.Second); err != nil {
		t.Fatal(err)
	}

	// Every private key on disk: the member's, the client's, the CA's (in
	// the coordinator's KV).
	var keys, bad []string
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		switch {
		case mode.IsDir() && path != dir && mode.Perm()&0o077 != 0:
			bad = append(bad, path+" "+mode.String())
		case mode.IsRegular() && mode.Perm()&0o077 != 0:
			bad = append(bad, path+" "+mode.String())
		}
		if mode.IsRegular() {
			files++
		}
		if mode.IsRegular() && !strings.Contains(path, string(filepath.Separator)+"logs"+string(filepath.Separator)) {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			keys = append(keys, pemKeyBodies(string(b))...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("checked %d files under %s; %d private keys found", files, dir, len(keys))
	if len(bad) > 0 {
		t.Errorf("group/world-accessible paths:\n%s", strings.Join(bad, "\n"))
	}
	if len(keys) < 2 {
		t.Fatalf("found %d PEM private keys on disk, want at least the member's and the CA's", len(keys))
	}
	logs := logOf(t, tc.lay, "m0") + outputs.String()
	if len(logs) < 1000 {
		t.Fatalf("member log and CLI output are suspiciously short (%d bytes)", len(logs))
	}
	for what, secret := range map[string]string{"snapshot passphrase": testPassphrase, "AWS secret key": testAWSSecret} {
		if strings.Contains(logs, secret) {
			t.Errorf("the %s appears in the member log or CLI output", what)
		}
	}
	if strings.Contains(logs, "PRIVATE KEY") {
		t.Errorf("a PEM private key block appears in the member log or CLI output")
	}
	for _, k := range keys {
		if strings.Contains(logs, k) {
			t.Errorf("a TLS private key's body appears in the member log or CLI output")
		}
	}
}

// pemKeyBodies returns the first base64 line of every PEM private key
// block in s (enough to recognise the key in a log).
func pemKeyBodies(s string) []string {
	var out []string
	for {
		i := strings.Index(s, "PRIVATE KEY-----")
		if i < 0 {
			return out
		}
		s = s[i+len("PRIVATE KEY-----"):]
		// JSON-escaped PEM (the coordinator's KV) uses \n.
		s = strings.TrimLeft(strings.ReplaceAll(s[:min(len(s), 200)], `\n`, "\n")+s[min(len(s), 200):], "\r\n")
		line, _, _ := strings.Cut(s, "\n")
		if len(line) >= 32 {
			out = append(out, line[:32])
		}
	}
}
