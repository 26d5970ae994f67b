package devagents

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A Testbed is a Nomad and Consul cluster of several hosts on this
// machine: each host is a Linux network namespace with its own address on
// a private bridge (10.77.N.0/24, N free on this machine), its own loopback
// and its own agents on their default ports. Server hosts run a Consul
// server and a Nomad server (one Raft of each across them); client hosts
// run a Consul client agent and a Nomad client with raw_exec, whose tasks
// run in the host's namespace and advertise its address.
//
// This process reaches every host through the bridge's own address (.1),
// which no fault touches: tests observe every side of a partition. No
// traffic leaves the bridge (the hosts have no default route and this
// machine does not forward).
//
// Everything is named after this process's PID (NamePrefix), so testbeds of
// parallel test binaries never collide, and a testbed whose process died
// without Close is swept by the next StartHosts on this machine.
type Testbed struct {
	// Name prefixes every namespace and link of this testbed.
	Name string
	// Dir holds every host's state and logs (a short path under /tmp:
	// Nomad's task API socket paths must fit in 108 bytes).
	Dir     string
	Servers []*Host
	Clients []*Host
	// Gateway is this process's address on the bridge.
	Gateway string

	bridge string
	// blocked are the blackhole routes in place: from host name to the
	// addresses it cannot reach.
	mu      sync.Mutex
	blocked map[string]map[string]bool
	// unplugged are the hosts whose link Unplug took down.
	unplugged map[string]bool
	closed    bool
}

// Host is one machine of a Testbed.
type Host struct {
	// Name is the host's name (s1, c1, ...), also its Consul and Nomad
	// node name.
	Name string
	// NS is its network namespace, IP its address on the bridge.
	NS     string
	IP     string
	Server bool
	Consul *Agent
	Nomad  *Agent
	// Dir holds the host's state and agent logs; AllocDir is its Nomad
	// client's alloc_dir.
	Dir      string
	AllocDir string
	// Volume is the path of its host volume "etcd", empty when it has
	// none (HostsOptions.Volumes).
	Volume string

	hasVolume    bool
	consulNodeID string
}

// HostsOptions size a Testbed.
type HostsOptions struct {
	// Servers is the number of server hosts: 1 or 3 (default 3).
	Servers int
	// Clients is the number of client hosts, 1 to 9 (default 5).
	Clients int
	// LogRequests: the client hosts' agents log at DEBUG, which logs
	// every HTTP request they serve (Host.Requests counts them).
	LogRequests bool
	// Volumes is how many client hosts (the first ones) have the host
	// volume "etcd", a directory of their own (Host.Volume): what a
	// production client dedicated to etcd declares.
	Volumes int
	// ExecDirs are the directories the exec driver's chroot holds, each at
	// its own path: a static binary needs nothing else. Empty: Nomad's
	// default chroot_env, which copies /usr (gigabytes) into every task.
	ExecDirs []string
}

// testbedSeq numbers the testbeds of this process.
var testbedSeq struct {
	sync.Mutex
	n int
}

// NamePrefix is how every testbed of this process is named: "tb", the PID,
// and a letter per testbed.
func NamePrefix() string { return "tb" + strconv.Itoa(os.Getpid()) }

// StartHosts builds the hosts, starts their agents and waits (polling,
// until ctx ends) until both Raft clusters have a leader, every Consul
// agent is an alive member and every Nomad client is ready with Consul
// fingerprinted. On error everything already built is torn down.
func StartHosts(ctx context.Context, o HostsOptions) (*Testbed, error) {
	if o.Servers == 0 {
		o.Servers = 3
	}
	if o.Clients == 0 {
		o.Clients = 5
	}
	if o.Servers != 1 && o.Servers != 3 {
		return nil, fmt.Errorf("testbed: %d server hosts: use 1 or 3", o.Servers)
	}
	if o.Clients < 1 || o.Clients > 9 {
		return nil, fmt.Errorf("testbed: %d client hosts: use 1 to 9", o.Clients)
	}
	if o.Volumes < 0 || o.Volumes > o.Clients {
		return nil, fmt.Errorf("testbed: host volumes on %d of %d client hosts", o.Volumes, o.Clients)
	}
	consulBin, err := Bin("consul", ConsulVersion)
	if err != nil {
		return nil, err
	}
	nomadBin, err := Bin("nomad", NomadVersion)
	if err != nil {
		return nil, err
	}
	SweepTestbeds()
	if why := forwardingBlocked(); why != "" {
		return nil, fmt.Errorf("testbed: this machine drops what its bridge would forward between the hosts: %s", why)
	}

	testbedSeq.Lock()
	if testbedSeq.n >= 26 {
		testbedSeq.Unlock()
		return nil, errors.New("testbed: 26 testbeds in one process")
	}
	name := NamePrefix() + string(rune('a'+testbedSeq.n))
	testbedSeq.n++
	testbedSeq.Unlock()

	dir, err := os.MkdirTemp("/tmp", name+"-")
	if err != nil {
		return nil, err
	}
	tb := &Testbed{Name: name, Dir: dir, bridge: name + "-br", blocked: map[string]map[string]bool{}, unplugged: map[string]bool{}}
	if err := tb.build(o, consulBin, nomadBin); err != nil {
		tb.Close()
		return nil, err
	}
	if err := tb.WaitReady(ctx); err != nil {
		err = fmt.Errorf("%w (logs under %s)", err, tb.Dir)
		tb.Close()
		return nil, err
	}
	return tb, nil
}

// build creates the bridge and the hosts and starts every agent.
func (tb *Testbed) build(o HostsOptions, consulBin, nomadBin string) error {
	subnet, err := tb.makeBridge()
	if err != nil {
		return err
	}
	tb.Gateway = subnet + ".1"
	for i := 1; i <= o.Servers; i++ {
		tb.Servers = append(tb.Servers, &Host{Name: "s" + strconv.Itoa(i), IP: subnet + "." + strconv.Itoa(10+i), Server: true})
	}
	for i := 1; i <= o.Clients; i++ {
		tb.Clients = append(tb.Clients, &Host{Name: "c" + strconv.Itoa(i), IP: subnet + "." + strconv.Itoa(20+i), hasVolume: i <= o.Volumes})
	}
	for _, h := range tb.Hosts() {
		if err := tb.addHost(h); err != nil {
			return err
		}
		if h.hasVolume {
			// Writable by the task's user: exec runs tasks as nobody.
			h.Volume = filepath.Join(h.Dir, "volume")
			if err := os.MkdirAll(h.Volume, 0o700); err != nil {
				return err
			}
			if err := os.Chmod(h.Volume, 0o777); err != nil {
				return err
			}
		}
		if err := tb.configure(h, consulBin, nomadBin, o.ExecDirs); err != nil {
			return err
		}
		if o.LogRequests && !h.Server {
			h.Consul.args = append(h.Consul.args, "-log-level=debug")
			h.Nomad.args = append(h.Nomad.args, "-log-level=debug")
		}
		if err := h.spawnAgents(os.O_TRUNC); err != nil {
			return err
		}
	}
	return nil
}

// Hosts lists the server hosts, then the client hosts.
func (tb *Testbed) Hosts() []*Host {
	return append(append([]*Host(nil), tb.Servers...), tb.Clients...)
}

// Host returns the host named name, or nil.
func (tb *Testbed) Host(name string) *Host {
	for _, h := range tb.Hosts() {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// HostOf returns the host whose address is ip, or nil.
func (tb *Testbed) HostOf(ip string) *Host {
	for _, h := range tb.Hosts() {
		if h.IP == ip {
			return h
		}
	}
	return nil
}

// NomadAddr is a Nomad server's HTTP API (the first server host's).
func (tb *Testbed) NomadAddr() string { return tb.Servers[0].Nomad.Addr }

// ConsulAddr is a Consul server's HTTP API as host:port.
func (tb *Testbed) ConsulAddr() string { return trimScheme(tb.Servers[0].Consul.Addr) }

// subnetLock serializes the choice of a free subnet among the processes of
// this machine.
const subnetLock = "/run/lock/etcd-nomad-testbed.lock"

// makeBridge creates the testbed's bridge on the first 10.77.N.0/24 that
// no interface of this machine uses, with address .1, and returns
// "10.77.N".
func (tb *Testbed) makeBridge() (string, error) {
	lf, err := os.OpenFile(subnetLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("testbed subnet lock: %w", err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("testbed subnet lock: %w", err)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	used := map[string]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if v4 := ipn.IP.To4(); v4 != nil {
				used[fmt.Sprintf("%d.%d.%d", v4[0], v4[1], v4[2])] = true
			}
		}
	}
	subnet := ""
	for n := 0; n < 256 && subnet == ""; n++ {
		if s := "10.77." + strconv.Itoa(n); !used[s] {
			subnet = s
		}
	}
	if subnet == "" {
		return "", errors.New("testbed: every 10.77.N.0/24 is in use")
	}
	for _, args := range [][]string{
		{"link", "add", tb.bridge, "type", "bridge"},
		{"addr", "add", subnet + ".1/24", "dev", tb.bridge},
		{"link", "set", tb.bridge, "up"},
	} {
		if err := ipCmd(args...); err != nil {
			return "", err
		}
	}
	return subnet, nil
}

// addHost creates h's namespace with loopback up and an eth0 on the
// bridge (a veth pair named after the namespace on this side).
func (tb *Testbed) addHost(h *Host) error {
	h.NS = tb.Name + "-" + h.Name
	h.Dir = filepath.Join(tb.Dir, h.Name)
	// Short: alloc/<uuid>/etcd/secrets/api.sock must fit a unix socket.
	h.AllocDir = filepath.Join(h.Dir, "a")
	if len(h.AllocDir)+len("/12345678-1234-1234-1234-123456789012/etcd/secrets/api.sock") > maxSocketPath {
		return fmt.Errorf("testbed dir %s too long for Nomad's task API sockets", tb.Dir)
	}
	for _, args := range [][]string{
		{"netns", "add", h.NS},
		{"link", "add", h.NS, "type", "veth", "peer", "name", "eth0", "netns", h.NS},
		{"link", "set", h.NS, "master", tb.bridge, "up"},
		{"-n", h.NS, "addr", "add", h.IP + "/24", "dev", "eth0"},
		{"-n", h.NS, "link", "set", "eth0", "up"},
		{"-n", h.NS, "link", "set", "lo", "up"},
	} {
		if err := ipCmd(args...); err != nil {
			return fmt.Errorf("host %s: %w", h.Name, err)
		}
	}
	// Orphaned TCP sockets keep a namespace alive after its processes are
	// gone: let them go within seconds, not minutes.
	return inNetns(h.NS, func() error {
		for f, v := range map[string]string{"tcp_fin_timeout": "5", "tcp_orphan_retries": "2"} {
			if err := os.WriteFile("/proc/sys/net/ipv4/"+f, []byte(v), 0o644); err != nil {
				return fmt.Errorf("host %s: %w", h.Name, err)
			}
		}
		return nil
	})
}

func (tb *Testbed) serverIPs() []string {
	var ips []string
	for _, s := range tb.Servers {
		ips = append(ips, s.IP)
	}
	return ips
}

// configure writes h's agent configurations and prepares its agents.
func (tb *Testbed) configure(h *Host, consulBin, nomadBin string, execDirs []string) error {
	var err error
	if h.consulNodeID, err = newUUID(); err != nil {
		return err
	}
	for _, d := range []string{"consul", "nomad", "a"} {
		if err := os.MkdirAll(filepath.Join(h.Dir, d), 0o700); err != nil {
			return err
		}
	}
	servers := tb.serverIPs()
	consulCfg := filepath.Join(h.Dir, "consul", "consul.hcl")
	if err := os.WriteFile(consulCfg, []byte(consulHostConfig(h, servers)), 0o600); err != nil {
		return err
	}
	nomadCfg := filepath.Join(h.Dir, "nomad", "nomad.hcl")
	if err := os.WriteFile(nomadCfg, []byte(nomadHostConfig(h, servers, execDirs)), 0o600); err != nil {
		return err
	}
	h.Consul = &Agent{Name: "consul", Dir: filepath.Join(h.Dir, "consul"), Addr: "http://" + h.IP + ":8500",
		bin: consulBin, args: []string{"agent", "-config-file", consulCfg}, ns: h.NS}
	h.Nomad = &Agent{Name: "nomad", Dir: filepath.Join(h.Dir, "nomad"), Addr: "http://" + h.IP + ":4646",
		bin: nomadBin, args: []string{"agent", "-config", nomadCfg}, ns: h.NS}
	if !h.Server {
		h.Nomad.AllocDir = h.AllocDir
	}
	return nil
}

func hclList(xs []string, suffix string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x + suffix)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// consulHostConfig: a server (bootstrap_expect = every server host) or a
// client agent joining the servers; HTTP on loopback and the host's
// address, default ports.
func consulHostConfig(h *Host, servers []string) string {
	role := "server = false"
	if h.Server {
		role = fmt.Sprintf("server = true\nbootstrap_expect = %d\nperformance {\n  raft_multiplier = 1\n}", len(servers))
	}
	return fmt.Sprintf(`node_name   = %q
node_id     = %q
data_dir    = %q
bind_addr   = %q
client_addr = "127.0.0.1 %s"
retry_join  = %s
retry_interval = "1s"
%s
ports {
  dns      = -1
  grpc     = -1
  grpc_tls = -1
}
limits {
  http_max_conns_per_client = 4000
}
disable_update_check = true
`, h.Name, h.consulNodeID, filepath.Join(h.Dir, "consul", "data"), h.IP, h.IP, hclList(servers, ""), role)
}

// nomadHostConfig: a server (bootstrap_expect = every server host) or a
// client with raw_exec and exec on eth0 (exec's chroot: execDirs), with the
// host volume "etcd" if h has one, both using the host's Consul agent.
func nomadHostConfig(h *Host, servers []string, execDirs []string) string {
	var role, extra string
	if len(execDirs) > 0 {
		var env []string
		for _, d := range execDirs {
			env = append(env, fmt.Sprintf("    %q = %q", d, d))
		}
		extra += "  chroot_env = {\n" + strings.Join(env, "\n") + "\n  }\n"
	}
	if h.Volume != "" {
		extra += fmt.Sprintf("  host_volume \"etcd\" {\n    path = %q\n  }\n", h.Volume)
	}
	if h.Server {
		role = fmt.Sprintf(`server {
  enabled          = true
  bootstrap_expect = %d
  server_join {
    retry_join     = %s
    retry_interval = "1s"
  }
}
`, len(servers), hclList(servers, ""))
	} else {
		role = fmt.Sprintf(`client {
  enabled           = true
  servers           = %s
  network_interface = "eth0"
  alloc_dir         = %q
  options = {
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
  }
%s}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
`, hclList(servers, ":4647"), h.AllocDir, extra)
	}
	return fmt.Sprintf(`name      = %q
data_dir  = %q
bind_addr = "0.0.0.0"
advertise {
  http = %q
  rpc  = %q
  serf = %q
}
%slimits {
  http_max_conns_per_client = 4000
}
consul {
  address = "127.0.0.1:8500"
}
disable_update_check = true
`, h.Name, filepath.Join(h.Dir, "nomad", "data"), h.IP, h.IP, h.IP, role)
}

// spawnAgents starts h's Consul and Nomad agents in its namespace (logs
// truncated or appended to, by mode).
func (h *Host) spawnAgents(mode int) error {
	if err := h.Consul.spawn(mode); err != nil {
		return fmt.Errorf("host %s: %w", h.Name, err)
	}
	if err := h.Nomad.spawn(mode); err != nil {
		return fmt.Errorf("host %s: %w", h.Name, err)
	}
	return nil
}

// WaitReady polls until both Raft clusters have a leader that every
// server sees, every Consul agent is an alive member, and every client
// host's Nomad node is ready with Consul fingerprinted; it names what it
// last saw when ctx ends.
func (tb *Testbed) WaitReady(ctx context.Context) error {
	var last error
	for {
		if last = tb.ready(ctx); last == nil {
			return nil
		}
		for _, h := range tb.Hosts() {
			for _, a := range []*Agent{h.Consul, h.Nomad} {
				if a.exited() {
					return fmt.Errorf("testbed: %s on host %s exited; see %s", a.Name, h.Name, filepath.Join(a.Dir, a.Name+".log"))
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testbed not ready: %w (last: %v)", ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (tb *Testbed) ready(ctx context.Context) error {
	for _, s := range tb.Servers {
		for _, a := range []*Agent{s.Consul, s.Nomad} {
			var leader string
			if err := getJSON(ctx, a.Addr+"/v1/status/leader", &leader); err != nil {
				return fmt.Errorf("%s on %s: %w", a.Name, s.Name, err)
			}
			if leader == "" {
				return fmt.Errorf("%s on %s: no leader", a.Name, s.Name)
			}
		}
	}
	var peers []string
	if err := getJSON(ctx, tb.NomadAddr()+"/v1/status/peers", &peers); err != nil {
		return fmt.Errorf("nomad peers: %w", err)
	}
	if len(peers) != len(tb.Servers) {
		return fmt.Errorf("nomad raft has %d peers, want %d", len(peers), len(tb.Servers))
	}
	var members []struct {
		Name   string
		Status int
	}
	if err := getJSON(ctx, tb.Servers[0].Consul.Addr+"/v1/agent/members", &members); err != nil {
		return fmt.Errorf("consul members: %w", err)
	}
	alive := map[string]bool{}
	for _, m := range members {
		alive[m.Name] = alive[m.Name] || m.Status == 1
	}
	for _, h := range tb.Hosts() {
		if !alive[h.Name] {
			return fmt.Errorf("consul agent %s is not an alive member", h.Name)
		}
	}
	for _, h := range tb.Hosts() {
		// The host's own agent reaches the servers (a restarted one
		// may still look alive to them).
		var leader string
		if err := getJSON(ctx, h.Consul.Addr+"/v1/status/leader", &leader); err != nil || leader == "" {
			return fmt.Errorf("consul agent on %s: no leader (%v)", h.Name, err)
		}
	}
	for _, h := range tb.Clients {
		id, err := h.nodeID(ctx)
		if err != nil {
			return err
		}
		var node struct {
			Status     string
			Attributes map[string]string
		}
		if err := getJSON(ctx, tb.NomadAddr()+"/v1/node/"+id, &node); err != nil {
			return fmt.Errorf("nomad node %s (%s): %w", h.Name, id, err)
		}
		if node.Status != "ready" {
			return fmt.Errorf("nomad node %s (%s) is %s", h.Name, id, node.Status)
		}
		if node.Attributes["consul.version"] == "" {
			return fmt.Errorf("nomad node %s: consul not fingerprinted yet", h.Name)
		}
	}
	return nil
}

// nodeID asks client host h's Nomad agent for its node id, once it is
// registered: it has heartbeated within its TTL (a restarted client may
// still be listed as ready by the servers before it is).
func (h *Host) nodeID(ctx context.Context) (string, error) {
	var self struct {
		Stats struct {
			Client struct {
				NodeID        string `json:"node_id"`
				HeartbeatTTL  string `json:"heartbeat_ttl"`
				LastHeartbeat string `json:"last_heartbeat"`
			} `json:"client"`
		} `json:"stats"`
	}
	if err := getJSON(ctx, h.Nomad.Addr+"/v1/agent/self", &self); err != nil {
		return "", fmt.Errorf("nomad client on %s: %w", h.Name, err)
	}
	c := self.Stats.Client
	ttl, err1 := time.ParseDuration(c.HeartbeatTTL)
	last, err2 := time.ParseDuration(c.LastHeartbeat)
	if c.NodeID == "" || err1 != nil || err2 != nil || ttl <= 0 || last > ttl {
		return "", fmt.Errorf("nomad client on %s not registered (%+v)", h.Name, c)
	}
	return c.NodeID, nil
}

// NodeID returns the Nomad node id of client host h, as its agent
// reports it, polling until the client is registered (it has heartbeated
// within its TTL: just after a partition it may not have yet) or ctx ends.
func (tb *Testbed) NodeID(ctx context.Context, h *Host) (string, error) {
	for {
		id, err := h.nodeID(ctx)
		if err == nil {
			return id, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Close tears the testbed down even half built: every process in each
// host's namespace is killed (SIGKILL: agents, executors, tasks), the
// mounts Nomad left under the testbed's directory are undone, and the
// namespaces, the bridge and the directory are removed. It returns what it
// could not remove.
func (tb *Testbed) Close() error {
	tb.mu.Lock()
	done := tb.closed
	tb.closed = true
	tb.mu.Unlock()
	if done {
		return nil
	}
	var errs []error
	for _, h := range tb.Hosts() {
		if h.NS == "" {
			continue
		}
		if _, err := killNetns(h.NS, 10*time.Second); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		for _, a := range []*Agent{h.Consul, h.Nomad} {
			if a != nil && a.done != nil {
				<-a.done
			}
		}
		// The pair goes with either end; deleted here, not left to the
		// namespace's end, which orphaned TCP sockets (FIN-WAIT to a host
		// already gone) delay by up to a minute.
		if err := ipCmd("link", "del", h.NS); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err)
		}
		if err := ipCmd("netns", "del", h.NS); err != nil {
			errs = append(errs, err)
		}
	}
	if err := ipCmd("link", "del", tb.bridge); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		errs = append(errs, err)
	}
	unmountUnder(tb.Dir)
	if err := os.RemoveAll(tb.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Leftovers lists what remains of this process's testbeds: namespaces,
// links, processes in those namespaces, mounts. Empty after Close.
func Leftovers() []string {
	prefix := NamePrefix()
	var out []string
	for _, ns := range listNetns() {
		if testbedOwner(ns) == prefix {
			out = append(out, "netns "+ns)
			pids, _ := pidsInNetns(ns)
			for _, p := range pids {
				out = append(out, "process "+strconv.Itoa(p)+" in "+ns)
			}
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if testbedOwner(i.Name) == prefix {
			out = append(out, "link "+i.Name)
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], "/tmp/"+prefix) {
				out = append(out, "mount "+f[4])
			}
		}
	}
	dirs, _ := filepath.Glob("/tmp/" + prefix + "?-*")
	for _, d := range dirs {
		out = append(out, "dir "+d)
	}
	sort.Strings(out)
	return out
}

// listNetns lists the named network namespaces.
func listNetns() []string {
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// testbedOwner returns "tb<pid>" for a testbed's namespace, link or
// directory name ("tb<pid><letter>-..."), or "".
func testbedOwner(name string) string {
	rest, ok := strings.CutPrefix(name, "tb")
	if !ok {
		return ""
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || i+1 >= len(rest) || rest[i] < 'a' || rest[i] > 'z' || rest[i+1] != '-' {
		return ""
	}
	return "tb" + rest[:i]
}

// SweepTestbeds removes the testbeds of processes that no longer run (a
// test binary killed by its timeout never calls Close): their namespaces
// with every process in them, their links, mounts and directories.
func SweepTestbeds() {
	dead := func(owner string) bool {
		pid, err := strconv.Atoi(strings.TrimPrefix(owner, "tb"))
		return err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH
	}
	for _, ns := range listNetns() {
		if o := testbedOwner(ns); o != "" && dead(o) {
			_, _ = killNetns(ns, 10*time.Second)
			_ = ipCmd("netns", "del", ns)
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if o := testbedOwner(i.Name); o != "" && dead(o) {
			_ = ipCmd("link", "del", i.Name)
		}
	}
	dirs, _ := filepath.Glob("/tmp/tb*-*")
	for _, d := range dirs {
		if o := testbedOwner(filepath.Base(d)); o != "" && dead(o) {
			unmountUnder(d)
			_ = os.RemoveAll(d)
		}
	}
}

// forwardingBlocked says what on this machine stops a testbed's bridge
// from forwarding between its hosts, or "".
func forwardingBlocked() string {
	nf, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables")
	if err != nil {
		return "" // no bridge netfilter: bridged packets skip iptables
	}
	ipt, err := exec.LookPath("iptables")
	if err != nil {
		return ""
	}
	rules, err := exec.Command(ipt, "-S", "FORWARD").Output()
	if err != nil {
		return ""
	}
	return forwardingBlocker(string(nf), string(rules))
}

// forwardingBlocker is forwardingBlocked's rule: with bridge netfilter on
// (net.bridge.bridge-nf-call-iptables = 1) bridged packets cross the
// host's iptables FORWARD chain, and a DROP policy there, what a default
// dockerd sets beside turning bridge netfilter on, drops them: the hosts
// never see each other, and the testbed used to time out on "consul
// agent c1 is not an alive member".
func forwardingBlocker(bridgeNF, forwardRules string) string {
	if strings.TrimSpace(bridgeNF) != "1" {
		return ""
	}
	for _, line := range strings.Split(forwardRules, "\n") {
		if strings.TrimSpace(line) == "-P FORWARD DROP" {
			return "net.bridge.bridge-nf-call-iptables = 1 and the iptables FORWARD policy is DROP (what a default dockerd sets): bridged packets cross that chain and are dropped. Set either back (iptables -P FORWARD ACCEPT, or sysctl -w net.bridge.bridge-nf-call-iptables=0), and run Docker with --iptables=false, as the test kit's engine does"
		}
	}
	return ""
}
