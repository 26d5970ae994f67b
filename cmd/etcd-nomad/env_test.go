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

// A directory another user owns is refused, and so is a parent another
// user owns (it could rename our directory away and put its own in its
// place), before env creates anything in it. Root and this user may own
// the parent.
func TestEnvDirRefusesDirectoriesOfAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
	const nobody = 65534
	base := t.TempDir()
	mkdirOwned := func(d string, mode os.FileMode, uid int) {
		t.Helper()
		if err := os.Mkdir(d, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	theirs := filepath.Join(base, "theirs")
	mkdirOwned(theirs, 0o700, nobody)
	if _, err := envDir(theirs, "c"); err == nil || !strings.Contains(err.Error(), "not owned by this user") {
		t.Errorf("a directory owned by uid %d: %v, want a refusal", nobody, err)
	}
	parent := filepath.Join(base, "parent")
	mkdirOwned(parent, 0o755, nobody)
	if _, err := envDir(filepath.Join(parent, "c"), "c"); err == nil || !strings.Contains(err.Error(), "not owned by this user") {
		t.Errorf("a new directory under a parent owned by uid %d: %v, want a refusal", nobody, err)
	}
	if _, err := os.Lstat(filepath.Join(parent, "c")); err == nil {
		t.Errorf("env created %s before refusing its parent", filepath.Join(parent, "c"))
	}
	mkdirOwned(filepath.Join(parent, "mine"), 0o700, os.Getuid())
	if _, err := envDir(filepath.Join(parent, "mine"), "c"); err == nil || !strings.Contains(err.Error(), "not owned by this user") {
		t.Errorf("our directory under a parent owned by uid %d: %v, want a refusal", nobody, err)
	}
}

// A symlink at the parent's path that another user owns (in a sticky
// directory such as /tmp, where they may create /tmp/etcd-nomad-<uid>
// first) passed the parent check, which followed it to a directory of
// ours; they could later point it at a directory of theirs holding their
// own ca.crt, which the operator's etcdctl then trusts (security review,
// session 11, finding 8). The link itself must be ours or root's.
func TestEnvDirRefusesAParentSymlinkOfAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("lchown to another uid needs root")
	}
	const nobody = 65534
	base := t.TempDir()
	tmp := filepath.Join(base, "tmp")
	if err := os.Mkdir(tmp, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	ours := filepath.Join(base, "ours")
	if err := os.Mkdir(ours, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "etcd-nomad-0")
	if err := os.Symlink(ours, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if _, err := envDir(filepath.Join(link, "c"), "c"); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a parent that is a symlink owned by uid %d: %v, want a refusal naming the symlink", nobody, err)
	}
	// Our own link (or root's) in the same place is fine: in a sticky
	// directory only its owner may replace it.
	mine := filepath.Join(tmp, "mine")
	if err := os.Symlink(ours, mine); err != nil {
		t.Fatal(err)
	}
	if _, err := envDir(filepath.Join(mine, "c"), "c"); err != nil {
		t.Errorf("a parent that is our own symlink in a sticky directory: %v", err)
	}
}
