// Package devagents starts real `consul agent -dev` and `nomad agent -dev`
// processes (built by tools/build.sh from pinned Go modules) on free
// loopback ports with their own data dirs, waits until they are ready, and
// stops them by their own PID. It is the test kit of the e2e tests and the
// engine of `make demo`; it never downloads anything.
package devagents

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/etcd-nomad/etcd-nomad/localmode"
)

// Pinned versions, matching tools/build.sh.
const (
	// NomadVersion is v1.11.3 built with its web UI (the "ui" build tag:
	// tools/build.sh), which the demo prints links to.
	NomadVersion = "v1.11.3+ui"
	// EtcdctlVersion is the embedded etcd's (tools/etcd/go.mod).
	EtcdctlVersion = "v3.6.16"
	ConsulVersion  = "v1.22.0"
	VersityVersion = "v1.8.0"
)

// BinDir is where tools/build.sh puts the binaries: $ETCD_NOMAD_TOOLS_DIR,
// or the user cache dir's etcd-nomad/bin.
func BinDir() string {
	if d := os.Getenv("ETCD_NOMAD_TOOLS_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "etcd-nomad", "bin")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "etcd-nomad", "bin")
}

// Bin returns the path of a built tool, or an error telling how to build it.
func Bin(name, version string) (string, error) {
	p := filepath.Join(BinDir(), name+"-"+version)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s %s not built at %s: run `make tools` (tools/build.sh)", name, version, p)
	}
	return p, nil
}

// binAndPorts finds a built agent binary and n free loopback ports for it.
func binAndPorts(name, version string, n int) (string, []int, error) {
	bin, err := Bin(name, version)
	if err != nil {
		return "", nil, err
	}
	p, err := localmode.FreePorts(n)
	return bin, p, err
}

// Agent is a running agent process.
type Agent struct {
	Name string
	// Addr is the HTTP API address, e.g. http://127.0.0.1:8500.
	Addr string
	Dir  string
	// DNSAddr is a dev Consul agent's DNS server (UDP and TCP), host:port.
	DNSAddr string
	// Token is the management token when the agent runs with ACLs
	// (Options.ACL); empty otherwise.
	Token string
	// AllocDir is a Nomad client's alloc_dir: under Dir, or a short
	// directory of its own when that would make task API socket paths
	// too long.
	AllocDir string
	cmd      *exec.Cmd
	done     chan struct{}
	// httpc reaches an HTTPS API (Options.TLS); nil: plain HTTP.
	httpc *http.Client

	// Set by launch (Consul and Nomad), for Restart: the same binary, arguments and
	// readiness check on the same ports and data dir.
	bin   string
	args  []string
	ready func(context.Context) error
	// ns is the network namespace the agent runs in (a Testbed host's);
	// empty: this process's.
	ns string
}

// exited reports whether the agent's process has ended.
func (a *Agent) exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// PID is the agent's process id.
func (a *Agent) PID() int { return a.cmd.Process.Pid }

// Stop sends SIGTERM to the agent's PID, then SIGKILL after timeout.
//
// Stop ends the agent for good: a Nomad agent stopped before its
// allocations leaves their executors, logmons and tasks running (they live
// in process groups of their own), so once the agent has exited every
// process whose command line names the agent's directory is killed too,
// and reported on stderr. (Restart keeps them: allocations survive an
// agent restart.)
func (a *Agent) Stop(timeout time.Duration) error {
	err := a.stop(timeout)
	dirs := []string{a.Dir}
	if a.AllocDir != "" && !strings.HasPrefix(a.AllocDir, a.Dir+"/") {
		dirs = append(dirs, a.AllocDir)
	}
	for _, d := range dirs {
		if left := KillUnder(d); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "devagents: %s stopped with %d process(es) of its own still running; killed: %v\n", a.Name, len(left), left)
		}
	}
	if len(dirs) > 1 {
		// Nomad mounts a tmpfs on each task's secrets/ and private/; an
		// allocation the agent did not destroy keeps them mounted.
		unmountUnder(a.AllocDir)
		_ = os.RemoveAll(a.AllocDir)
	}
	return err
}

// unmountUnder lazily unmounts every mount point under dir.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if mp := f[4]; strings.HasPrefix(mp, dir+"/") {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
}

// KillUnder kills every process (but this one) whose command line names
// dir or whose working directory is in it: SIGTERM, then SIGKILL after 5 s. It returns the command lines of
// the processes it found.
func KillUnder(dir string) []string {
	if dir == "" {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	var found []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		cmd := strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
		// A logmon names no path: its working directory is the agent's.
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		cwd = strings.TrimSuffix(cwd, " (deleted)")
		inDir := cwd == abs || strings.HasPrefix(cwd, abs+"/")
		if !inDir && !strings.Contains(cmd, abs+"/") && !strings.HasSuffix(cmd, abs) {
			continue
		}
		pids = append(pids, pid)
		if len(cmd) > 120 {
			cmd = cmd[:120] + "..."
		}
		found = append(found, fmt.Sprintf("%d %s", pid, cmd))
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return found
}

func (a *Agent) stop(timeout time.Duration) error {
	select {
	case <-a.done:
		return nil
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
		return nil
	case <-time.After(timeout):
		_ = a.cmd.Process.Kill()
		<-a.done
		return fmt.Errorf("%s (pid %d) ignored SIGTERM for %s: killed", a.Name, a.PID(), timeout)
	}
}

func start(name, bin, dir string, args ...string) (*Agent, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	a := &Agent{Name: name, Dir: dir, bin: bin, args: args}
	if err := a.spawn(os.O_TRUNC); err != nil {
		return nil, err
	}
	return a, nil
}

// spawn runs the agent's binary with its arguments in its own process
// group, its output going to dir/NAME.log (truncated or appended to, by
// mode).
func (a *Agent) spawn(mode int) error {
	logf, err := os.OpenFile(filepath.Join(a.Dir, a.Name+".log"), os.O_CREATE|os.O_WRONLY|mode, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(a.bin, a.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = a.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), "AWS_CA_BUNDLE=") // nomad's env_aws fingerprinter dies on it
	if err := startIn(a.ns, cmd); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", a.Name, err)
	}
	done := make(chan struct{})
	a.cmd, a.done = cmd, done
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	return nil
}

// launch writes an agent's HCL config to dir/NAME.hcl (and creates
// dir/data), starts bin with args followed by cfgFlag and that file, and
// waits until ready holds; its HTTP API is on 127.0.0.1:httpPort, over
// HTTPS through httpc when that is not nil.
func launch(ctx context.Context, name, bin, dir, cfg string, httpPort int, httpc *http.Client, ready func(*Agent, context.Context) error, cfgFlag string, args ...string) (*Agent, error) {
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return nil, err
	}
	cfgFile := filepath.Join(dir, name+".hcl")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	a, err := start(name, bin, dir, append(args, cfgFlag, cfgFile)...)
	if err != nil {
		return nil, err
	}
	a.Addr = "http://127.0.0.1:" + strconv.Itoa(httpPort)
	if httpc != nil {
		a.Addr, a.httpc = "https://127.0.0.1:"+strconv.Itoa(httpPort), httpc
	}
	a.ready = func(ctx context.Context) error { return ready(a, ctx) }
	if err := a.waitReady(ctx, a.ready); err != nil {
		return nil, err
	}
	return a, nil
}

// waitReady polls ready until it returns nil, the agent exits, or ctx ends.
func (a *Agent) waitReady(ctx context.Context, ready func(context.Context) error) error {
	var last error
	for {
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-a.done:
			return fmt.Errorf("%s exited during start-up; see %s: %v", a.Name, filepath.Join(a.Dir, a.Name+".log"), last)
		case <-ctx.Done():
			_ = a.Stop(5 * time.Second)
			return fmt.Errorf("%s not ready: %w (last: %v); see %s", a.Name, ctx.Err(), last, filepath.Join(a.Dir, a.Name+".log"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func getJSON(ctx context.Context, url string, out any) error {
	return getJSONToken(ctx, url, "", out)
}

// getJSONToken is getJSON with an ACL token (sent as X-Consul-Token and
// X-Nomad-Token) unless token is empty.
func getJSONToken(ctx context.Context, url, token string, out any) error {
	return getJSONWith(ctx, http.DefaultClient, url, token, out)
}

// getJSONWith is getJSONToken through the HTTP client c.
func getJSONWith(ctx context.Context, c *http.Client, url, token string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("X-Consul-Token", token)
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Options change how an agent starts.
type Options struct {
	// ACL enables ACLs with a default-deny policy and bootstraps them: the
	// management token is in Agent.Token.
	ACL bool
	// ConsulToken is the token Nomad uses for Consul (StartNomadWith);
	// needed when the Consul agent runs with ACLs.
	ConsulToken string
	// TLS serves the agent's HTTP API over HTTPS only, with
	// TLS.CertFile, requiring client certificates of TLS.CAFile
	// (Agent.Addr is then https://). For Nomad it also puts RPC on TLS
	// and makes the agent talk to Consul over HTTPS with the same
	// certificate (the Consul agent must be started with the same TLS).
	TLS *TLS
	// Docker, when set, is the Docker engine (StartDocker) Nomad's docker
	// driver uses, instead of the system's /var/run/docker.sock. It keeps
	// the images (the kit loads them; there is no registry to pull from
	// again).
	Docker *Docker
	// DiskFreeMB, when set, is the free disk the Nomad client advertises
	// (client.disk_free_mb) instead of what it finds: many idle members'
	// sticky disks fit the scheduler where the real free disk would not.
	DiskFreeMB int
}

// StartConsul starts `consul agent -dev` with its state in dir.
func StartConsul(ctx context.Context, dir string) (*Agent, error) {
	return StartConsulWith(ctx, dir, Options{})
}

// StartConsulWith starts `consul agent -dev` with its state in dir; with
// o.ACL, ACLs are enabled with default_policy "deny" and a fresh management
// token (also the agent's own token), returned in Agent.Token.
func StartConsulWith(ctx context.Context, dir string, o Options) (*Agent, error) {
	bin, p, err := binAndPorts("consul", ConsulVersion, 5)
	if err != nil {
		return nil, err
	}
	httpPort := fmt.Sprintf("http = %d", p[0])
	if o.TLS != nil {
		httpPort = fmt.Sprintf("http = -1\n  https = %d", p[0])
	}
	cfg := fmt.Sprintf(`
ports {
  %s
  serf_lan = %d
  serf_wan = %d
  server = %d
  dns = %d
  grpc = -1
  grpc_tls = -1
}
# Tests and the demo run many clients from one address.
limits {
  http_max_conns_per_client = 4000
}
`, httpPort, p[1], p[2], p[3], p[4])
	var token string
	if o.ACL {
		if token, err = newUUID(); err != nil {
			return nil, err
		}
		cfg += fmt.Sprintf(`
acl {
  enabled                  = true
  default_policy           = "deny"
  enable_token_persistence = true
  tokens {
    initial_management = %q
    agent              = %q
  }
}
`, token, token)
	}
	httpc, err := withTLSClient(o.TLS)
	if err != nil {
		return nil, err
	}
	if o.TLS != nil {
		cfg += consulTLSConfig(o.TLS)
	}
	a, err := launch(ctx, "consul", bin, dir, cfg, p[0], httpc, func(a *Agent, ctx context.Context) error {
		var leader string
		if err := getJSONWith(ctx, a.httpClient(), a.Addr+"/v1/status/leader", "", &leader); err != nil {
			return err
		}
		if leader == "" {
			return errors.New("no leader yet")
		}
		if token != "" {
			// ACLs are usable once the management token resolves.
			var self map[string]any
			if err := getJSONWith(ctx, a.httpClient(), a.Addr+"/v1/acl/token/self", token, &self); err != nil {
				return err
			}
		}
		// A session needs the agent's node in the catalog, which a
		// loaded machine registers only after the leader is elected
		// ("Missing node registration": coord/consul's conformance
		// test in CI, as consulReady says for the server agent).
		var node struct{ Node *struct{ Node string } }
		if err := getJSONWith(ctx, a.httpClient(), a.Addr+"/v1/catalog/node/dev", token, &node); err != nil {
			return err
		}
		if node.Node == nil {
			return errors.New(`node "dev" not registered in the catalog yet`)
		}
		return nil
	}, "-config-file", "agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1", "-node", "dev")
	if err != nil {
		return nil, err
	}
	a.Token = token
	a.DNSAddr = fmt.Sprintf("127.0.0.1:%d", p[4])
	return a, nil
}

// StartNomad starts `nomad agent -dev` (server and client, raw_exec on,
// cloud fingerprinters denied, allocations on 127.0.0.1) registered with the
// Consul agent at consulAddr.
func StartNomad(ctx context.Context, dir, consulAddr string) (*Agent, error) {
	return StartNomadWith(ctx, dir, consulAddr, Options{})
}

// StartNomadWith is StartNomad with options: o.ConsulToken is Nomad's token
// for Consul; o.ACL enables Nomad ACLs and bootstraps them, returning the
// management token in Agent.Token.
func StartNomadWith(ctx context.Context, dir, consulAddr string, o Options) (*Agent, error) {
	bin, p, err := binAndPorts("nomad", NomadVersion, 3)
	if err != nil {
		return nil, err
	}
	allocDir, err := allocDirFor(filepath.Join(dir, "data"))
	if err != nil {
		return nil, err
	}
	cfg := nomadConfig(filepath.Join(dir, "data"), allocDir, p, consulAddr, o, false)
	httpc, err := withTLSClient(o.TLS)
	if err != nil {
		return nil, err
	}
	return withAllocDir(allocDir)(launch(ctx, "nomad", bin, dir, cfg, p[0], httpc, func(a *Agent, ctx context.Context) error {
		if o.ACL && a.Token == "" {
			tok, err := nomadBootstrap(ctx, a.Addr)
			if err != nil {
				return err
			}
			a.Token = tok
		}
		return a.nomadReady(ctx)
	}, "-config", "agent", "-dev"))
}

// maxSocketPath is what a unix socket path may hold (sun_path, 108 bytes
// with its terminating NUL), less a margin.
const maxSocketPath = 104

// allocDirFor is the client's alloc_dir: data/alloc, unless the task API
// socket of an allocation there (alloc/<uuid>/etcd/secrets/api.sock, which
// the members reach Nomad through) would be too long for a unix socket;
// then a short directory under /tmp.
func allocDirFor(data string) (string, error) {
	def := filepath.Join(data, "alloc")
	if len(def)+len("/12345678-1234-1234-1234-123456789012/etcd/secrets/api.sock") <= maxSocketPath {
		return def, nil
	}
	d, err := os.MkdirTemp("/tmp", "nomad-alloc-")
	if err != nil {
		return "", fmt.Errorf("short alloc dir (the task API socket under %s would be too long): %w", def, err)
	}
	return d, nil
}

// withAllocDir records the client's alloc dir on a started agent.
func withAllocDir(dir string) func(*Agent, error) (*Agent, error) {
	return func(a *Agent, err error) (*Agent, error) {
		if a != nil {
			a.AllocDir = dir
		}
		return a, err
	}
}

// nomadBootstrap bootstraps Nomad's ACL system and returns the management
// token's secret.
func nomadBootstrap(ctx context.Context, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, addr+"/v1/acl/bootstrap", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("nomad ACL bootstrap: %s", resp.Status)
	}
	var tok struct{ SecretID string }
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
		return "", fmt.Errorf("nomad ACL bootstrap: %w", err)
	}
	if tok.SecretID == "" {
		return "", errors.New("nomad ACL bootstrap returned no secret")
	}
	return tok.SecretID, nil
}

func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]), nil
}

func trimScheme(addr string) string {
	for _, p := range []string{"http://", "https://"} {
		if len(addr) > len(p) && addr[:len(p)] == p {
			return addr[len(p):]
		}
	}
	return addr
}

// S3 test credentials of the gateway's root user.
const (
	S3AccessKey = "etcdnomadtest"
	S3SecretKey = "etcdnomadtestsecret"
)

// StartS3 starts the versitygw S3 gateway on a posix directory in dir, with
// the given buckets created, and root credentials S3AccessKey/S3SecretKey.
func StartS3(ctx context.Context, dir string, buckets ...string) (*Agent, error) {
	return startS3(ctx, dir, "", "", buckets)
}

// StartS3TLS is StartS3 serving https with the PEM certificate and key in
// certFile and keyFile; Agent.Addr is https://127.0.0.1:PORT.
func StartS3TLS(ctx context.Context, dir, certFile, keyFile string, buckets ...string) (*Agent, error) {
	return startS3(ctx, dir, certFile, keyFile, buckets)
}

func startS3(ctx context.Context, dir, certFile, keyFile string, buckets []string) (*Agent, error) {
	bin, p, err := binAndPorts("versitygw", VersityVersion, 1)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "buckets")
	for _, b := range buckets {
		if err := os.MkdirAll(filepath.Join(data, b), 0o700); err != nil {
			return nil, err
		}
	}
	addr := "127.0.0.1:" + strconv.Itoa(p[0])
	args := []string{"--access", S3AccessKey, "--secret", S3SecretKey, "--port", addr}
	scheme, probe := "http://", http.DefaultClient
	if certFile != "" {
		args = append(args, "--cert", certFile, "--key", keyFile)
		// The readiness probe only asks whether it serves; the tests
		// check the certificate.
		scheme = "https://"
		probe = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	}
	a, err := start("versitygw", bin, dir, append(args, "posix", data)...)
	if err != nil {
		return nil, err
	}
	a.Addr = scheme + addr
	err = a.waitReady(ctx, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Addr+"/", nil)
		if err != nil {
			return err
		}
		resp, err := probe.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil // any answer (403 unsigned) means it serves
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// StartConsulServer starts Consul as a real single-node server (not -dev):
// `-server -bootstrap-expect=1` with its state in dir/data, so that Restart
// keeps the KV store and sessions, and WipeRestart loses them.
func StartConsulServer(ctx context.Context, dir string) (*Agent, error) {
	bin, p, err := binAndPorts("consul", ConsulVersion, 4)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	cfg := fmt.Sprintf(`
data_dir = %q
ports {
  http = %d
  serf_lan = %d
  serf_wan = %d
  server = %d
  dns = -1
  grpc = -1
  grpc_tls = -1
}
# One server on loopback: elect at once, keep raft timings short.
performance {
  raft_multiplier = 1
}
limits {
  http_max_conns_per_client = 4000
}
`, data, p[0], p[1], p[2], p[3])
	return launch(ctx, "consul", bin, dir, cfg, p[0], nil, (*Agent).consulReady, "-config-file",
		"agent", "-server", "-bootstrap-expect=1", "-bind", "127.0.0.1", "-client", "127.0.0.1", "-node", "server")
}

// consulReady holds once the agent has a leader and is synced with it
// (the KV store answers).
func (a *Agent) consulReady(ctx context.Context) error {
	var leader string
	if err := getJSON(ctx, a.Addr+"/v1/status/leader", &leader); err != nil {
		return err
	}
	if leader == "" {
		return errors.New("no leader yet")
	}
	var self struct {
		Config struct{ NodeName string }
		Stats  map[string]map[string]string
	}
	if err := getJSON(ctx, a.Addr+"/v1/agent/self", &self); err != nil {
		return err
	}
	if self.Stats["consul"]["leader"] != "true" {
		return errors.New("this server does not lead yet")
	}
	// A session needs the agent's node in the catalog: right after the
	// leader is elected it may not be yet ("Missing node registration"
	// creating a session: coord/consul's conformance test in CI).
	var node struct{ Node *struct{ Node string } }
	if err := getJSON(ctx, a.Addr+"/v1/catalog/node/"+url.PathEscape(self.Config.NodeName), &node); err != nil {
		return err
	}
	if node.Node == nil {
		return fmt.Errorf("node %q not registered in the catalog yet", self.Config.NodeName)
	}
	return nil
}

// StartNomadServer starts Nomad as a real single-node server and client
// (not -dev; raw_exec on, allocations on 127.0.0.1) with its state in
// dir/data, so that Restart keeps jobs and reattaches to running tasks.
func StartNomadServer(ctx context.Context, dir, consulAddr string) (*Agent, error) {
	bin, p, err := binAndPorts("nomad", NomadVersion, 3)
	if err != nil {
		return nil, err
	}
	allocDir, err := allocDirFor(filepath.Join(dir, "data"))
	if err != nil {
		return nil, err
	}
	cfg := nomadConfig(filepath.Join(dir, "data"), allocDir, p, consulAddr, Options{}, true)
	return withAllocDir(allocDir)(launch(ctx, "nomad", bin, dir, cfg, p[0], nil, (*Agent).nomadReady, "-config", "agent"))
}

// nomadConfig is a Nomad agent's configuration: server and client on
// loopback, raw_exec on, cloud fingerprinters denied, registered with the
// Consul agent at consulAddr. server selects a real single-node server
// (with a data dir that survives restarts) rather than -dev.
func nomadConfig(data, allocDir string, p []int, consulAddr string, o Options, server bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, `bind_addr = "127.0.0.1"
data_dir  = %q
ports {
  http = %d
  rpc  = %d
  serf = %d
}
`, data, p[0], p[1], p[2])
	client := ""
	if server {
		b.WriteString(`advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}
server {
  enabled          = true
  bootstrap_expect = 1
}
`)
		// Allocation ports from a range of their own: another Nomad agent
		// on this machine (a -dev one of the e2e tests, the demo) hands out
		// 20000-32000 and does not know about these.
		client = `
  enabled           = true
  min_dynamic_port  = 15000
  max_dynamic_port  = 19999`
	}
	client += fmt.Sprintf("\n  alloc_dir         = %q", allocDir)
	if o.DiskFreeMB > 0 {
		client += fmt.Sprintf("\n  disk_free_mb      = %d", o.DiskFreeMB)
	}
	fmt.Fprintf(&b, `client {
  network_interface = "lo"%s
  options = {
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
  }
}
# Tests and the demo run many clients from one address (default 100).
limits {
  http_max_conns_per_client = 4000
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
consul {
  address = %q
  token   = %q%s
}
acl {
  enabled = %t
}
`, client, trimScheme(consulAddr), o.ConsulToken, consulClientTLS(o.TLS), o.ACL)
	if o.TLS != nil {
		b.WriteString(nomadTLSConfig(o.TLS))
	}
	if o.Docker != nil {
		fmt.Fprintf(&b, `plugin "docker" {
  config {
    endpoint = %q
    gc {
      image = false
    }
  }
}
`, o.Docker.Host)
	}
	return b.String()
}

// nomadReady holds once a client node is ready.
func (a *Agent) nomadReady(ctx context.Context) error {
	var nodes []struct{ Status string }
	if err := getJSONWith(ctx, a.httpClient(), a.Addr+"/v1/nodes?resources=false", a.Token, &nodes); err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Status == "ready" {
			return nil
		}
	}
	return errors.New("no ready node yet")
}

// Restart stops a Consul or Nomad agent (SIGTERM to its PID, waiting up to
// stopTimeout) and starts it again with the same ports and data dir,
// waiting until it is ready or ctx ends. Only the server modes
// (StartConsulServer, StartNomadServer) keep their state across it.
func (a *Agent) Restart(ctx context.Context, stopTimeout time.Duration) error {
	return a.restart(ctx, stopTimeout, false)
}

// WipeRestart is Restart with the agent's state deleted while it is
// stopped: it comes back empty (for Consul: no KV, no sessions, no
// registered services).
func (a *Agent) WipeRestart(ctx context.Context, stopTimeout time.Duration) error {
	return a.restart(ctx, stopTimeout, true)
}

func (a *Agent) restart(ctx context.Context, stopTimeout time.Duration, wipe bool) error {
	if a.ready == nil {
		return fmt.Errorf("%s has no readiness check (only Consul and Nomad agents restart)", a.Name)
	}
	if err := a.stop(stopTimeout); err != nil {
		return err
	}
	if wipe {
		data := filepath.Join(a.Dir, "data")
		if err := os.RemoveAll(data); err != nil {
			return fmt.Errorf("wipe %s state: %w", a.Name, err)
		}
		if err := os.MkdirAll(data, 0o700); err != nil {
			return fmt.Errorf("wipe %s state: %w", a.Name, err)
		}
	}
	// The log is appended to, so the previous run's lines stay readable.
	if err := a.spawn(os.O_APPEND); err != nil {
		return err
	}
	return a.waitReady(ctx, a.ready)
}
