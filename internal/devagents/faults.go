package devagents

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"
)

// Faults between hosts are blackhole routes inside their namespaces, both
// ways: a host can no longer reach the other (connects fail, established
// connections stall), while this process, on the bridge's own address,
// still reaches both.

// Partition cuts every host of side a off from every host of side b.
func (tb *Testbed) Partition(a, b []*Host) error {
	var errs []error
	for _, x := range a {
		for _, y := range b {
			if x == y {
				continue
			}
			errs = append(errs, tb.block(x, y.IP), tb.block(y, x.IP))
		}
	}
	return errors.Join(errs...)
}

// Isolate cuts h off from every other host.
func (tb *Testbed) Isolate(h *Host) error {
	return tb.Partition([]*Host{h}, tb.Hosts())
}

// CutFromServers cuts h off from the server hosts only (their Consul and
// Nomad servers); it still reaches the other client hosts.
func (tb *Testbed) CutFromServers(h *Host) error {
	return tb.Partition([]*Host{h}, tb.Servers)
}

// Mute makes h drop everything it sends to the other hosts (blackhole
// routes in h's namespace only): what they send still reaches h, but
// nothing of h's gets out, not even an acknowledgement; a one-way fault.
// Heal undoes it.
func (tb *Testbed) Mute(h *Host) error {
	var errs []error
	for _, y := range tb.Hosts() {
		if y != h {
			errs = append(errs, tb.block(h, y.IP))
		}
	}
	return errors.Join(errs...)
}

// Unplug takes h's link down (its veth on the bridge side), as a pulled
// cable: h reaches no other host and this process no longer reaches h,
// while everything on h runs on. Heal plugs it back in.
func (tb *Testbed) Unplug(h *Host) error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if err := ipCmd("link", "set", h.NS, "down"); err != nil {
		return fmt.Errorf("unplug host %s: %w", h.Name, err)
	}
	tb.unplugged[h.Name] = true
	return nil
}

// Heal removes every blackhole route the testbed added and plugs every
// unplugged host back in.
func (tb *Testbed) Heal() error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var errs []error
	for _, h := range tb.Hosts() {
		if !tb.unplugged[h.Name] {
			continue
		}
		if err := ipCmd("link", "set", h.NS, "up"); err != nil {
			errs = append(errs, fmt.Errorf("plug host %s in: %w", h.Name, err))
			continue
		}
		delete(tb.unplugged, h.Name)
	}
	for _, h := range tb.Hosts() {
		for ip := range tb.blocked[h.Name] {
			if err := ipCmd("-n", h.NS, "route", "del", "blackhole", ip+"/32"); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(tb.blocked[h.Name], ip)
		}
	}
	return errors.Join(errs...)
}

// Blocked lists the blocked directions as "from->to" host names and the
// unplugged hosts as "name unplugged", sorted.
func (tb *Testbed) Blocked() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []string
	for name := range tb.unplugged {
		out = append(out, name+" unplugged")
	}
	for from, ips := range tb.blocked {
		for ip := range ips {
			to := ip
			if h := tb.HostOf(ip); h != nil {
				to = h.Name
			}
			out = append(out, from+"->"+to)
		}
	}
	sort.Strings(out)
	return out
}

// block makes h drop what it sends to ip (idempotent).
func (tb *Testbed) block(h *Host, ip string) error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.blocked[h.Name][ip] {
		return nil
	}
	if err := ipCmd("-n", h.NS, "route", "add", "blackhole", ip+"/32"); err != nil {
		return err
	}
	if tb.blocked[h.Name] == nil {
		tb.blocked[h.Name] = map[string]bool{}
	}
	tb.blocked[h.Name][ip] = true
	return nil
}

// Crash kills every process of host h at once (SIGKILL to everything in
// its namespace: agents, executors, members), as a power loss would; its
// disk stays as it was. Nomad's mounts under its alloc dir are undone (a
// rebooted machine has none).
func (tb *Testbed) Crash(h *Host) error {
	if _, err := killNetns(h.NS, 10*time.Second); err != nil {
		return fmt.Errorf("crash host %s: %w", h.Name, err)
	}
	for _, a := range []*Agent{h.Consul, h.Nomad} {
		<-a.done
	}
	unmountUnder(h.Dir)
	return nil
}

// Restart boots crashed host h again: its agents start with their data, or,
// without keepData, on an empty disk (Consul and Nomad state and every
// allocation's data gone; the Nomad client registers as a new node). It
// waits until the testbed is ready again or ctx ends.
func (tb *Testbed) Restart(ctx context.Context, h *Host, keepData bool) error {
	if !h.Consul.exited() || !h.Nomad.exited() {
		return fmt.Errorf("restart host %s: it is running (Crash it first)", h.Name)
	}
	if !keepData {
		for _, d := range []string{filepath.Join(h.Dir, "consul", "data"), filepath.Join(h.Dir, "nomad", "data"), h.AllocDir} {
			if err := os.RemoveAll(d); err != nil {
				return fmt.Errorf("wipe host %s: %w", h.Name, err)
			}
		}
		if err := os.MkdirAll(h.AllocDir, 0o700); err != nil {
			return err
		}
	}
	if err := h.spawnAgents(os.O_APPEND); err != nil {
		return err
	}
	return tb.WaitReady(ctx)
}

// Running reports whether both of h's agents run.
func (h *Host) Running() bool { return !h.Consul.exited() && !h.Nomad.exited() }

// PIDs lists the processes running on h (in its namespace).
func (h *Host) PIDs() ([]int, error) { return pidsInNetns(h.NS) }

// DialContext opens a connection from h, as its processes would: a test's
// client "on" a host sees that host's partitions. addr must be an IP
// address and port.
func (h *Host) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialIn(ctx, h.NS, network, addr)
}

// Start starts cmd on h (in its namespace).
func (h *Host) Start(cmd *exec.Cmd) error { return startIn(h.NS, cmd) }

// Run runs a command on h and returns its combined output.
func (h *Host) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer // one writer for both: exec copies with one goroutine
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := h.Start(cmd); err != nil {
		return nil, err
	}
	err := cmd.Wait()
	return out.Bytes(), err
}

// StopAgent stops one agent of a host (SIGTERM, SIGKILL after 10 s), the
// rest of the host running on: a Nomad client's tasks keep running, a
// server leaves its Raft cluster's quorum.
func (tb *Testbed) StopAgent(a *Agent) error {
	for _, h := range tb.Hosts() {
		if a == h.Consul || a == h.Nomad {
			return a.stop(10 * time.Second)
		}
	}
	return fmt.Errorf("%s at %s is not an agent of testbed %s", a.Name, a.Addr, tb.Name)
}

// StartAgents starts agents StopAgent stopped, with their data, and waits
// until the testbed is ready again or ctx ends.
func (tb *Testbed) StartAgents(ctx context.Context, agents ...*Agent) error {
	for _, a := range agents {
		if !a.exited() {
			return fmt.Errorf("%s at %s is running", a.Name, a.Addr)
		}
		if err := a.spawn(os.O_APPEND); err != nil {
			return err
		}
	}
	return tb.WaitReady(ctx)
}

// NomadLeader returns the server host whose Nomad server leads.
func (tb *Testbed) NomadLeader(ctx context.Context) (*Host, error) {
	var errs []error
	for _, s := range tb.Servers {
		var leader string
		if err := getJSON(ctx, s.Nomad.Addr+"/v1/status/leader", &leader); err != nil {
			errs = append(errs, err)
			continue
		}
		host, _, err := net.SplitHostPort(leader)
		if h := tb.HostOf(host); err == nil && h != nil {
			return h, nil
		}
		errs = append(errs, fmt.Errorf("nomad leader %q is no host of the testbed", leader))
	}
	return nil, fmt.Errorf("no nomad leader: %w", errors.Join(errs...))
}
