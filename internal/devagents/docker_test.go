package devagents

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needDocker skips t where the kit's engine cannot run at all, and fails
// it where Docker could be installed but is not.
func needDocker(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Docker engine: run without -short")
	}
	if err := DockerAvailable(); errors.Is(err, ErrNoDocker) {
		t.Skipf("needs a Docker engine: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
}

// forwarding is what of the host's network a default dockerd changes:
// IPv4 forwarding, the iptables FORWARD chain, bridge netfilter.
func forwarding(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, f := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/bridge/bridge-nf-call-iptables"} {
		v, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "%s=%s ", filepath.Base(f), strings.TrimSpace(string(v)))
	}
	if ipt, err := exec.LookPath("iptables"); err == nil {
		out, err := exec.Command(ipt, "-S", "FORWARD").CombinedOutput()
		fmt.Fprintf(&b, "FORWARD: %s %v", strings.TrimSpace(string(out)), err)
	}
	return b.String()
}

// sleeperImage builds a static program that sleeps and imports it into d
// as the image "sleeper:1".
func sleeperImage(t testing.TB, d *Docker, dir string) {
	t.Helper()
	src := filepath.Join(dir, "sleeper")
	if err := os.MkdirAll(filepath.Join(src, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	main := "package main\n\nimport \"time\"\n\nfunc main() { time.Sleep(time.Hour) }\n"
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(src, "root", "sleeper"), "main.go")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the sleeper: %v\n%s", err, out)
	}
	tar := exec.Command("tar", "-C", filepath.Join(src, "root"), "-c", ".")
	imp := d.Command(context.Background(), "import", "--change", `ENTRYPOINT ["/sleeper"]`, "-", "sleeper:1")
	pipe, err := tar.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	imp.Stdin = pipe
	if err := tar.Start(); err != nil {
		t.Fatal(err)
	}
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v\n%s", err, out)
	}
	if err := tar.Wait(); err != nil {
		t.Fatal(err)
	}
}

// runSleeper starts a container of sleeper:1 on the host's network and
// returns its process id on the host.
func runSleeper(t testing.TB, d *Docker) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := d.Run(ctx, "run", "-d", "--network", "host", "sleeper:1")
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Run(ctx, "inspect", "-f", "{{.State.Pid}}", strings.TrimSpace(id))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || pid <= 0 {
		t.Fatalf("container pid %q: %v", out, err)
	}
	return pid
}

// The kit's engine is its own and leaves the host alone: socket, data and
// exec roots under its directory, the host's forwarding (ip_forward, the
// iptables FORWARD chain, bridge netfilter) as it was; it runs a container
// of an image imported without a registry; Stop ends the container,
// dockerd and containerd by PID and removes its directory, leaving nothing
// DockerLeftovers sees.
func TestDockerEngineOfItsOwn(t *testing.T) {
	needDocker(t)
	before := forwarding(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	d, err := StartDocker(ctx, filepath.Join(dir, "docker"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dockerd %d ready in %s", d.PID(), time.Since(start).Round(time.Millisecond))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = d.Stop()
		}
	})
	if root, err := d.Run(ctx, "info", "-f", "{{.DockerRootDir}}"); err != nil || strings.TrimSpace(root) != filepath.Join(d.Dir, "data") {
		t.Errorf("data root %q (%v), want %s", root, err, filepath.Join(d.Dir, "data"))
	}
	// Its identity key too (review of the Docker work, session 12, F4:
	// dockerd 20.10 wrote /etc/docker/key.json).
	if _, err := os.Stat(filepath.Join(d.Dir, "key.json")); err != nil {
		t.Errorf("the engine's key.json: %v; want it in %s, not /etc/docker", err, d.Dir)
	}
	if after := forwarding(t); after != before {
		t.Errorf("the engine changed the host's forwarding:\nbefore %s\nafter  %s", before, after)
	}
	sleeperImage(t, d, dir)
	pid := runSleeper(t, d)
	// The engine's API, as a poller reads it: the running container by
	// name, and its process on the host.
	running, err := d.Containers(ctx)
	if err != nil || len(running) != 1 {
		t.Fatalf("running containers %v (%v), want the sleeper", running, err)
	}
	for name, id := range running {
		if got, err := d.ContainerPID(ctx, id); err != nil || got != pid {
			t.Errorf("container %s (%s): pid %d (%v), want %d", name, id, got, err, pid)
		}
	}

	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("the container's process %d runs after Stop", pid)
	}
	if left := DockerLeftovers(); len(left) > 0 {
		t.Errorf("left after Stop: %v", left)
	}
	if after := forwarding(t); after != before {
		t.Errorf("the host's forwarding after Stop:\nbefore %s\nafter  %s", before, after)
	}
}

// TestDockerEngineWhoseDockerdDiedLeavesNoShimSocket (review of the Docker
// work, session 12, F4): containerd's shims listen in /run/containerd/s/,
// outside the engine's directory, and a shim killed by Stop (dockerd died
// first, so its containers were not removed: a crash, a test binary killed
// by its timeout) left its socket there, which DockerLeftovers did not see.
// Stop now removes them, and DockerLeftovers would name any left.
func TestDockerEngineWhoseDockerdDiedLeavesNoShimSocket(t *testing.T) {
	needDocker(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := StartDocker(ctx, filepath.Join(dir, "docker"))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = d.Stop()
		}
	})
	sleeperImage(t, d, dir)
	pid := runSleeper(t, d)
	socks := shimSockets(d.Dir)
	t.Logf("the sleeper's shim listens on %v", socks)
	if len(socks) == 0 {
		t.Fatal("no shim socket found for the running container")
	}
	for _, s := range socks {
		if !strings.HasPrefix(s, "/run/containerd/s/") {
			t.Errorf("shim socket %s, want it in /run/containerd/s/", s)
		}
	}
	if err := syscall.Kill(d.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !d.a.exited(); {
		if time.Now().After(deadline) {
			t.Fatalf("dockerd %d still runs 10 s after SIGKILL", d.PID())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = d.Stop() // dockerd's own exit status is SIGKILL's
	stopped = true
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("the container's process %d runs after Stop", pid)
	}
	for _, s := range socks {
		if _, err := os.Lstat(s); err == nil {
			t.Errorf("the killed shim's socket %s is still there after Stop", s)
		}
	}
	if left := DockerLeftovers(); len(left) > 0 {
		t.Errorf("left after Stop: %v", left)
	}
}

// dockerChildEnv makes the test binary a process that starts an engine
// with a container and then waits to be killed (TestDockerEngineOfADeadTestIsSwept).
const dockerChildEnv = "DEVAGENTS_DOCKER_CHILD"

// A test binary killed by its timeout runs no cleanup: its engine, and the
// containers in it, keep running. The next start sweeps them
// (SweepDockers): every kit engine whose owner no longer runs is stopped,
// its containers' processes killed, its directory removed.
func TestDockerEngineOfADeadTestIsSwept(t *testing.T) {
	if dir := os.Getenv(dockerChildEnv); dir != "" {
		d, err := StartDocker(context.Background(), filepath.Join(dir, "docker"))
		if err != nil {
			t.Fatal(err)
		}
		sleeperImage(t, d, dir)
		fmt.Printf("engine %s %d\n", d.Dir, runSleeper(t, d))
		select {} // killed by the parent
	}
	needDocker(t)
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run", "^TestDockerEngineOfADeadTestIsSwept$", "-test.v")
	child.Env = append(os.Environ(), dockerChildEnv+"="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var engine string
	var pid int
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if _, err := fmt.Sscanf(lines.Text(), "engine %s %d", &engine, &pid); err == nil {
			break
		}
	}
	if engine == "" {
		_ = child.Process.Kill()
		t.Fatalf("the child started no engine (%v)", child.Wait())
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	t.Cleanup(func() { killEngine(engine); unmountUnder(engine); _ = os.RemoveAll(engine) })
	if syscall.Kill(pid, 0) != nil {
		t.Fatalf("the container's process %d ended with its test binary: nothing to sweep", pid)
	}

	SweepDockers()
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("the dead test's container process %d runs after the sweep", pid)
	}
	for _, e := range kitEngines() {
		if e.dir == engine {
			t.Errorf("the dead test's dockerd %d runs after the sweep", e.pid)
		}
	}
	if pids := enginePIDs(engine); len(pids) > 0 {
		t.Errorf("processes of the dead test's engine after the sweep: %v", pids)
	}
	if _, err := os.Stat(engine); err == nil {
		t.Errorf("%s is still there after the sweep", engine)
	}
}

// A default dockerd turns bridge netfilter on and sets
// the iptables FORWARD policy to DROP; the testbed's bridge then forwards
// nothing and StartHosts timed out ("consul agent c1 is not an alive
// member"). It now says what blocks forwarding, at once.
func TestForwardingBlockerNamesDockersDefaults(t *testing.T) {
	const docker = "-P FORWARD DROP\n-A FORWARD -j DOCKER-USER\n-A FORWARD -j DOCKER-ISOLATION-STAGE-1\n"
	for _, c := range []struct {
		bridgeNF, rules string
		blocked         bool
	}{
		{"1\n", docker, true},
		{"0\n", docker, false},                // bridged packets skip iptables
		{"1\n", "-P FORWARD ACCEPT\n", false}, // this machine now
		{"1\n", "", false},
	} {
		why := forwardingBlocker(c.bridgeNF, c.rules)
		if (why != "") != c.blocked {
			t.Errorf("bridge-nf-call-iptables %q, FORWARD %q: %q, want blocked %v", c.bridgeNF, c.rules, why, c.blocked)
		}
		if c.blocked && (!strings.Contains(why, "iptables -P FORWARD ACCEPT") || !strings.Contains(why, "bridge-nf-call-iptables=0")) {
			t.Errorf("the message does not say how to undo it: %s", why)
		}
	}
	if why := forwardingBlocked(); why != "" {
		t.Logf("this machine: %s", why)
	}
}
