package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
)

// TestChaosHosts is chaos on the multi-host testbed (`make chaos-hosts`):
// one server host (three with CHAOS_HOSTS_SERVERS=3), four client hosts for the members (three and a spare),
// and a fifth client host, ineligible for allocations, where the load
// runs. Faults are partitions between hosts, host crashes, node drains and
// agent outages, chosen by the seed; the checks are TestChaos's. It runs
// only when CHAOS_HOSTS is set (the Makefile's target sets it): `make test`
// has its short multi-host run in e2e/hosts.
func TestChaosHosts(t *testing.T) {
	if testing.Short() || os.Getenv("CHAOS_HOSTS") == "" {
		t.Skip("set CHAOS_HOSTS=1 (make chaos-hosts) to run chaos on the multi-host testbed")
	}
	if os.Geteuid() != 0 {
		t.Skip("the testbed's network namespaces need root")
	}
	rounds, seed, rng := chaosRun(t, "chaos-hosts", 5)
	e := buildEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// CHAOS_HOSTS_SERVERS=3: three server hosts (each Raft of three).
	servers := int(envInt(t, "CHAOS_HOSTS_SERVERS", 1))
	tb, err := devagents.StartHosts(ctx, devagents.HostsOptions{Servers: servers, Clients: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Error(err)
		}
		if left := devagents.Leftovers(); len(left) > 0 {
			t.Errorf("left after the testbed's Close: %v", left)
		}
	})
	// Logs are read before the testbed goes (cleanups run last first).
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpLogs()
		}
	})
	e.tb, e.clientHost = tb, tb.Clients[len(tb.Clients)-1]
	e.nomadAddr, e.consulAddr = tb.NomadAddr(), tb.Servers[0].Consul.Addr
	for _, h := range tb.Clients {
		e.allocDirs = append(e.allocDirs, h.AllocDir)
	}
	node, err := tb.NodeID(ctx, e.clientHost)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runOn(ctx, e.clientHost, e.nomadBin, "node", "eligibility", "-disable", "-address", e.nomadAddr, node); err != nil {
		t.Fatalf("make the load's host ineligible: %v\n%s", err, out)
	}
	// Production defaults: stale_after = lost_after, the members' Consul
	// is their host's agent.
	e.deploy("auto", "2m", "")
	fs, once := onlyFaults(t, hostFaults, &loseHost)
	t.Logf("testbed %s: load on host %s; faults: %d kinds", tb.Name, e.clientHost.Name, len(fs))
	runChaos(t, e, rounds, seed, rng, fs, once)
}

// onlyFaults keeps the faults whose names contain one of CHAOS_FAULTS's
// comma-separated words (all of them when it is unset), to replay or try
// some kinds: CHAOS_FAULTS=unplug,two make chaos-hosts ROUNDS=3.
func onlyFaults(t *testing.T, fs []fault, once *fault) ([]fault, *fault) {
	only := os.Getenv("CHAOS_FAULTS")
	if only == "" {
		return fs, once
	}
	match := func(f fault) bool {
		for _, w := range strings.Split(only, ",") {
			if w != "" && strings.Contains(f.name, w) {
				return true
			}
		}
		return false
	}
	var kept []fault
	for _, f := range fs {
		if match(f) {
			kept = append(kept, f)
		}
	}
	if once != nil && !match(*once) {
		once = nil
	}
	if len(kept) == 0 {
		t.Fatalf("CHAOS_FAULTS=%q names no fault", only)
	}
	return kept, once
}

// loseHost runs once per run: a member's host crashes and comes back
// without its data, as a new Nomad node. Nomad cannot know that the old
// node's allocation is gone: it stays unknown, then lost, and the member
// stays in etcd (invariant 10: no proof it stopped) while its replacement
// waits. The operator's documented step ends it: once Nomad marks the
// allocation lost, `nomad system gc`; the member is then removed after
// stale_after and the replacement joins.
var loseHost = fault{"crash a member's host, restart it without its data", func(e *env, rng *rand.Rand) string {
	h, _, names := pickHosts(e, rng, 1)
	ctx, cancel := hostCtx()
	defer cancel()
	old, err := e.tb.NodeID(ctx, h[0])
	must(e, err)
	must(e, e.tb.Crash(h[0]))
	must(e, e.tb.Restart(ctx, h[0], false))
	start := time.Now()
	clustertest.WaitFor(e.t, 5*time.Minute, "the lost host's allocation marked lost", func() (bool, string) {
		allocs, _, err := e.nomadClient().Nodes().Allocations(old, nil)
		if err != nil {
			return false, err.Error()
		}
		for _, a := range allocs {
			if a.JobID == clusterName && a.ClientStatus != "lost" && !a.ClientTerminalStatus() {
				return false, fmt.Sprintf("allocation %s is %s", a.ID[:8], a.ClientStatus)
			}
		}
		return true, ""
	})
	lost := time.Since(start)
	if out, err := runOn(ctx, e.clientHost, e.nomadBin, "system", "gc", "-address", e.nomadAddr); err != nil {
		e.t.Fatalf("nomad system gc: %v\n%s", err, out)
	}
	return fmt.Sprintf("%s; its allocation lost after %s, then nomad system gc", names[0], lost.Round(time.Millisecond))
}}

func runOn(ctx context.Context, h *devagents.Host, name string, args ...string) ([]byte, error) {
	return h.Run(ctx, name, args...)
}

// pickHosts returns the hosts of n members chosen by rng, and the others'.
func pickHosts(e *env, rng *rand.Rand, n int) (picked, rest []*devagents.Host, names []string) {
	for i, in := range pick(e, rng, len(e.instances())) {
		h := e.tb.HostOf(in.Address)
		if h == nil {
			e.t.Fatalf("member %s at %s is on no host of the testbed", in.Name, in.Address)
		}
		if i < n {
			picked, names = append(picked, h), append(names, in.Name+"@"+h.Name)
		} else {
			rest = append(rest, h)
		}
	}
	return picked, rest, names
}

// leaderHost returns the etcd leader's host and member name.
func leaderHost(e *env) (*devagents.Host, string) {
	var h *devagents.Host
	var name string
	clustertest.WaitFor(e.t, time.Minute, "an etcd leader", func() (bool, string) {
		for _, in := range e.instances() {
			st, err := e.memberStatus(in)
			if err == nil && st.Leader {
				h, name = e.tb.HostOf(in.Address), in.Name
				return h != nil, ""
			}
		}
		return false, "no member reports leading"
	})
	return h, name
}

// hold keeps a fault in place for a time chosen by the seed (the fault's
// length, not a wait for a state).
func hold(rng *rand.Rand, min, max time.Duration) time.Duration {
	d := min + time.Duration(rng.Int63n(int64(max-min)))
	time.Sleep(d)
	return d
}

func must(e *env, err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func hostCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 3*time.Minute)
}

// hostFaults are the faults of a round: each of netFaults and procFaults,
// unplugging a host, host crashes and drains, and two at once.
var hostFaults = append(append(append([]fault{}, netFaults...), procFaults...), unplug,
	fault{"crash a member's host, restart it with its data", func(e *env, rng *rand.Rand) string {
		h, _, names := pickHosts(e, rng, 1)
		must(e, e.tb.Crash(h[0]))
		d := hold(rng, time.Second, 10*time.Second)
		ctx, cancel := hostCtx()
		defer cancel()
		must(e, e.tb.Restart(ctx, h[0], true))
		return fmt.Sprintf("%s, down %s", names[0], d.Round(time.Millisecond))
	}},
	fault{"drain a member's host", func(e *env, rng *rand.Rand) string {
		h, _, names := pickHosts(e, rng, 1)
		ctx, cancel := hostCtx()
		defer cancel()
		node, err := e.tb.NodeID(ctx, h[0])
		must(e, err)
		start := time.Now()
		if out, err := runOn(ctx, h[0], e.nomadBin, "node", "drain", "-enable", "-yes", "-deadline", "2m", "-address", e.nomadAddr, node); err != nil {
			e.t.Fatalf("nomad node drain: %v\n%s", err, out)
		}
		took := time.Since(start)
		if out, err := runOn(ctx, h[0], e.nomadBin, "node", "eligibility", "-enable", "-address", e.nomadAddr, node); err != nil {
			e.t.Fatalf("nomad node eligibility: %v\n%s", err, out)
		}
		return fmt.Sprintf("%s, drained in %s", names[0], took.Round(time.Millisecond))
	}},
	overlap,
)

// overlap applies a network fault and, while it holds, a process or agent
// fault: the second starts up to 3 s after the first (chosen by the seed),
// so it may hit the member the first cut off, or another one (then two of
// three are away for a while: no quorum until one comes back).
var overlap = fault{"two faults at once", func(e *env, rng *rand.Rand) string {
	first, second := netFaults[rng.Intn(len(netFaults))], procFaults[rng.Intn(len(procFaults))]
	firstRng := rand.New(rand.NewSource(rng.Int63()))
	lag := time.Duration(rng.Int63n(int64(3 * time.Second)))
	var firstWhat string
	done := make(chan struct{})
	go func() {
		// A t.Fatal in the fault ends this goroutine only: the test's
		// goroutine fails the test below.
		defer close(done)
		firstWhat = first.apply(e, firstRng)
	}()
	time.Sleep(lag) // the second fault's offset, chosen by the seed
	secondWhat := second.apply(e, rng)
	<-done
	if e.t.Failed() {
		e.t.FailNow()
	}
	return fmt.Sprintf("%s (%s), and %s later %s (%s)", first.name, firstWhat, lag.Round(time.Millisecond), second.name, secondWhat)
}}

// netFaults cut hosts off from each other for a while (blackhole routes:
// the test still reaches every host).
var netFaults = []fault{
	{"partition a member's host from every other host", func(e *env, rng *rand.Rand) string {
		h, _, names := pickHosts(e, rng, 1)
		must(e, e.tb.Isolate(h[0]))
		d := hold(rng, 2*time.Second, 15*time.Second)
		must(e, e.tb.Heal())
		return fmt.Sprintf("%s for %s", names[0], d.Round(time.Millisecond))
	}},
	{"isolate the etcd leader's host", func(e *env, rng *rand.Rand) string {
		h, name := leaderHost(e)
		must(e, e.tb.Isolate(h))
		d := hold(rng, 2*time.Second, 15*time.Second)
		must(e, e.tb.Heal())
		return fmt.Sprintf("%s@%s for %s", name, h.Name, d.Round(time.Millisecond))
	}},
	{"cut a member's host off from the server hosts", func(e *env, rng *rand.Rand) string {
		// Up to 40 s: past Nomad's heartbeat, the allocation turns
		// unknown and a replacement starts on the spare host.
		h, _, names := pickHosts(e, rng, 1)
		must(e, e.tb.CutFromServers(h[0]))
		d := hold(rng, 5*time.Second, 40*time.Second)
		must(e, e.tb.Heal())
		return fmt.Sprintf("%s for %s", names[0], d.Round(time.Millisecond))
	}},
	{"split 2 | 1 | clients", func(e *env, rng *rand.Rand) string {
		two, one, names := pickHosts(e, rng, 2)
		clients := []*devagents.Host{e.clientHost}
		// The server hosts join one side, chosen by the seed: every
		// arrangement of who keeps Consul and Nomad.
		sides := [][]*devagents.Host{two, one, clients}
		s := rng.Intn(len(sides))
		sides[s] = append(sides[s], e.tb.Servers...)
		for i := range sides {
			for j := i + 1; j < len(sides); j++ {
				must(e, e.tb.Partition(sides[i], sides[j]))
			}
		}
		d := hold(rng, 2*time.Second, 15*time.Second)
		must(e, e.tb.Heal())
		return fmt.Sprintf("%v | %s | load, servers with side %d, for %s", names, hostList(one), s, d.Round(time.Millisecond))
	}},
}

// unplug takes a member's host off the network altogether, the test's own
// view of it included (it is in no overlap: the second fault could not
// read the member's status).
var unplug = fault{"unplug a member's host (its link down)", func(e *env, rng *rand.Rand) string {
	h, _, names := pickHosts(e, rng, 1)
	must(e, e.tb.Unplug(h[0]))
	d := hold(rng, 2*time.Second, 30*time.Second)
	must(e, e.tb.Heal())
	return fmt.Sprintf("%s for %s", names[0], d.Round(time.Millisecond))
}}

// procFaults stop members, allocations or agents for a while.
var procFaults = []fault{
	{"stop two members' allocations at once", func(e *env, rng *rand.Rand) string {
		allocs, _, err := e.nomadClient().Jobs().Allocations(clusterName, false, nil)
		must(e, err)
		var running []*nomadapi.AllocationListStub
		for _, a := range allocs {
			if a.ClientStatus == "running" && a.DesiredStatus == "run" {
				running = append(running, a)
			}
		}
		sort.Slice(running, func(i, j int) bool { return running[i].Name < running[j].Name })
		if len(running) < 2 {
			e.t.Fatalf("%d running allocations, want at least 2", len(running))
		}
		rng.Shuffle(len(running), func(i, j int) { running[i], running[j] = running[j], running[i] })
		// Both requests go out together: Nomad sees two stops at once.
		errs := make(chan error, 2)
		var what []string
		for _, a := range running[:2] {
			what = append(what, a.ID[:8]+"@"+a.NodeName)
			go func(id string) {
				_, err := e.nomadClient().Allocations().Stop(&nomadapi.Allocation{ID: id}, nil)
				errs <- err
			}(a.ID)
		}
		for range 2 {
			must(e, <-errs)
		}
		// The round's health wait starts once both have stopped (a
		// member's shutdown takes up to kill_timeout).
		start := time.Now()
		for _, a := range running[:2] {
			clustertest.WaitFor(e.t, 2*time.Minute, "stopped allocation "+a.ID[:8]+" terminal", func() (bool, string) {
				info, _, err := e.nomadClient().Allocations().Info(a.ID, nil)
				if err != nil {
					return false, err.Error()
				}
				return info.ClientTerminalStatus(), info.ClientStatus
			})
		}
		return fmt.Sprintf("%s, both stopped after %s", strings.Join(what, ", "), time.Since(start).Round(time.Millisecond))
	}},
	{"restart the Nomad server leader", func(e *env, rng *rand.Rand) string {
		ctx, cancel := hostCtx()
		defer cancel()
		h, err := e.tb.NomadLeader(ctx)
		must(e, err)
		must(e, e.tb.StopAgent(h.Nomad))
		d := hold(rng, time.Second, 10*time.Second)
		must(e, e.tb.StartAgents(ctx, h.Nomad))
		return fmt.Sprintf("on %s, down %s", h.Name, d.Round(time.Millisecond))
	}},
	{"lose the Consul servers' quorum", func(e *env, rng *rand.Rand) string {
		// A majority of the servers, chosen by the seed.
		servers := append([]*devagents.Host(nil), e.tb.Servers...)
		rng.Shuffle(len(servers), func(i, j int) { servers[i], servers[j] = servers[j], servers[i] })
		var stopped []*devagents.Agent
		for _, s := range servers[:len(servers)/2+1] {
			must(e, e.tb.StopAgent(s.Consul))
			stopped = append(stopped, s.Consul)
		}
		d := hold(rng, 2*time.Second, 20*time.Second)
		ctx, cancel := hostCtx()
		defer cancel()
		must(e, e.tb.StartAgents(ctx, stopped...))
		return fmt.Sprintf("%s down %s", hostList(servers[:len(stopped)]), d.Round(time.Millisecond))
	}},
	faults[0], // kill -9 a member
	faults[1], // SIGSTOP a member
}

func hostList(hs []*devagents.Host) string {
	var names []string
	for _, h := range hs {
		names = append(names, h.Name)
	}
	return strings.Join(names, ",")
}
