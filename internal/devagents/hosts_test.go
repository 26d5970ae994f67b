package devagents

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/internal/procstat"
)

// startTestbed starts a testbed for t and closes it when t ends; the test
// fails if anything of it is left.
func startTestbed(t *testing.T, o HostsOptions) *Testbed {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Consul and Nomad agents on several hosts")
	}
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	tb, err := StartHosts(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("testbed %s (%d servers, %d clients) ready in %s", tb.Name, len(tb.Servers), len(tb.Clients), time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Error(err)
		}
		if left := Leftovers(); len(left) > 0 {
			t.Errorf("left after Close: %v", left)
		}
	})
	return tb
}

// canDial reports whether from reaches addr (host:port) within 2 s.
func canDial(from *Host, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := from.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// The testbed's hosts are separate machines on one bridge: each agent
// answers on its host's loopback and address, hosts reach each other
// until a fault says otherwise, faults are undone by Heal, a crash stops
// everything on the host, and Close leaves nothing behind (no namespace,
// link, process, mount or directory).
func TestTestbed(t *testing.T) {
	tb := startTestbed(t, HostsOptions{Servers: 1, Clients: 2, LogRequests: true})
	s1, c1, c2 := tb.Servers[0], tb.Clients[0], tb.Clients[1]
	consulOf := func(h *Host) string { return net.JoinHostPort(h.IP, "8500") }

	// The client hosts' agents log each request they serve: a blocking
	// query (an index) and a plain one show up, counted once each.
	mark, err := c1.Mark()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{c1.Consul.Addr + "/v1/kv/counted?index=1&wait=1s", c1.Nomad.Addr + "/v1/status/leader"} {
		var v any
		if err := getJSON(context.Background(), u, &v); err != nil && !strings.Contains(err.Error(), "404") {
			t.Fatalf("GET %s: %v", u, err)
		}
	}
	// An agent logs a request once it has answered it: poll its log.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		reqs, err := c1.Requests(mark)
		if err != nil {
			t.Fatal(err)
		}
		want := map[Request]int{{"consul", "GET", "/v1/kv/counted", true}: 1, {"nomad", "GET", "/v1/status/leader", false}: 1}
		for _, r := range reqs {
			if _, ok := want[r]; ok {
				want[r]--
			}
		}
		left := 0
		for _, n := range want {
			left += max(n, 0)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agents' logs name %+v, not once each of the two requests made (left: %v)", reqs, want)
		}
	}

	for _, h := range tb.Hosts() {
		// Loopback is up and the agents listen on it, in the host's
		// namespace (not this process's: nothing of ours is on 8500).
		for _, port := range []string{"8500", "4646"} {
			if err := canDial(h, "127.0.0.1:"+port); err != nil {
				t.Errorf("host %s: its own 127.0.0.1:%s: %v", h.Name, port, err)
			}
		}
		if ips := addrsOf(t, h); strings.Join(ips, ",") != "127.0.0.1,"+h.IP {
			t.Errorf("host %s has addresses %v, want loopback and %s", h.Name, ips, h.IP)
		}
	}
	if err := canDial(c1, consulOf(c2)); err != nil {
		t.Fatalf("c1 cannot reach c2: %v", err)
	}

	if err := tb.Partition([]*Host{c1}, []*Host{c2}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tb.Blocked(), " "); got != "c1->c2 c2->c1" {
		t.Errorf("blocked: %s", got)
	}
	if canDial(c1, consulOf(c2)) == nil || canDial(c2, consulOf(c1)) == nil {
		t.Error("partitioned c1 | c2, yet they reach each other")
	}
	if err := canDial(c1, consulOf(s1)); err != nil {
		t.Errorf("c1 | c2 also cut c1 from s1: %v", err)
	}
	if err := tb.CutFromServers(c2); err != nil {
		t.Fatal(err)
	}
	if canDial(c2, consulOf(s1)) == nil {
		t.Error("c2 cut from the servers, yet it reaches s1")
	}
	if err := tb.Unplug(c1); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tb.Blocked(), " "); got != "c1 unplugged c1->c2 c2->c1 c2->s1 s1->c2" {
		t.Errorf("blocked: %s", got)
	}
	if canDial(c1, consulOf(s1)) == nil || canDial(s1, consulOf(c1)) == nil {
		t.Error("c1 unplugged, yet it reaches s1 or s1 reaches it")
	}
	if err := canDial(c1, "127.0.0.1:8500"); err != nil {
		t.Errorf("c1 unplugged: its own Consul agent: %v", err)
	}
	if err := tb.Heal(); err != nil {
		t.Fatal(err)
	}
	if b := tb.Blocked(); len(b) != 0 {
		t.Errorf("blocked after Heal: %v", b)
	}
	// A host plugged back in resolves its neighbours again first.
	for _, p := range [][2]*Host{{c1, c2}, {c2, c1}, {c2, s1}, {c1, s1}, {s1, c1}} {
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			err := canDial(p[0], consulOf(p[1]))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("after Heal %s cannot reach %s: %v", p[0].Name, p[1].Name, err)
				break
			}
		}
	}
	// Muted, c1 sends nothing out: no connection either way completes
	// (the other side's SYN arrives, c1's answer does not leave).
	if err := tb.Mute(c1); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tb.Blocked(), " "); got != "c1->c2 c1->s1" {
		t.Errorf("blocked: %s", got)
	}
	if canDial(c1, consulOf(s1)) == nil || canDial(s1, consulOf(c1)) == nil {
		t.Error("c1 muted, yet a connection between it and s1 completes")
	}
	if err := tb.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := tb.CutFromServers(c2); err != nil {
		t.Fatal(err)
	}
	// Cut off past its heartbeat TTL, c2's Nomad client is no longer
	// registered; NodeID waits for its next heartbeat after the heal
	// rather than failing (chaos-hosts drained a host just healed).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(250 * time.Millisecond) {
		if _, err := c2.nodeID(context.Background()); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("c2's Nomad client cut off from the servers for a minute, still registered")
		}
	}
	healed := make(chan error, 1)
	go func() { healed <- tb.Heal() }()
	nctx, ncancel := context.WithTimeout(context.Background(), time.Minute)
	if _, err := tb.NodeID(nctx, c2); err != nil {
		t.Errorf("NodeID after the heal: %v", err)
	}
	ncancel()
	if err := <-healed; err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, err := tb.NodeID(ctx, c2)
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Crash(c2); err != nil {
		t.Fatal(err)
	}
	if pids, err := c2.PIDs(); err != nil || len(pids) != 0 {
		t.Fatalf("crashed host still runs %v (%v)", pids, err)
	}
	if err := tb.Restart(ctx, c2, true); err != nil {
		t.Fatal(err)
	}
	if again, err := tb.NodeID(ctx, c2); err != nil || again != node {
		t.Errorf("restarted with its data, c2 is node %s (%v), was %s", again, err, node)
	}
	if err := tb.Crash(c2); err != nil {
		t.Fatal(err)
	}
	if err := tb.Restart(ctx, c2, false); err != nil {
		t.Fatal(err)
	}
	if fresh, err := tb.NodeID(ctx, c2); err != nil || fresh == node {
		t.Errorf("restarted without its data, c2 is node %s (%v), was %s: want a new node", fresh, err, node)
	}

	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	if left := Leftovers(); len(left) > 0 {
		t.Fatalf("left after Close: %v", left)
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), tb.Name) {
		t.Errorf("ip netns list still shows %s:\n%s", tb.Name, out)
	}
}

// addrsOf lists the IPv4 addresses of h's interfaces.
func addrsOf(t *testing.T, h *Host) []string {
	t.Helper()
	out, err := h.Run(context.Background(), "ip", "-4", "-o", "addr", "show")
	if err != nil {
		t.Fatalf("ip addr on %s: %v\n%s", h.Name, err, out)
	}
	var ips []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for i := range f {
			if f[i] == "inet" && i+1 < len(f) {
				ips = append(ips, strings.SplitN(f[i+1], "/", 2)[0])
			}
		}
	}
	return ips
}

// TestTestbedIdleCPU measures what an idle testbed costs this machine:
// the CPU time of every process on its hosts over a minute, after a settling
// period. Opt-in (ETCD_NOMAD_TESTBED_CPU=1): it prints figures, for
// docs/testing.md (Multi-host testbed).
func TestTestbedIdleCPU(t *testing.T) {
	if os.Getenv("ETCD_NOMAD_TESTBED_CPU") == "" {
		t.Skip("set ETCD_NOMAD_TESTBED_CPU=1 to measure")
	}
	for _, o := range []HostsOptions{{Servers: 1, Clients: 3}, {Servers: 3, Clients: 5}} {
		t.Run(fmt.Sprintf("%ds%dc", o.Servers, o.Clients), func(t *testing.T) {
			tb := startTestbed(t, o)
			time.Sleep(20 * time.Second) // a measurement, not a wait for a state: settle after start-up
			const window = time.Minute
			before := testbedCPU(t, tb)
			time.Sleep(window)
			after := testbedCPU(t, tb)
			perRole := map[string]time.Duration{}
			var total time.Duration
			for k, v := range after {
				d := v - before[k]
				total += d
				perRole[k[:strings.IndexByte(k, '/')]] += d
			}
			t.Logf("idle CPU over %s: %.1f%% of one core in total; by host role and agent: %v", window, 100*total.Seconds()/window.Seconds(), perRole)
		})
	}
}

// testbedCPU maps "role agent/pid" to the CPU time used so far, for every
// process on the testbed's hosts.
func testbedCPU(t *testing.T, tb *Testbed) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, h := range tb.Hosts() {
		pids, err := h.PIDs()
		if err != nil {
			t.Fatal(err)
		}
		role := "client"
		if h.Server {
			role = "server"
		}
		for _, pid := range pids {
			cpu, err := procstat.CPUTime(pid)
			if err != nil {
				continue // exited meanwhile
			}
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			out[fmt.Sprintf("%s %s/%d", role, strings.TrimSpace(string(comm)), pid)] = cpu
		}
	}
	return out
}
