package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Values survive the unquoted eval $(...) the README shows, spaces and
// quotes included.
func TestShellQuoteSurvivesEval(t *testing.T) {
	for _, v := range []string{"https://127.0.0.1:2379,https://[::1]:2380", "/tmp/a dir/ca.crt", "it's", ""} {
		out, err := exec.Command("sh", "-c", `eval $(printf '%s\n' "$1") && printf '%s' "$X"`, "sh", "export X="+shellQuote(v)).Output()
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if string(out) != v {
			t.Errorf("%q came back as %q", v, out)
		}
	}
}

// The credentials directory is made 0700; one that others may write to,
// or under a parent others may write to, is refused.
func TestEnvDirIsPrivate(t *testing.T) {
	base := t.TempDir()
	d, err := envDir(filepath.Join(base, "mine", "c"), "c")
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %s, want 0700", d, fi.Mode().Perm())
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := envDir(filepath.Join(open, "c"), "c"); err == nil || !strings.Contains(err.Error(), "may be written by others") {
		t.Errorf("a directory under a world-writable parent: %v, want a refusal", err)
	}
	if err := os.Chmod(open, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, err := envDir(filepath.Join(open, "c"), "c"); err != nil {
		t.Errorf("a directory under a sticky world-writable parent (as /tmp): %v", err)
	}
}
