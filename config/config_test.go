package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// exampleWarnings lists the warnings an example may show, by file name
// and summary; any other diagnostic fails TestExamplesValidate.
var exampleWarnings = map[string][]string{
	// The example's store is left unencrypted for brevity; validate says so.
	"nomad.hcl": {SummaryUnencryptedSnapshots},
}

// Every file in examples/ validates: no error, and no warning unless
// exampleWarnings lists it.
func TestExamplesValidate(t *testing.T) {
	files, err := filepath.Glob("../examples/*")
	if err != nil || len(files) < 4 {
		t.Fatalf("want >= 4 examples, got %v (%v)", files, err)
	}
	for _, f := range files {
		c, _, diags := LoadFile(f)
		checkExample(t, f, diags)
		if c != nil && c.Size < 1 {
			t.Errorf("%s: size %d", f, c.Size)
		}
	}
}

// commentedSetting is a commented-out setting an example suggests, such as
// `# data_dir = "..."`; adjacent ones are one alternative.
var commentedSetting = regexp.MustCompile(`^(\s*)# ([a-z_]+\s*=\s*\S.*)$`)

// The settings the examples suggest in comments validate too, each group
// of adjacent ones uncommented on its own. (examples/nomad.hcl suggested
// data_dir = "${NOMAD_ALLOC_DIR}/data", which HCL refuses.)
func TestExamplesCommentedSettingsValidate(t *testing.T) {
	files, err := filepath.Glob("../examples/*")
	if err != nil {
		t.Fatal(err)
	}
	groups := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(src), "\n")
		for i := 0; i < len(lines); i++ {
			if !commentedSetting.MatchString(lines[i]) {
				continue
			}
			alt := append([]string(nil), lines...)
			first := i
			for ; i < len(lines) && commentedSetting.MatchString(lines[i]); i++ {
				alt[i] = commentedSetting.ReplaceAllString(lines[i], "$1$2")
			}
			groups++
			name := fmt.Sprintf("%s (lines %d-%d uncommented)", f, first+1, i)
			_, _, diags := Load(name, []byte(strings.Join(alt, "\n")))
			checkExample(t, name, diags)
		}
	}
	if groups == 0 {
		t.Fatal("no commented settings found: the pattern no longer matches the examples")
	}
}

func checkExample(t *testing.T, name string, diags hcl.Diagnostics) {
	t.Helper()
	allowed := exampleWarnings[filepath.Base(strings.Fields(name)[0])]
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning && slices.Contains(allowed, d.Summary) {
			continue
		}
		t.Errorf("%s: %s", name, d.Error())
	}
}

func TestDefaults(t *testing.T) {
	src := `cluster "x" {
  data_dir = "/d"
  provider "static" {
    member "a" { address = "127.0.0.1" }
  }
  coordination "local" { dir = "c" }
}`
	c, _, diags := Load("/etc/x.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if c.Size != 1 || c.TLS.Mode != TLSAuto || c.Ports.Client != 2379 || c.Etcd.ElectionTimeout != time.Second {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if c.Coordination.Dir != "/etc/c" {
		t.Fatalf("relative dir not resolved against the file: %q", c.Coordination.Dir)
	}
	m := c.Provider.Static[0]
	if m.ClientPort != 2379 || m.PeerPort != 2380 || m.StatusPort != 2381 {
		t.Fatalf("member ports not defaulted: %+v", m)
	}
}

// diagAt reports whether diags holds an error whose summary contains
// summary and whose subject starts on line.
func diagAt(diags hcl.Diagnostics, summary string, line int) bool {
	for _, d := range diags {
		if d.Severity == hcl.DiagError && strings.Contains(d.Summary, summary) && d.Subject != nil && d.Subject.Start.Line == line {
			return true
		}
	}
	return false
}

func TestSemanticErrorsAllAtOnce(t *testing.T) {
	src := `cluster "Bad_Name" {
  size     = 11
  data_dir = "/d"
  ports {
    client = 2379
    peer   = 2379
  }
  etcd {
    heartbeat_interval = "100ms"
    election_timeout   = "200ms"
    quota_backend_bytes = "lots"
  }
  tls {
    mode    = "files"
    ca_file = "/nonexistent/ca.pem"
  }
  provider "static" {
    stale_after = "soon"
    member "a" { address = "127.0.0.1" }
  }
  coordination "local" { dir = "c" }
}`
	_, res, diags := Load("bad.hcl", []byte(src))
	want := []struct {
		summary string
		line    int
	}{
		{"Invalid cluster name", 1},
		{"Invalid size", 2},
		{"Duplicate port", 6},
		{"Election timeout too short", 10},
		{"Invalid size", 11},
		{"TLS file not readable", 15},
		{"Missing TLS file", 13},
		{"Invalid duration", 18},
	}
	for _, w := range want {
		if !diagAt(diags, w.summary, w.line) {
			t.Errorf("missing %q at line %d", w.summary, w.line)
		}
	}
	var buf bytes.Buffer
	if err := res.WriteDiagnostics(&buf, diags); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "bad.hcl line 6") || !strings.Contains(out, "peer   = 2379") {
		t.Errorf("diagnostics lack file, line or snippet:\n%s", out)
	}
	if t.Failed() {
		t.Log(out)
	}
}

func TestSyntaxError(t *testing.T) {
	_, res, diags := Load("broken.hcl", []byte("cluster \"x\" {\n  size = \n}\n"))
	if !diags.HasErrors() {
		t.Fatal("want a syntax error")
	}
	var buf bytes.Buffer
	_ = res.WriteDiagnostics(&buf, diags)
	if !strings.Contains(buf.String(), "broken.hcl line 2") {
		t.Fatalf("want file and line in:\n%s", buf.String())
	}
}

func TestUnknownAttributeInProvider(t *testing.T) {
	src := `cluster "x" {
  data_dir = "/d"
  provider "static" {
    member "a" { address = "127.0.0.1" }
    colour = "blue"
  }
  coordination "local" { dir = "c" }
}`
	_, _, diags := Load("x.hcl", []byte(src))
	if !diagAt(diags, "Unsupported argument", 5) {
		t.Fatalf("want an unsupported-argument error on line 5, got %s", diags.Error())
	}
}

func TestEvenSizeWarns(t *testing.T) {
	src := `cluster "x" {
  size = 4
  data_dir = "/d"
  provider "nomad" {}
  coordination "local" { dir = "c" }
}`
	c, _, diags := Load("x.hcl", []byte(src))
	if diags.HasErrors() || c == nil {
		t.Fatal(diags.Error())
	}
	found := false
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning && d.Summary == "Even cluster size" {
			found = true
		}
	}
	if !found {
		t.Fatalf("want an even-size warning, got %v", diags)
	}
}

func TestTLSFilesResolved(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"ca.pem", "c.pem", "k.pem"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src := `cluster "x" {
  data_dir = "d"
  tls {
    mode = "files"
    ca_file = "ca.pem"
    cert_file = "c.pem"
    key_file = "k.pem"
  }
  provider "static" {
    member "a" { address = "127.0.0.1" }
  }
  coordination "local" { dir = "c" }
}`
	c, _, diags := Load(filepath.Join(dir, "x.hcl"), []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if c.TLS.CAFile != filepath.Join(dir, "ca.pem") || c.DataDir != filepath.Join(dir, "d") {
		t.Fatalf("paths not resolved: %+v", c.TLS)
	}
}

// Passphrase encryption (scrypt, 256 MiB) under a Nomad memory limit too
// small for it is refused at the memory_mb line, not found out by an OOM
// kill in the first snapshot.
func TestPassphraseNeedsMemory(t *testing.T) {
	src := func(mem int) string {
		return fmt.Sprintf(`cluster "x" {
  provider "nomad" {}
  coordination "consul" {}
  snapshot {
    store "file" { path = "/s" }
    encryption { passphrase_env = "P" }
  }
  nomad {
    memory_mb = %d
  }
}`, mem)
	}
	_, _, diags := Load("x.hcl", []byte(src(128)))
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "x.hcl:9,17") || !strings.Contains(diags.Error(), "at least 384") {
		t.Fatalf("want an error at memory_mb (x.hcl:9,17) naming the minimum, got %v", diags)
	}
	if _, _, diags := Load("x.hcl", []byte(src(512))); diags.HasErrors() {
		t.Fatalf("512 MiB refused: %v", diags)
	}
}

// Automatic recovery is on by default (5m) and "0s" turns it off.
func TestRecoveryGraceDefaultAndOff(t *testing.T) {
	src := func(line string) []byte {
		return []byte(`cluster "x" {
  ` + line + `
  provider "nomad" {}
  coordination "consul" {}
}`)
	}
	for line, want := range map[string]time.Duration{"": DefaultRecoveryGrace, `recovery_grace = "0s"`: 0, `recovery_grace = "90s"`: 90 * time.Second} {
		c, _, diags := Load("x.hcl", src(line))
		if diags.HasErrors() {
			t.Fatalf("%q: %v", line, diags)
		}
		if c.RecoveryGrace != want {
			t.Errorf("%q: recovery grace %s, want %s", line, c.RecoveryGrace, want)
		}
	}
}

// tls.certificate_ttl: 365 days by default, at least MinMemberCertTTL,
// and only with mode "auto" (the other modes issue no certificate).
func TestCertificateTTL(t *testing.T) {
	src := func(tls string) []byte {
		return []byte(`cluster "x" {
  tls {
    ` + tls + `
  }
  provider "nomad" {}
  coordination "consul" {}
}`)
	}
	for tls, want := range map[string]time.Duration{"": DefaultMemberCertTTL, `certificate_ttl = "30s"`: 30 * time.Second, `certificate_ttl = "720h"`: 720 * time.Hour} {
		c, _, diags := Load("x.hcl", src(tls))
		if diags.HasErrors() {
			t.Fatalf("%q: %v", tls, diags)
		}
		if c.TLS.CertificateTTL != want {
			t.Errorf("%q: certificate ttl %s, want %s", tls, c.TLS.CertificateTTL, want)
		}
	}
	for tls, summary := range map[string]string{
		`certificate_ttl = "29s"`:                   "certificate_ttl too short",
		`certificate_ttl = "soon"`:                  "Invalid duration",
		"mode = \"off\"\n certificate_ttl = \"1h\"": "certificate_ttl with mode off",
	} {
		_, _, diags := Load("x.hcl", src(tls))
		if !diags.HasErrors() || !strings.Contains(diags.Error(), summary) {
			t.Errorf("%q: diagnostics %v, want %q", tls, diags, summary)
		}
	}
}
