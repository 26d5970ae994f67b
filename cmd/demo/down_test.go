package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
)

// tempDir is an absolute, symlink-free test directory: processes report
// their working directory resolved.
func tempDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// survivors lists the processes running from dir, found independently of
// the code under test: working directory in dir, or dir on the command
// line. The test process itself is not one of them.
func survivors(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if cwd == dir || strings.HasPrefix(cwd, dir+"/") || strings.Contains(cmd, dir+"/") {
			out = append(out, fmt.Sprintf("pid %d (cwd %s): %s", pid, cwd, cmd))
		}
	}
	return out
}

// killSurvivors is the tests' own last resort, so that a failing test
// leaves nothing running or mounted.
func killSurvivors(t *testing.T, dir string) {
	for _, s := range survivors(t, dir) {
		var pid int
		if _, err := fmt.Sscanf(s, "pid %d", &pid); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, m := range mountedIn(dir) {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
}

// mountedIn lists the mount points in dir, deepest first, read
// independently of the code under test.
func mountedIn(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 5 && strings.HasPrefix(f[4], dir+"/") {
			out = append([]string{f[4]}, out...)
		}
	}
	return out
}

// requireAgents skips t in the short tier only: `make test` builds the
// agents first (make tools), so one not built fails the test.
func requireAgents(t *testing.T) {
	t.Helper()
	tier.Starts(t, "Consul and Nomad agents")
	for _, b := range []struct{ name, version string }{{"nomad", devagents.NomadVersion}, {"consul", devagents.ConsulVersion}} {
		if _, err := devagents.Bin(b.name, b.version); err != nil {
			t.Fatal(err)
		}
	}
}

// demo-down waits for the job's allocations: `make demo-down` stopped the Nomad agent while the job's
// allocations were still stopping (the purged job's allocations vanished
// from the list at once, so the wait for them returned at once); the dev
// agent then stopped its allocations itself, was killed when that took
// longer than down's 30s, and left executors, logmons and tasks running.
// Here the job's task takes 35s to stop (a 25s shutdown_delay, then it
// ignores SIGTERM for its 10s kill_timeout): down must wait for the
// allocation to be terminal before it stops the agents, and nothing may
// run from the demo dir after it.
func TestDownWaitsForAllocationsAndLeavesNoProcess(t *testing.T) {
	requireAgents(t)
	dir := tempDir(t)
	t.Cleanup(func() { killSurvivors(t, dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	consul, err := devagents.StartConsul(ctx, filepath.Join(dir, "consul"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = consul.Stop(10 * time.Second) })
	nomad, err := devagents.StartNomad(ctx, filepath.Join(dir, "nomad"), consul.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nomad.Stop(10 * time.Second) })
	st := state{ConsulPID: consul.PID(), NomadPID: nomad.PID(), ConsulAddr: consul.Addr, NomadAddr: nomad.Addr, Job: "slow-stop"}
	b, _ := json.Marshal(st)
	if err := os.WriteFile(statePath(dir), b, 0o600); err != nil {
		t.Fatal(err)
	}

	cfg := nomadapi.DefaultConfig()
	cfg.Address = nomad.Addr
	cli, err := nomadapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	job := nomadapi.NewServiceJob(st.Job, st.Job, "global", 50)
	job.Datacenters = []string{"dc1"}
	tg := nomadapi.NewTaskGroup("g", 1)
	task := nomadapi.NewTask("slow", "raw_exec")
	task.Config = map[string]any{"command": "/bin/sh", "args": []string{"-c", `trap "" TERM INT; while :; do sleep 1; done`}}
	delay, kill := 25*time.Second, 10*time.Second
	task.ShutdownDelay, task.KillTimeout = delay, &kill
	task.Resources = &nomadapi.Resources{CPU: ptr(20), MemoryMB: ptr(32)}
	tg.AddTask(task)
	job.AddTaskGroup(tg)
	if _, _, err := cli.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		allocs, _, err := cli.Jobs().Allocations(st.Job, false, nil)
		if err == nil && len(allocs) == 1 && allocs[0].ClientStatus == nomadapi.AllocClientStatusRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task not running after a minute: %d allocations (%v)", len(allocs), err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	var out bytes.Buffer
	start := time.Now()
	err = down(dir, &out)
	t.Logf("down took %.1fs:\n%s", time.Since(start).Seconds(), out.String())
	if err != nil {
		t.Fatalf("down: %v", err)
	}
	if left := survivors(t, dir); len(left) > 0 {
		t.Fatalf("%d processes of the demo survive down:\n%s", len(left), strings.Join(left, "\n"))
	}
	if ms := mountedIn(dir); len(ms) > 0 {
		t.Errorf("mounts left in the demo dir: %v", ms)
	}
	if _, err := os.Stat(statePath(dir)); !os.IsNotExist(err) {
		t.Errorf("state file left after down: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// What still runs from the demo dir after the agents are gone is found,
// reported and killed, even without a state file; a process elsewhere is
// left alone.
func TestDownKillsWhatRunsFromTheDemoDir(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := tempDir(t)
	t.Cleanup(func() { killSurvivors(t, dir) })
	start := func(cwd string) *exec.Cmd {
		c := exec.Command("/bin/sh", "-c", `trap "" TERM; sleep 300`)
		c.Dir = cwd
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		return c
	}
	if err := os.MkdirAll(filepath.Join(dir, "nomad", "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	stray := start(filepath.Join(dir, "nomad", "data"))
	other := start(t.TempDir())
	defer func(d time.Duration) { leftoverTimeout = d }(leftoverTimeout)
	leftoverTimeout = time.Second

	var out bytes.Buffer
	if err := down(dir, &out); err != nil {
		t.Fatalf("down: %v\n%s", err, out.String())
	}
	t.Logf("down:\n%s", out.String())
	if !strings.Contains(out.String(), fmt.Sprintf("pid %d:", stray.Process.Pid)) {
		t.Errorf("down did not report the stray process %d", stray.Process.Pid)
	}
	if err := stray.Wait(); err == nil {
		t.Errorf("the stray process exited by itself?")
	}
	if left := survivors(t, dir); len(left) > 0 {
		t.Errorf("still running from the demo dir:\n%s", strings.Join(left, "\n"))
	}
	if syscall.Kill(other.Process.Pid, 0) != nil {
		t.Errorf("down killed a process that does not run from the demo dir")
	}
}

// The README's path end to end: `up` (agents, the 3-member job, passing
// checks), then `down`; afterwards no etcd-nomad member, Nomad executor or
// logmon, or agent runs from the demo dir, and nothing is left mounted.
// Between the two, in a real browser (Chromium, which `make test` installs:
// without it the test fails), every address up printed answers with what
// it claims (PrintedAddresses), and the Consul UI shows the members'
// health and follows a member's restart (ConsulUI).
func TestDemoUpDownLeavesNoProcess(t *testing.T) {
	demoUpDown(t, false)
}

// `make demo DRIVER=docker`: the same with the members in containers, on
// a Docker engine of the demo's own that down stops with its containers.
func TestDemoWithDockerUpDownLeavesNoProcess(t *testing.T) {
	demoUpDown(t, true)
}

func demoUpDown(t *testing.T, inDocker bool) {
	requireAgents(t)
	chromium := chromiumPath(t)
	if inDocker {
		if err := devagents.DockerAvailable(); errors.Is(err, devagents.ErrNoDocker) {
			t.Skipf("needs a Docker engine: %v", err)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	dir := tempDir(t)
	t.Cleanup(func() { killSurvivors(t, dir) })
	bin := filepath.Join(t.TempDir(), "etcd-nomad")
	build := exec.Command("go", "build", "-o", bin, "../etcd-nomad")
	imageBin := ""
	if inDocker {
		// Static, for the image; it serves as the operator's binary too.
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		imageBin = bin
	}
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build etcd-nomad: %v\n%s", err, out)
	}
	// up points the environment at its agents for the status it prints.
	t.Setenv("CONSUL_HTTP_ADDR", "")
	t.Setenv("NOMAD_ADDR", "")
	var printed bytes.Buffer
	upErr := up(dir, bin, imageBin, io.MultiWriter(os.Stdout, &printed))
	if upErr == nil {
		// Subtests: a failure there ends the subtest, and down still runs.
		if b, err := newBrowser(t, chromium); err != nil {
			t.Error(err)
		} else {
			t.Run("PrintedAddresses", func(t *testing.T) { checkPrintedAddresses(t, b, printed.String(), dir) })
			if !inDocker {
				// It kills a member by the PID its command line names
				// the allocation in: a raw_exec member's.
				t.Run("ConsulUI", func(t *testing.T) {
					checkConsulUI(t, b, readState(t, dir).ConsulAddr+"/ui/dc1/services/demo", dir)
				})
			}
		}
		checkOperatorAccess(t, dir, bin)
	}
	// down runs even when up failed half-way: it is what cleans up.
	var out bytes.Buffer
	start := time.Now()
	downErr := down(dir, &out)
	t.Logf("down took %.1fs:\n%s", time.Since(start).Seconds(), out.String())
	if upErr != nil {
		t.Fatalf("up: %v", upErr)
	}
	if downErr != nil {
		t.Fatalf("down: %v", downErr)
	}
	if left := survivors(t, dir); len(left) > 0 {
		t.Fatalf("%d processes of the demo survive down:\n%s", len(left), strings.Join(left, "\n"))
	}
	if ms := mountedIn(dir); len(ms) > 0 {
		t.Errorf("mounts left in the demo dir: %v", ms)
	}
	if !strings.Contains(out.String(), "all 3 allocations of etcd-demo stopped") {
		t.Errorf("down did not report the job's 3 allocations stopped")
	}
	if strings.Contains(out.String(), "still running after the agents stopped") {
		t.Errorf("down had to kill processes the orderly stop should have ended")
	}
	if left := devagents.DockerLeftovers(); inDocker && len(left) > 0 {
		t.Errorf("left of the demo's Docker engine: %v", left)
	}
}
