package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// toolsDir is where pinned tools are cached, as tools/build.sh does.
func toolsDir() (string, error) {
	if d := os.Getenv("ETCD_NOMAD_TOOLS_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "etcd-nomad", "bin"), nil
}

// goOutput runs the go command in dir and returns its trimmed stdout.
func goOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s (in %s): %w", strings.Join(args, " "), dir, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// etcdTools returns etcdctl and etcdutl built from the modules pinned in
// tools/etcd/go.mod, which must be the etcd version etcd-nomad embeds.
// They are built once into the tools cache and reused.
func (e *runEnv) etcdTools(ctx context.Context) (etcdctl, etcdutl string, err error) {
	modDir := filepath.Join(e.opts.repo, "tools", "etcd")
	embedded, err := goOutput(ctx, e.opts.repo, "list", "-m", "-f", "{{.Version}}", "go.etcd.io/etcd/server/v3")
	if err != nil {
		return "", "", err
	}
	pinned, err := goOutput(ctx, modDir, "list", "-m", "-f", "{{.Version}}", "go.etcd.io/etcd/etcdctl/v3")
	if err != nil {
		return "", "", err
	}
	if pinned != embedded {
		return "", "", fmt.Errorf("tools/etcd pins etcdctl %s but etcd-nomad embeds etcd %s: update tools/etcd/go.mod", pinned, embedded)
	}
	dir, err := toolsDir()
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	build := func(name, pkg string) (string, error) {
		out := filepath.Join(dir, name+"-"+pinned)
		if _, err := os.Stat(out); err == nil {
			return out, nil
		}
		e.log.Info("building pinned tool (first time only)", "tool", name, "version", pinned, "into", out)
		if _, err := goOutput(ctx, modDir, "build", "-trimpath", "-o", out+".tmp", pkg); err != nil {
			return "", err
		}
		return out, os.Rename(out+".tmp", out)
	}
	if etcdctl, err = build("etcdctl", "go.etcd.io/etcd/etcdctl/v3"); err != nil {
		return "", "", err
	}
	if etcdutl, err = build("etcdutl", "go.etcd.io/etcd/etcdutl/v3"); err != nil {
		return "", "", err
	}
	return etcdctl, etcdutl, nil
}

// etcdNomad builds the etcd-nomad binary of this checkout into the
// scratch directory.
func (e *runEnv) etcdNomad(ctx context.Context) (string, error) {
	return e.buildEtcdNomad(ctx, "etcd-nomad")
}

// etcdNomadStatic builds it with CGO_ENABLED=0, as `make image` does: the
// binary an image can hold (tools/image.sh refuses any other).
func (e *runEnv) etcdNomadStatic(ctx context.Context) (string, error) {
	return e.buildEtcdNomad(ctx, filepath.Join("static", "etcd-nomad"), "CGO_ENABLED=0")
}

// buildEtcdNomad builds ./cmd/etcd-nomad to name under the run's scratch
// directory (binDir: a family's sub-environment shares it) with env added
// to the go command's, once.
func (e *runEnv) buildEtcdNomad(ctx context.Context, name string, env ...string) (string, error) {
	out, err := filepath.Abs(filepath.Join(e.opts.binDir, name))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/etcd-nomad")
	cmd.Dir = e.opts.repo
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/etcd-nomad %v (in %s): %w", env, e.opts.repo, err)
	}
	return out, nil
}
