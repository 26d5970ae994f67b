package devagents

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Docker is a Docker engine of the test kit's own: a dockerd (with the
// containerd it manages) whose socket, data root, exec root, pid file and
// configuration are all under Dir, started and stopped by PID like the
// other agents. It never reads or changes a system Docker's
// (/var/run/docker.sock, /var/lib/docker, /etc/docker), and it leaves the
// host's network alone: no iptables rules (a default dockerd sets the
// FORWARD policy to DROP, after which the multi-host testbed's bridge
// forwards nothing), no ip_forward change, no bridge; containers run with
// the host's network (the rendered job's network_mode = "host") or none.
type Docker struct {
	// Dir holds everything of the engine's; Stop removes it.
	Dir string
	// Host is the engine's API address, unix://Dir/docker.sock: the
	// docker CLI's -H, DOCKER_HOST, Nomad's docker plugin endpoint.
	Host string
	// CLI is the docker client binary.
	CLI string
	a   *Agent
	// httpc talks to the engine's API socket.
	httpc *http.Client
}

// dockerOwnerLabel marks a kit engine with the PID of the process that
// started it (a daemon label, on its command line), so that SweepDockers
// finds the engines of test binaries that died without stopping theirs,
// and never any other dockerd.
const dockerOwnerLabel = "etcd-nomad.owner="

// dockerPath finds a program of Debian's docker.io (dockerd and runc are
// in /usr/sbin, which a user's PATH may lack).
func dockerPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/usr/local/sbin", "/usr/local/bin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// ErrNoDocker says this machine cannot run the kit's engine and cannot get
// one either: tests skip on it (errors.Is), while a machine that could
// install Docker but has not fails them.
var ErrNoDocker = errors.New("no Docker engine here")

// DockerAvailable reports whether StartDocker can run here: nil, or why
// not. The error wraps ErrNoDocker when the machine has no way to get an
// engine (not root, or no dockerd and no apt-get); without it, Docker is
// missing but `make tools` installs it.
func DockerAvailable() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: dockerd needs root", ErrNoDocker)
	}
	var missing []string
	for _, name := range []string{"dockerd", "containerd", "runc", "docker"} {
		if _, err := dockerPath(name); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("%w: %s not installed, and no apt-get to install docker.io with", ErrNoDocker, strings.Join(missing, ", "))
	}
	return fmt.Errorf("%s not installed: run `make tools` (tools/build.sh docker installs Debian's docker.io with apt-get)", strings.Join(missing, ", "))
}

// maxDockerDir leaves room under the engine's directory for containerd's
// sockets (exec/containerd/containerd.sock.ttrpc) within a unix socket
// path's length.
const maxDockerDir = maxSocketPath - len("/exec/containerd/containerd.sock.ttrpc")

// StartDocker starts a Docker engine with everything under dir (or, when
// dir would make its sockets' paths too long, under a short directory in
// /tmp) and waits until its API answers. Engines left behind by test
// processes that no longer run are stopped first (SweepDockers).
func StartDocker(ctx context.Context, dir string) (*Docker, error) {
	return startDocker(ctx, dir, os.Getpid())
}

// StartDockerDetached is StartDocker for an engine that outlives this
// process (`make demo DRIVER=docker`): it carries no owner, so no sweep
// ever stops it; StopDockerAt does, from its directory and PID.
func StartDockerDetached(ctx context.Context, dir string) (*Docker, error) {
	return startDocker(ctx, dir, 0)
}

// startDocker starts an engine labelled with owner (none when 0).
func startDocker(ctx context.Context, dir string, owner int) (*Docker, error) {
	if err := DockerAvailable(); err != nil {
		return nil, err
	}
	SweepDockers()
	dockerd, _ := dockerPath("dockerd")
	cli, _ := dockerPath("docker")
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if len(abs) > maxDockerDir {
		if abs, err = os.MkdirTemp("/tmp", "dk-"); err != nil {
			return nil, fmt.Errorf("short directory for the Docker engine (%s is too long for its sockets): %w", dir, err)
		}
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, err
	}
	startedEngines.Lock()
	startedEngines.dirs = append(startedEngines.dirs, abs)
	startedEngines.Unlock()
	// Its own (empty) configuration: never /etc/docker/daemon.json.
	cfg := filepath.Join(abs, "daemon.json")
	if err := os.WriteFile(cfg, []byte("{}\n"), 0o600); err != nil {
		return nil, err
	}
	sock := filepath.Join(abs, "docker.sock")
	args := []string{
		"--config-file", cfg,
		"--host", "unix://" + sock,
		"--data-root", filepath.Join(abs, "data"),
		"--exec-root", filepath.Join(abs, "exec"),
		"--pidfile", filepath.Join(abs, "dockerd.pid"),
		// The host's network stays as it is.
		"--iptables=false", "--ip6tables=false", "--ip-forward=false", "--ip-masq=false",
		"--bridge=none", "--userland-proxy=false",
	}
	if owner != 0 {
		args = append(args, "--label", dockerOwnerLabel+strconv.Itoa(owner))
	}
	a, err := start("dockerd", dockerd, abs, args...)
	if err != nil {
		return nil, err
	}
	httpc := unixHTTPClient(sock)
	d := &Docker{Dir: abs, Host: "unix://" + sock, CLI: cli, a: a, httpc: httpc}
	if err := a.waitReady(ctx, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
		if err != nil {
			return err
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /_ping: %s", resp.Status)
		}
		return nil
	}); err != nil {
		_ = d.Stop()
		return nil, err
	}
	return d, nil
}

// unixHTTPClient talks HTTP over the unix socket at path.
func unixHTTPClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
}

// PID is dockerd's process id.
func (d *Docker) PID() int { return d.a.PID() }

// Command is the docker CLI against this engine.
func (d *Docker) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, d.CLI, append([]string{"--host", d.Host}, args...)...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+d.Host, "DOCKER_CONTEXT=", "DOCKER_CONFIG="+filepath.Join(d.Dir, "cli"))
	return cmd
}

// Run runs the docker CLI against this engine and returns its standard
// output, or an error with its standard error.
func (d *Docker) Run(ctx context.Context, args ...string) (string, error) {
	var stderr strings.Builder
	cmd := d.Command(ctx, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// BuildImage builds the etcd-nomad image tag from bin (static:
// CGO_ENABLED=0) into this engine with `make image`'s script (script:
// tools/image.sh), and with save set also writes its `docker save` there.
func (d *Docker) BuildImage(ctx context.Context, script, bin, tag, save string) error {
	args := []string{script, bin, tag}
	if save != "" {
		args = append(args, save)
	}
	cmd := exec.CommandContext(ctx, "bash", args...)
	cmd.Env = append(os.Environ(), d.Env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build image %s from %s (%s): %w\n%s", tag, bin, script, err, out)
	}
	return nil
}

// Containers lists the engine's running containers: each one's id by its
// name (without Docker's leading "/"). It asks the engine's API directly,
// not the CLI: cheap enough for a caller that polls (cmd/bench, every
// 200 ms, on a machine whose CPU it measures).
func (d *Docker) Containers(ctx context.Context) (map[string]string, error) {
	var list []struct {
		ID    string `json:"Id"`
		Names []string
	}
	if err := getJSONWith(ctx, d.httpc, "http://docker/containers/json", "", &list); err != nil {
		return nil, fmt.Errorf("list the containers of %s: %w", d.Host, err)
	}
	out := map[string]string{}
	for _, c := range list {
		for _, n := range c.Names {
			out[strings.TrimPrefix(n, "/")] = c.ID
		}
	}
	return out, nil
}

// ContainerPID is the host's process id of a running container's first
// process (PID 1 inside the container).
func (d *Docker) ContainerPID(ctx context.Context, id string) (int, error) {
	var c struct {
		State struct {
			Running bool
			Pid     int
		}
	}
	if err := getJSONWith(ctx, d.httpc, "http://docker/containers/"+id+"/json", "", &c); err != nil {
		return 0, fmt.Errorf("inspect container %s: %w", id, err)
	}
	if !c.State.Running || c.State.Pid <= 0 {
		return 0, fmt.Errorf("container %s is not running (pid %d)", id, c.State.Pid)
	}
	return c.State.Pid, nil
}

// Env is the environment that points docker clients (tools/image.sh) at
// this engine.
func (d *Docker) Env() []string {
	return []string{"DOCKER_HOST=" + d.Host, "DOCKER_CONTEXT=", "DOCKER_CONFIG=" + filepath.Join(d.Dir, "cli")}
}

// Stop removes every container (SIGKILL), stops dockerd by its PID
// (SIGTERM, then SIGKILL after 20 s; it stops its containerd), kills what
// is left of the engine (containerd, its shims and their containers'
// processes), unmounts what it mounted and removes Dir. It reports on
// stderr what it had to kill, and returns what it could not remove.
func (d *Docker) Stop() error {
	var errs []error
	d.httpc.CloseIdleConnections()
	if !d.a.exited() {
		errs = append(errs, removeContainers(d.CLI, d.Host))
	}
	errs = append(errs, d.a.stop(20*time.Second), cleanEngine(d.Dir))
	return errors.Join(errs...)
}

// StopDockerAt is Stop for an engine started by another process
// (StartDockerDetached), from its directory and dockerd's PID.
func StopDockerAt(dir string, pid int) error {
	var errs []error
	// Only the engine's own dockerd (a stale PID may name another process).
	if syscall.Kill(pid, 0) == nil && strings.Contains(cmdline(pid), dir+"/") {
		if cli, err := dockerPath("docker"); err == nil {
			errs = append(errs, removeContainers(cli, "unix://"+filepath.Join(dir, "docker.sock")))
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		for deadline := time.Now().Add(20 * time.Second); syscall.Kill(pid, 0) == nil && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
	}
	errs = append(errs, cleanEngine(dir))
	return errors.Join(errs...)
}

// removeContainers removes every container of the engine at host
// (SIGKILL, their anonymous volumes too).
func removeContainers(cli, host string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids, err := exec.CommandContext(ctx, cli, "--host", host, "ps", "-aq").Output()
	if err != nil {
		return fmt.Errorf("list the containers of %s: %w", host, err)
	}
	if f := strings.Fields(string(ids)); len(f) > 0 {
		if out, err := exec.CommandContext(ctx, cli, append([]string{"--host", host, "rm", "-f", "-v"}, f...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("remove the containers of %s: %w: %s", host, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// cleanEngine kills what is left of the stopped engine in dir, saying so,
// unmounts what it mounted and removes dir.
func cleanEngine(dir string) error {
	if left := killEngine(dir); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "devagents: Docker engine %s stopped with %d process(es) of its own still running; killed: %v\n", dir, len(left), left)
	}
	unmountUnder(dir)
	return os.RemoveAll(dir)
}

// killEngine kills what runs of the engine in dir: the processes that name
// dir (dockerd, containerd, the containerd shims) and every descendant of
// theirs (the containers' processes, children of the shims). It returns
// their command lines.
func killEngine(dir string) []string {
	pids := enginePIDs(dir)
	var found []string
	for _, pid := range pids {
		found = append(found, fmt.Sprintf("%d %s", pid, cmdline(pid)))
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return found
}

// enginePIDs lists the processes that name dir (dockerd, containerd, the
// containerd shims) and their descendants (the containers' processes,
// children of the shims).
func enginePIDs(dir string) []int {
	roots := map[int]bool{}
	for _, pid := range pidsUnder(dir) {
		roots[pid] = true
	}
	if len(roots) == 0 {
		return nil
	}
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := ppid(pid); pp > 0 {
			parent[pid] = pp
		}
	}
	var pids []int
	for pid := range parent {
		for p := pid; p > 1; p = parent[p] {
			if roots[p] {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// pidsUnder lists the processes (but this one) whose command line names a
// path under dir.
func pidsUnder(dir string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if strings.Contains(cmdline(pid), dir+"/") {
			out = append(out, pid)
		}
	}
	return out
}

// cmdline is a process's command line, its arguments joined by spaces.
func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
}

// ppid is a process's parent's id (0 when it cannot be read).
func ppid(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// kitEngine is a running kit engine: dockerd's PID, its owner's PID (the
// dockerOwnerLabel) and its directory (where its socket is).
type kitEngine struct {
	pid, owner int
	dir        string
}

// kitEngines lists the running kit engines.
func kitEngines() (out []kitEngine) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "dockerd" {
			continue
		}
		owner, dir := 0, ""
		for i, a := range args {
			if i+1 >= len(args) {
				break
			}
			switch {
			case a == "--label" && strings.HasPrefix(args[i+1], dockerOwnerLabel):
				owner, _ = strconv.Atoi(strings.TrimPrefix(args[i+1], dockerOwnerLabel))
			case a == "--host":
				dir = filepath.Dir(strings.TrimPrefix(args[i+1], "unix://"))
			}
		}
		if owner > 0 && dir != "" {
			out = append(out, kitEngine{pid, owner, dir})
		}
	}
	return out
}

// SweepDockers stops the kit engines whose owner no longer runs (a test
// binary killed by its timeout runs no cleanup): their containers,
// dockerd, containerd, mounts and directory. It touches no other dockerd.
func SweepDockers() {
	for _, e := range kitEngines() {
		if e.owner == os.Getpid() || syscall.Kill(e.owner, 0) != syscall.ESRCH {
			continue
		}
		_ = StopDockerAt(e.dir, e.pid)
		fmt.Fprintf(os.Stderr, "devagents: stopped the Docker engine in %s of process %d, which no longer runs\n", e.dir, e.owner)
	}
}

// startedEngines are the directories of the engines this process started.
var startedEngines struct {
	sync.Mutex
	dirs []string
}

// DockerLeftovers lists what remains of the Docker engines this process
// started: dockerds, processes naming their directories and those
// processes' descendants (containers), mounts, directories. Empty after
// every engine's Stop.
func DockerLeftovers() []string {
	var out []string
	for _, e := range kitEngines() {
		if e.owner == os.Getpid() {
			out = append(out, fmt.Sprintf("dockerd %d in %s", e.pid, e.dir))
		}
	}
	startedEngines.Lock()
	dirs := append([]string(nil), startedEngines.dirs...)
	startedEngines.Unlock()
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, dir := range dirs {
		for _, pid := range enginePIDs(dir) {
			out = append(out, fmt.Sprintf("process %d %s", pid, cmdline(pid)))
		}
		for _, line := range strings.Split(string(mounts), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
				out = append(out, "mount "+f[4])
			}
		}
		if _, err := os.Stat(dir); err == nil {
			out = append(out, "dir "+dir)
		}
	}
	return out
}
