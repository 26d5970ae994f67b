package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	"github.com/etcd-nomad/etcd-nomad/nomad"
)

type envCommand struct {
	ui cli.Ui
	// out receives the export line (os.Stdout when nil): only it, so that
	// `eval $(etcd-nomad env ...)` evaluates nothing else.
	out io.Writer
}

// defaultEnvTTL is the operator certificate's validity: one working
// session; running env again issues a fresh one.
const defaultEnvTTL = time.Hour

func (c *envCommand) Synopsis() string {
	return "Print ETCDCTL_* exports for a cluster (operator access)"
}
func (c *envCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad env -config FILE [-user NAME] [-ttl 1h] [-dir DIR]

  Prints one line for the shell:

    export ETCDCTL_ENDPOINTS=... ETCDCTL_CACERT=... ETCDCTL_CERT=... ETCDCTL_KEY=...

  so that after  eval $(etcd-nomad env -config cluster.hcl)  etcdctl talks to
  the cluster. The endpoints are the passing instances of the cluster's
  Consul service (members on Nomad), otherwise the provider's instances.
  With TLS auto, a short-lived client certificate for etcd user NAME (root
  by default: the administrator; with the definition's access rules, any
  declared user to try its rights) is issued from the cluster CA and
  written, 0600 in a 0700 directory, with the CA certificate (never its
  key). With TLS files the definition's files are named; with TLS off only
  the endpoints. Notes go to stderr.

Options:
  -config FILE  cluster definition
  -user NAME    etcd user the certificate names (its CN); default root
  -ttl D        certificate validity; default 1h
  -dir DIR      where to write the files; default
                $XDG_RUNTIME_DIR/etcd-nomad/CLUSTER, or
                $TMPDIR/etcd-nomad-UID/CLUSTER without XDG_RUNTIME_DIR`)
}

func (c *envCommand) Run(args []string) int {
	fs := newClusterFlags("env")
	user := fs.String("user", certs.RootUser, "")
	ttl := fs.Duration("ttl", defaultEnvTTL, "")
	dir := fs.String("dir", "", "")
	cl := fs.load(c.ui, c.Help(), args, false)
	if cl == nil {
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	line, note, err := envLine(ctx, cl, envOptions{User: *user, TTL: *ttl, Dir: *dir})
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	c.ui.Error(note)
	out := c.out
	if out == nil {
		out = os.Stdout
	}
	fmt.Fprintln(out, line)
	return 0
}

type envOptions struct {
	User string
	TTL  time.Duration
	Dir  string
}

// envLine returns the export line and a note for the operator.
func envLine(ctx context.Context, cl *config.Cluster, o envOptions) (line, note string, err error) {
	eps, err := backends.ClientEndpoints(ctx, cl)
	if err != nil {
		return "", "", err
	}
	vars := [][2]string{{"ETCDCTL_ENDPOINTS", strings.Join(eps.URLs, ",")}}
	note = fmt.Sprintf("# cluster %s: %d endpoints from %s", cl.Name, len(eps.URLs), eps.Source)
	switch cl.TLS.Mode {
	case config.TLSFiles:
		vars = append(vars, [2]string{"ETCDCTL_CACERT", cl.TLS.CAFile}, [2]string{"ETCDCTL_CERT", cl.TLS.CertFile}, [2]string{"ETCDCTL_KEY", cl.TLS.KeyFile})
		note += "; TLS files: the definition's certificate (its CN is the etcd user)"
	case config.TLSAuto:
		f, until, err := operatorCert(ctx, cl, o)
		if err != nil {
			return "", "", err
		}
		vars = append(vars, [2]string{"ETCDCTL_CACERT", f.CA}, [2]string{"ETCDCTL_CERT", f.Cert}, [2]string{"ETCDCTL_KEY", f.Key})
		note += fmt.Sprintf("; user %s, certificate in %s valid until %s", o.User, filepath.Dir(f.Cert), until.UTC().Format(time.RFC3339))
		if cl.Access != nil && o.User != certs.RootUser && cl.Access.User(o.User) == nil {
			note += fmt.Sprintf("; WARNING: the access rules declare no user %q: etcd will refuse it", o.User)
		}
	}
	parts := make([]string, len(vars))
	for i, v := range vars {
		parts[i] = v[0] + "=" + shellQuote(v[1])
	}
	return "export " + strings.Join(parts, " "), note, nil
}

// operatorCert issues a client certificate for o.User and writes it with
// the CA certificate into the env directory. The CA comes from
// clusterca.Read, the one place the CLI obtains the cluster CA's signer.
func operatorCert(ctx context.Context, cl *config.Cluster, o envOptions) (certs.Files, time.Time, error) {
	if o.TTL <= 0 {
		return certs.Files{}, time.Time{}, fmt.Errorf("-ttl %s: must be positive", o.TTL)
	}
	co, err := backends.Coordinator(cl)
	if err != nil {
		return certs.Files{}, time.Time{}, err
	}
	kek, err := operatorKEK(ctx, cl)
	if err != nil {
		return certs.Files{}, time.Time{}, err
	}
	ca, err := clusterca.Read(ctx, co, cl.Name, kek)
	if errors.Is(err, clusterca.ErrCASealed) {
		err = fmt.Errorf("%w: an operator certificate is issued from the cluster CA, whose key Consul keeps sealed: "+
			"set %s to the cluster's key, or give this shell a Nomad token that may read the variable %s (item %s)",
			err, certs.KEKEnv, jobs.TokenVariable(cl.Nomad.Job), jobs.CAKEKKey)
	}
	if err != nil {
		return certs.Files{}, time.Time{}, err
	}
	now := time.Now()
	p, err := certs.IssueClient(ca, o.User, now, o.TTL)
	if err != nil {
		return certs.Files{}, time.Time{}, err
	}
	dir, err := envDir(o.Dir, cl.Name)
	if err != nil {
		return certs.Files{}, time.Time{}, err
	}
	f, err := certs.Write(dir, "client", ca.Cert, p)
	if err != nil {
		return certs.Files{}, time.Time{}, fmt.Errorf("write the certificate into %s: %w", dir, err)
	}
	return f, now.Add(o.TTL), nil
}

// envDir returns the private directory for cluster's credentials: dir
// when given, else under $XDG_RUNTIME_DIR (a per-user tmpfs), else under
// the temp dir in a directory named after the user id. A directory that
// is not this user's, or that others may write to, is refused: whoever
// could swap it could read the key. So is one whose parent belongs to
// another user (root excepted) or that others may write to without the
// sticky bit, as on /tmp: they could rename our directory away and put
// theirs in its place. The parent is checked before anything is created
// in it.
func envDir(dir, cluster string) (string, error) {
	if dir == "" {
		if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" {
			dir = filepath.Join(rt, "etcd-nomad", cluster)
		} else {
			dir = filepath.Join(os.TempDir(), fmt.Sprintf("etcd-nomad-%d", os.Getuid()), cluster)
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	parent := filepath.Dir(dir)
	if _, err := os.Stat(parent); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(parent, 0o700); err != nil {
			return "", err
		}
	}
	if err := trustedParent(parent); err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	if err := privateDir(dir); err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// trustedParent checks that only this user or root may replace entries of
// d: it is owned by one of them, and others may not write to it unless
// the sticky bit keeps them from renaming our entries.
//
// A symlink at d is followed only when this user or root owns it and the
// directory holding it passes the same check: whoever owns the link (in a
// sticky /tmp, whoever created /tmp/etcd-nomad-<uid> first) could later
// point it at a directory of theirs, with their own ca.crt.
func trustedParent(d string) error {
	li, err := os.Lstat(d)
	if err != nil {
		return err
	}
	if li.Mode()&os.ModeSymlink != 0 {
		st, ok := li.Sys().(*syscall.Stat_t)
		if !ok || int(st.Uid) != os.Getuid() && st.Uid != 0 {
			return fmt.Errorf("%s is a symlink not owned by this user (uid %d) or root: its owner could point it elsewhere; choose another -dir", d, os.Getuid())
		}
		if up := filepath.Dir(d); up != d {
			if err := trustedParent(up); err != nil {
				return fmt.Errorf("symlink %s: %w", d, err)
			}
		}
	}
	fi, err := os.Stat(d)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", d)
	case !ok || int(st.Uid) != os.Getuid() && st.Uid != 0:
		return fmt.Errorf("%s is not owned by this user (uid %d) or root: choose another -dir", d, os.Getuid())
	case fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0:
		return fmt.Errorf("%s may be written by others (%s) and is not sticky: choose another -dir", d, fi.Mode().Perm())
	}
	return nil
}

// privateDir checks that d is a directory (not a link) owned by this user
// that nobody else may write to.
func privateDir(d string) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", d)
	case !ok || int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s is not owned by this user (uid %d): choose another -dir", d, os.Getuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s may be written by others (%s): choose another -dir", d, fi.Mode().Perm())
	}
	return nil
}

// shellQuote quotes s for a POSIX shell, also after the word splitting of
// an unquoted $(...).
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/.,:_-+=@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// operatorKEK is the cluster CA's key encryption key: from the environment
// (certs.KEKEnv) when set, else, for a cluster on Nomad, from the job's
// variable with the caller's Nomad token (NOMAD_ADDR, NOMAD_TOKEN), as the
// members read it. nil when neither has one (a local coordinator keeps
// the CA unsealed).
func operatorKEK(ctx context.Context, cl *config.Cluster) ([]byte, error) {
	kek, err := clusterca.KEKFromEnv()
	if err != nil || kek != nil || cl.Provider.Kind != config.ProviderNomad {
		return kek, err
	}
	cli, err := nomadglue.Client()
	if err != nil {
		return nil, err
	}
	text, err := jobs.ReadCAKEK(ctx, cli, cl.Nomad.Job, cl.Nomad.Namespace)
	if err != nil || text == "" {
		return nil, err
	}
	return certs.ParseKEK(text)
}
