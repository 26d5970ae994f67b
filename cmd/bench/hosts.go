package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/nomad"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/bench"
	"github.com/etcd-nomad/etcd-nomad/internal/clusterdef"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// hostsJob is the job the multi-host figures deploy.
const hostsJob = "hosts-bench"

// hostsDefinition: production defaults (one member per host, the members'
// Consul is their host's agent, stale_after = lost_after, session_ttl
// 10s), the test-sized etcd timing of every other figure.
var hostsDefinition = clusterdef.Definition{Name: hostsJob, Size: 3, Prefix: "etcd-nomad-hosts-bench"}

// idleWindow is how long the idle API calls are counted.
const idleWindow = time.Minute

// hostsBed is the testbed with the job on it.
type hostsBed struct {
	tb       *devagents.Testbed
	cl       *config.Cluster
	nomad    *nomadapi.Client
	consul   *consulapi.Client
	nomadBin string
	kek      []byte
	load     *devagents.Host // ineligible: the clients run here
}

// hostsFigures measures (h) on the multi-host testbed (devagents.StartHosts:
// three server hosts, five client hosts, one of them ineligible where the
// client runs): idle API calls per member, a minority partition, its heal,
// a node drain, a host crash, and three long faults (hosts_long.go) with
// the time from their heal to a whole cluster. Absolute goals, no baseline.
func (e *runEnv) hostsFigures(ctx context.Context) ([]bench.Result, []string, error) {
	results := []bench.Result{
		{ID: "h.idle-api", Name: "idle Nomad/Consul API calls per member per minute, beyond blocking queries and the host's own agents", Unit: "calls", GoalKind: bench.AtMost, Goal: 2},
		{ID: "h.partition", Name: "leader's host partitioned -> majority side accepts a write", Unit: "s", GoalKind: bench.AtMost, Goal: 2},
		{ID: "h.heal", Name: "partition healed -> 3 healthy voters, 3 passing checks", Unit: "s", GoalKind: bench.AtMost, Goal: 10},
		{ID: "h.drain", Name: "`nomad node drain` of a member's host -> replaced elsewhere, healthy", Unit: "s", GoalKind: bench.AtMost, Goal: 20},
		{ID: "h.drain.failed", Name: "client writes failed after one retry during the drain", Unit: "writes", GoalKind: bench.AtMost, Goal: 0},
		{ID: "h.crash", Name: "member's host crashes and reboots with its disk -> 3 healthy voters, 3 passing checks", Unit: "s", GoalKind: bench.AtMost, Goal: 30},
		{ID: "h.isolate-long", Name: "leader's host isolated 150 s (past lost_after), healed -> 3 healthy voters, 3 passing checks", Unit: "s", GoalKind: bench.AtMost, Goal: 30},
		{ID: "h.oneway", Name: "leader's host cannot send for 30 s, healed -> 3 healthy voters, 3 passing checks", Unit: "s", GoalKind: bench.AtMost, Goal: 30},
		{ID: "h.servers-cut", Name: "member's host cut off from the server hosts 100 s, healed -> 3 healthy voters, 3 passing checks", Unit: "s", GoalKind: bench.AtMost, Goal: 30},
	}
	skip := func(why string) ([]bench.Result, []string, error) {
		for i := range results {
			results[i].Skipped = why
		}
		return results, nil, nil
	}
	if os.Geteuid() != 0 {
		return skip("the testbed's network namespaces need root")
	}
	nomadBin, err := devagents.Bin("nomad", devagents.NomadVersion)
	if err != nil {
		return skip(err.Error())
	}
	bin, err := e.etcdNomad(ctx)
	if err != nil {
		return nil, nil, err
	}
	b, err := e.startHostsBed(ctx, bin, nomadBin)
	if b != nil {
		defer b.close(e)
	}
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	if _, err := b.waitHealthy(ctx, 3*time.Minute, nil); err != nil {
		return nil, nil, err
	}
	e.log.Info("hosts: cluster healthy", "took", time.Since(start).Round(10*time.Millisecond))
	cli, err := b.clientOn(ctx, b.load)
	if err != nil {
		return nil, nil, err
	}
	defer cli.Close()
	put := func(key string, timeout time.Duration) error {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		_, err := cli.Put(pctx, key, "v")
		return err
	}
	if err := poll(ctx, time.Minute, "a first write", func() (bool, string) {
		err := put("bench/first", 2*time.Second)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return nil, nil, err
	}

	// (h.idle-api) A minute of an idle, healthy cluster.
	idle, idleNote, err := b.idleCalls(ctx)
	if err != nil {
		return nil, nil, err
	}
	results[0].Value = idle
	e.log.Info("hosts: idle API calls", "per_member_per_minute", idle)

	// (h.partition, h.heal) The etcd leader's host cut off from every
	// other host: the majority elects a leader and takes writes again.
	leader, name, err := b.leaderHost(ctx)
	if err != nil {
		return nil, nil, err
	}
	cut := time.Now()
	if err := b.tb.Isolate(leader); err != nil {
		return nil, nil, err
	}
	if err := poll(ctx, time.Minute, "the majority to accept a write", func() (bool, string) {
		err := put(fmt.Sprintf("bench/majority/%d", time.Now().UnixNano()), time.Second)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return nil, nil, err
	}
	results[1].Value = time.Since(cut).Seconds()
	// The cut-off member notices (its check fails) before the heal, so
	// that the heal figure counts a real recovery.
	if err := poll(ctx, time.Minute, "the isolated member unhealthy", func() (bool, string) {
		st, err := b.members(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range st.Members {
			if m.Name == name {
				return !m.Healthy, status.Format(st)
			}
		}
		return false, status.Format(st)
	}); err != nil {
		return nil, nil, err
	}
	healStart := time.Now()
	if err := b.tb.Heal(); err != nil {
		return nil, nil, err
	}
	if _, err := b.waitHealthy(ctx, 2*time.Minute, nil); err != nil {
		return nil, nil, err
	}
	results[2].Value = time.Since(healStart).Seconds()
	e.log.Info("hosts: partition", "writable", results[1].Value, "healed", results[2].Value, "isolated", name+"@"+leader.Name)

	// (h.drain) The leader's host drained while a client writes.
	drained, name, err := b.leaderHost(ctx)
	if err != nil {
		return nil, nil, err
	}
	node, err := b.tb.NodeID(ctx, drained)
	if err != nil {
		return nil, nil, err
	}
	w := clustertest.StartWriter(cli, "bench/drain")
	start = time.Now()
	if out, err := drained.Run(ctx, nomadBin, "node", "drain", "-enable", "-yes", "-detach", "-address", b.tb.NomadAddr(), node); err != nil {
		w.Finish()
		return nil, nil, fmt.Errorf("nomad node drain: %w\n%s", err, out)
	}
	_, err = b.waitHealthy(ctx, 3*time.Minute, drained)
	took := time.Since(start)
	acked, gap := w.Finish()
	if err != nil {
		return nil, nil, err
	}
	results[3].Value, results[4].Value = took.Seconds(), float64(w.Failed())
	e.log.Info("hosts: drain", "took", took.Round(10*time.Millisecond), "member", name+"@"+drained.Name, "acked", len(acked), "failed", w.Failed(), "longest_gap", gap.Round(time.Millisecond))
	if out, err := drained.Run(ctx, nomadBin, "node", "eligibility", "-enable", "-address", b.tb.NomadAddr(), node); err != nil {
		return nil, nil, fmt.Errorf("nomad node eligibility: %w\n%s", err, out)
	}

	// (h.crash) A member's host (not the leader's) loses power and boots
	// again at once with its disk.
	crashed, err := b.followerHost(ctx)
	if err != nil {
		return nil, nil, err
	}
	start = time.Now()
	if err := b.tb.Crash(crashed); err != nil {
		return nil, nil, err
	}
	if err := b.tb.Restart(ctx, crashed, true); err != nil {
		return nil, nil, err
	}
	booted := time.Since(start)
	hosts, err := b.waitHealthy(ctx, 3*time.Minute, nil)
	if err != nil {
		return nil, nil, err
	}
	results[5].Value = time.Since(start).Seconds()
	back := "replaced on another host"
	for _, h := range hosts {
		if h == crashed {
			back = "back on its host"
		}
	}
	e.log.Info("hosts: crash", "took", time.Since(start).Round(10*time.Millisecond), "agents_ready", booted.Round(10*time.Millisecond), "member", back)

	// (h.isolate-long, h.oneway, h.servers-cut) Long faults, then the
	// time from their heal to a whole cluster.
	var longLines []string
	for i, f := range longFaults {
		if !wantLong(f.id) {
			results[6+i].Skipped = "not in BENCH_HOSTS_LONG"
			continue
		}
		v, line, err := b.longFault(ctx, e, f)
		if err != nil {
			return nil, nil, err
		}
		results[6+i].Value = v
		longLines = append(longLines, line)
	}

	note := fmt.Sprintf("Multi-host (h): the testbed of `devagents.StartHosts` (Linux network namespaces on one bridge): 3 server hosts (Consul and Nomad servers, Raft of 3 each) and 5 client hosts (Consul client agent, Nomad client with raw_exec); the 3 members run on 3 of them (distinct_hosts), a fourth is spare, the fifth is ineligible and runs the etcd client (connections opened in its namespace). Job: `etcd-nomad job render` of production defaults (the members' Consul is their host's agent, stale_after = lost_after, session_ttl 10s) with election_timeout 1s, heartbeat 100ms. "+
		"h.partition: the etcd leader's host is cut off from every other host (blackhole routes both ways); the time until a put (1 s timeout per attempt) from the client host is acknowledged; bounded by etcd's election timeout (1 s) plus the client noticing its leader is gone. "+
		"h.heal: from removing the routes until 3 healthy voters report over /status and Consul shows 3 passing checks (checked every 2 s by Consul); the cut-off member was first seen unhealthy. "+
		"h.drain: `nomad node drain -enable` of the leader's host until 3 healthy voters on 3 hosts, none the drained one, and 3 passing checks; a writer puts keys back to back (2 s timeout, one retry) the whole time, h.drain.failed counts keys that failed twice (%d acknowledged, longest gap %s). "+
		"h.crash: kill -9 of every process in a follower's host (Nomad client, Consul agent, member), and its agents started again at once with their data (agents ready after %s); the member was %s. What bounds it: the host's agents coming back (Consul joining, the Nomad client restoring its allocation), the task's restart.delay (2s), etcd's restart and catch-up, and Consul's check interval (2s). A host that stays down is instead replaced after Nomad marks it down (heartbeat grace) and the member is removed after stale_after (= lost_after): see docs/operations.md 'Production topology'. "+
		"h.isolate-long, h.oneway, h.servers-cut: production defaults (stale_after = lost_after = 2m, the job's disconnect { lost_after = \"2m\", replace = true, reconcile = \"keep_original\" }); the etcd leader's host cut off from every other host for 150 s (Nomad marks the node down after its heartbeat, the allocation unknown, places a replacement on the spare host, and marks the original lost at lost_after), the leader's host dropping everything it sends for 30 s (blackhole routes on its side only), a follower's host cut off from the three server hosts for 100 s (it still reaches the other client hosts); a writer puts keys the whole time; the figure is from removing the routes until 3 healthy voters of the cluster id of before on 3 hosts report over /status, Nomad lists 3 allocations and Consul shows 3 passing checks; every acknowledged key is then read back. %s. "+
		"%s", len(acked), gap.Round(time.Millisecond), booted.Round(100*time.Millisecond), back, strings.Join(longLines, "; "), idleNote)
	return results, []string{note}, nil
}

func (e *runEnv) startHostsBed(ctx context.Context, bin, nomadBin string) (*hostsBed, error) {
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	tb, err := devagents.StartHosts(sctx, devagents.HostsOptions{Servers: 3, Clients: 5, LogRequests: true})
	if err != nil {
		return nil, err
	}
	b := &hostsBed{tb: tb, nomadBin: nomadBin, load: tb.Clients[len(tb.Clients)-1]}
	os.Setenv("NOMAD_ADDR", tb.NomadAddr())
	os.Setenv("CONSUL_HTTP_ADDR", tb.ConsulAddr())
	if b.nomad, err = nomadapi.NewClient(&nomadapi.Config{Address: tb.NomadAddr()}); err != nil {
		return b, err
	}
	if b.consul, err = consulapi.NewClient(&consulapi.Config{Address: tb.ConsulAddr()}); err != nil {
		return b, err
	}
	node, err := tb.NodeID(ctx, b.load)
	if err != nil {
		return b, err
	}
	if out, err := b.load.Run(ctx, nomadBin, "node", "eligibility", "-disable", "-address", tb.NomadAddr(), node); err != nil {
		return b, fmt.Errorf("make the client's host ineligible: %w\n%s", err, out)
	}
	dir := filepath.Join(e.opts.work, "hosts")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return b, err
	}
	def := filepath.Join(dir, "cluster.hcl")
	if err := os.WriteFile(def, []byte(hostsDefinition.HCL()), 0o600); err != nil {
		return b, err
	}
	cl, _, diags := config.LoadFile(def)
	if diags.HasErrors() {
		return b, fmt.Errorf("hosts definition: %s", diags.Error())
	}
	b.cl = cl
	spec, err := exec.CommandContext(ctx, bin, "job", "render", "-binary", bin, def).Output()
	if err != nil {
		return b, fmt.Errorf("job render: %w", err)
	}
	specFile := filepath.Join(dir, "etcd.nomad.hcl")
	if err := os.WriteFile(specFile, spec, 0o600); err != nil {
		return b, err
	}
	kek, err := jobs.EnsureCAKEK(ctx, b.nomad, hostsJob, "")
	if err != nil {
		return b, err
	}
	if b.kek, err = certs.ParseKEK(kek); err != nil {
		return b, err
	}
	if out, err := exec.CommandContext(ctx, nomadBin, "job", "run", "-detach", "-address", tb.NomadAddr(), specFile).CombinedOutput(); err != nil {
		return b, fmt.Errorf("nomad job run: %w\n%s", err, out)
	}
	return b, nil
}

// close stops the job, waits for its members, then tears the testbed down.
func (b *hostsBed) close(e *runEnv) {
	b.keepLogs(e)
	if b.cl != nil {
		_ = exec.Command(b.nomadBin, "job", "stop", "-detach", "-yes", "-address", b.tb.NomadAddr(), hostsJob).Run()
		sctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		if err := nomadglue.WaitStopped(sctx, b.nomad, hostsJob, ""); err != nil {
			e.log.Warn("hosts job did not stop", "error", err)
		}
		cancel()
	}
	if err := b.tb.Close(); err != nil {
		e.log.Warn("testbed close", "error", err)
	}
	if left := devagents.Leftovers(); len(left) > 0 {
		e.log.Warn("left after the testbed's close", "left", left)
	}
}

func (b *hostsBed) members(ctx context.Context) (status.Cluster, error) {
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	bc, err := backends.OpenClient(b.cl)
	if err != nil {
		return status.Cluster{}, err
	}
	return status.Gather(gctx, bc)
}

// hostOf is the testbed host whose address a member's peer URL names.
func (b *hostsBed) hostOf(peerURL string) *devagents.Host {
	u, err := url.Parse(peerURL)
	if err != nil {
		return nil
	}
	return b.tb.HostOf(u.Hostname())
}

// waitHealthy polls until the cluster is 3 healthy voters of one cluster id
// on 3 distinct client hosts, none of them avoid, and Consul shows 3
// passing checks; it returns the member hosts by member name.
func (b *hostsBed) waitHealthy(ctx context.Context, timeout time.Duration, avoid *devagents.Host) (map[string]*devagents.Host, error) {
	var hosts map[string]*devagents.Host
	err := poll(ctx, timeout, "3 healthy voters on 3 distinct hosts and 3 passing Consul checks", func() (bool, string) {
		st, err := b.members(ctx)
		if err != nil {
			return false, err.Error()
		}
		desc := status.Format(st)
		hosts = map[string]*devagents.Host{}
		distinct, ids := map[*devagents.Host]bool{}, map[uint64]bool{}
		for _, m := range st.Members {
			h := b.hostOf(m.PeerURL)
			if h == nil || h.Server || !m.Healthy || m.Learner {
				return false, desc
			}
			hosts[m.Name], distinct[h], ids[m.ClusterID] = h, true, true
		}
		if len(st.Members) != 3 || len(distinct) != 3 || len(ids) != 1 || (avoid != nil && distinct[avoid]) {
			return false, desc
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ch, err := status.ConsulChecks(cctx, b.consul, hostsJob)
		if err != nil || ch.Passing != 3 || ch.Total != 3 {
			return false, fmt.Sprintf("%s\nconsul checks: %+v %v", desc, ch, err)
		}
		return true, ""
	})
	return hosts, err
}

// leaderHost is the etcd leader's host and member name.
func (b *hostsBed) leaderHost(ctx context.Context) (*devagents.Host, string, error) {
	var h *devagents.Host
	var name string
	err := poll(ctx, 30*time.Second, "an etcd leader", func() (bool, string) {
		st, err := b.members(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range st.Members {
			if m.Leader {
				h, name = b.hostOf(m.PeerURL), m.Name
				return h != nil, ""
			}
		}
		return false, status.Format(st)
	})
	return h, name, err
}

// followerHost is the host of a member that does not lead.
func (b *hostsBed) followerHost(ctx context.Context) (*devagents.Host, error) {
	st, err := b.members(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range st.Members {
		if h := b.hostOf(m.PeerURL); !m.Leader && h != nil {
			return h, nil
		}
	}
	return nil, errors.New("no follower's host")
}

// clientOn is an etcd client whose connections are opened on host h.
func (b *hostsBed) clientOn(ctx context.Context, h *devagents.Host) (*clientv3.Client, error) {
	st, err := b.members(ctx)
	if err != nil {
		return nil, err
	}
	co, err := backends.Coordinator(b.cl)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tc, _, err := backends.EtcdTLS(tctx, b.cl, co, b.kek)
	if err != nil {
		return nil, err
	}
	var eps []string
	for _, m := range st.Members {
		eps = append(eps, m.ClientURL)
	}
	return clientv3.New(clientv3.Config{
		Endpoints: eps, TLS: tc, DialTimeout: 3 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return h.DialContext(ctx, "tcp", addr)
		})},
	})
}

// idleCalls counts, over idleWindow of an idle healthy cluster, the HTTP
// requests each member host's Consul agent and Nomad client served (their
// DEBUG logs name every request), less the blocking queries and less what
// the spare host's agents served in the same window (a host without a
// member: the Nomad client's own calls to its Consul agent). It returns
// the mean per member per minute and a note with the breakdown.
func (b *hostsBed) idleCalls(ctx context.Context) (float64, string, error) {
	st, err := b.members(ctx)
	if err != nil {
		return 0, "", err
	}
	var memberHosts []*devagents.Host
	used := map[*devagents.Host]bool{b.load: true}
	for _, m := range st.Members {
		h := b.hostOf(m.PeerURL)
		if h == nil {
			return 0, "", fmt.Errorf("member %s on no host", m.Name)
		}
		memberHosts, used[h] = append(memberHosts, h), true
	}
	var spare *devagents.Host
	for _, h := range b.tb.Clients {
		if !used[h] {
			spare = h
		}
	}
	if spare == nil {
		return 0, "", errors.New("no spare client host")
	}
	all := append([]*devagents.Host{spare}, memberHosts...)
	marks := map[*devagents.Host]devagents.LogMark{}
	for _, h := range all {
		if marks[h], err = h.Mark(); err != nil {
			return 0, "", err
		}
	}
	select { // the measurement window, not a wait for a state
	case <-ctx.Done():
		return 0, "", ctx.Err()
	case <-time.After(idleWindow):
	}
	count := func(h *devagents.Host) (plain map[string]int, blocking int, err error) {
		reqs, err := h.Requests(marks[h])
		if err != nil {
			return nil, 0, err
		}
		plain = map[string]int{}
		for _, r := range reqs {
			if r.Blocking {
				blocking++
				continue
			}
			plain[r.Agent+" "+r.Method+" "+r.Path]++
		}
		return plain, blocking, nil
	}
	background, _, err := count(spare)
	if err != nil {
		return 0, "", err
	}
	per := time.Minute.Seconds() / idleWindow.Seconds()
	total := 0.0
	var lines []string
	for _, h := range memberHosts {
		plain, blocking, err := count(h)
		if err != nil {
			return 0, "", err
		}
		beyond, sync := 0, 0
		var calls, syncs []string
		for k, n := range plain {
			d := n - background[k]
			switch {
			case d <= 0:
			case strings.HasPrefix(k, "consul GET /v1/agent/"):
				// The Nomad client syncing the member's service and
				// checks: no etcd-nomad code calls Consul's agent
				// endpoints (members read KV and sessions only).
				sync += d
				syncs = append(syncs, fmt.Sprintf("%s ×%d", k, d))
			default:
				beyond += d
				calls = append(calls, fmt.Sprintf("%s ×%d", k, d))
			}
		}
		sort.Strings(calls)
		sort.Strings(syncs)
		total += float64(beyond) * per
		lines = append(lines, fmt.Sprintf("host %s: %d beyond the spare host's (%s), %d blocking, %d by the Nomad client's service sync (%s)", h.Name, beyond, strings.Join(calls, ", "), blocking, sync, strings.Join(syncs, ", ")))
	}
	var bg []string
	for k, n := range background {
		bg = append(bg, fmt.Sprintf("%s ×%d", k, n))
	}
	sort.Strings(bg)
	note := fmt.Sprintf("h.idle-api: the HTTP requests each member host's Consul agent and Nomad client served over %s of an idle healthy cluster, counted from their DEBUG logs (every request is logged with its path and query; a query with an index is a blocking query), less those the spare host (%s, no member) served in the same window (the Nomad client's own calls: %s) and those of the member host's Nomad client syncing the member's service (Consul's /v1/agent/ endpoints, which no etcd-nomad code calls); the figure is the mean over the 3 member hosts, per minute. Per host: %s.",
		idleWindow, spare.Name, strings.Join(bg, ", "), strings.Join(lines, "; "))
	return total / float64(len(memberHosts)), note, nil
}
