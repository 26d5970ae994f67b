// Package nomadjob is the test kit for an etcd-nomad job on real Nomad
// and Consul agents, shared by every suite that runs one (e2e/, chaos/):
// build the binary under test, write the cluster definition, render and
// submit the job the way `etcd-nomad job run` does (the CA key encryption
// key in the job's variable first), read the members' Consul checks, print
// the members' logs when a test fails, and stop the job leaving no member
// process behind. Opening the cluster's parts (coordinator, client TLS,
// status) stays with the project's own code, which the suites call.
package nomadjob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Build builds etcd-nomad (the module's cmd/etcd-nomad, whatever the
// caller's directory) into dir and returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "etcd-nomad")
	// Static (no cgo): the exec driver's chroot then needs nothing but
	// the binary.
	cmd := exec.Command("go", "build", "-o", bin, "github.com/etcd-nomad/etcd-nomad/cmd/etcd-nomad")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build etcd-nomad: %w\n%s", err, out)
	}
	return bin, nil
}

// Job is one etcd-nomad job on a Nomad cluster.
type Job struct {
	// Name is the job's (the cluster's) name.
	Name string
	// Binary is etcd-nomad (Build), NomadBin the nomad CLI.
	Binary, NomadBin string
	// Image, when set, is the image a driver "docker" job runs (Render
	// passes -image, not -binary).
	Image string
	// Nomad is the Nomad HTTP API (http://host:port) and API its client.
	Nomad string
	API   *nomadapi.Client
	// AllocDirs are where the Nomad clients keep allocations (for logs).
	AllocDirs []string
}

// Render runs `etcd-nomad job render -binary` (-image with an Image) on
// the definition file and writes the job beside it (etcd.nomad.hcl);
// envLine, when set, goes into the task's env block (a change of the job
// that rolls it).
func (j Job) Render(t testing.TB, file, envLine string) string {
	t.Helper()
	runs := []string{"-binary", j.Binary}
	if j.Image != "" {
		runs = []string{"-image", j.Image}
	}
	out, err := exec.Command(j.Binary, append(append([]string{"job", "render"}, runs...), file)...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("job render: %v\n%s", err, stderr)
	}
	spec := string(out)
	if envLine != "" {
		spec = strings.Replace(spec, "      env {\n", "      env {\n        "+envLine+"\n", 1)
	}
	path := filepath.Join(filepath.Dir(file), "etcd.nomad.hcl")
	if err := os.WriteFile(path, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Submit does what `etcd-nomad job run` does first, the members' CA key
// encryption key in the job's variable, then submits the job file at
// path with the real `nomad job run`. It returns the key (etcd clients
// need it to read the cluster CA).
func (j Job) Submit(t testing.TB, path string) []byte {
	t.Helper()
	text, err := jobs.EnsureCAKEK(context.Background(), j.API, j.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	kek, err := certs.ParseKEK(text)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(j.NomadBin, "job", "run", "-detach", "-address", j.Nomad, path).CombinedOutput(); err != nil {
		t.Fatalf("nomad job run: %v\n%s", err, out)
	}
	return kek
}

// Stop stops the job and waits (up to timeout) until none of its member
// processes runs, so that stopping the agents leaves no task behind.
func (j Job) Stop(t testing.TB, timeout time.Duration) {
	if out, err := exec.Command(j.NomadBin, "job", "stop", "-detach", "-yes", "-address", j.Nomad, j.Name).CombinedOutput(); err != nil {
		t.Logf("nomad job stop %s: %v\n%s", j.Name, err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := nomadglue.WaitStopped(ctx, j.API, j.Name, ""); err != nil {
		t.Error(err)
	}
}

// Purge removes the stopped job from Nomad (a later job of that name
// starts afresh).
func (j Job) Purge(t testing.TB) {
	if out, err := exec.Command(j.NomadBin, "job", "stop", "-detach", "-purge", "-yes", "-address", j.Nomad, j.Name).CombinedOutput(); err != nil {
		t.Logf("nomad job stop -purge %s: %v\n%s", j.Name, err, out)
	}
}

// CollectGarbage garbage-collects the stopped allocations on every
// client: that unmounts their secrets dirs, so that the test's directory
// can be removed.
func (j Job) CollectGarbage(t testing.TB) {
	nodes, _, err := j.API.Nodes().List(nil)
	if err != nil {
		t.Logf("list nodes: %v", err)
	}
	for _, n := range nodes {
		// The endpoint answers with an empty body, which the API client
		// reports as EOF.
		if err := j.API.Nodes().GC(n.ID, nil); err != nil && !errors.Is(err, io.EOF) {
			t.Logf("client gc on %s: %v", n.ID, err)
		}
	}
}

// DumpLogs prints the last lines of each member's supervisor log, with
// its allocation's task events while Nomad answers; while it does not
// (a chaos round stopped it), every member log under AllocDirs.
func (j Job) DumpLogs(t testing.TB, lines int) {
	list, _, err := j.API.Jobs().Allocations(j.Name, true, nil)
	if err != nil {
		var paths []string
		for _, d := range j.AllocDirs {
			m, _ := filepath.Glob(filepath.Join(d, "*", "alloc", "logs", "etcd.stderr.*"))
			paths = append(paths, m...)
		}
		sort.Strings(paths)
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				t.Logf("=== %s\n%s", p, clustertest.SupervisorLines(string(b), lines))
			}
		}
		return
	}
	for _, a := range list {
		b, err := os.ReadFile(j.allocLog(a.ID))
		if err != nil {
			continue
		}
		var events []string
		if ts := a.TaskStates["etcd"]; ts != nil {
			for _, e := range ts.Events {
				events = append(events, fmt.Sprintf("%s %s: %s", time.Unix(0, e.Time).UTC().Format("15:04:05"), e.Type, e.DisplayMessage))
			}
		}
		t.Logf("=== alloc %s (%s, %s)\ntask events:\n  %s\n%s", a.ID[:8], a.ClientStatus, a.DesiredStatus, strings.Join(events, "\n  "), clustertest.SupervisorLines(string(b), lines))
	}
}

// allocLog is the path of an allocation's first member log, under the
// AllocDir that holds it.
func (j Job) allocLog(id string) string {
	for _, d := range j.AllocDirs {
		p := filepath.Join(d, id, "alloc", "logs", "etcd.stderr.0")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// AllocLog returns an allocation's member log ("" when none is found).
func (j Job) AllocLog(id string) string {
	b, _ := os.ReadFile(j.allocLog(id))
	return string(b)
}

// Running lists the job's allocations that Nomad wants running.
func (j Job) Running(t testing.TB) []*nomadapi.AllocationListStub {
	list, _, err := j.API.Jobs().Allocations(j.Name, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []*nomadapi.AllocationListStub
	for _, a := range list {
		if a.DesiredStatus == nomadapi.AllocDesiredStatusRun {
			out = append(out, a)
		}
	}
	return out
}

// Checks returns the passing and total Consul checks of the cluster's
// service, and their lines.
func Checks(cli *consulapi.Client, name string) (passing, total int, desc string) {
	ch, err := status.ConsulChecks(context.Background(), cli, name)
	if err != nil {
		return 0, 0, err.Error()
	}
	return ch.Passing, ch.Total, strings.Join(ch.Lines, "\n")
}

// NomadClient is a Nomad API client for addr (http://host:port).
func NomadClient(t testing.TB, addr string) *nomadapi.Client {
	cfg := nomadapi.DefaultConfig()
	cfg.Address = addr
	cli, err := nomadapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// ConsulClient is a Consul API client for addr (http://host:port).
// Consul limits connections per client address: share one per run.
func ConsulClient(t testing.TB, addr string) *consulapi.Client {
	cfg := consulapi.DefaultConfig()
	cfg.Address = strings.TrimPrefix(addr, "http://")
	cli, err := consulapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cli
}
