// Package hosts_test runs a cluster on a multi-host Nomad testbed
// (devagents.StartHosts: hosts are network namespaces on one bridge): one
// member per host, a client on a host of its own, a partition of a
// member's host and a node drain.
package hosts_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/clusterdef"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest/nomadjob"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	"github.com/etcd-nomad/etcd-nomad/status"
)

const clusterName = "hosts"

// bed is the testbed with the cluster's job on it.
type bed struct {
	t     *testing.T
	tb    *devagents.Testbed
	cl    *config.Cluster
	nomad *nomadapi.Client
	cons  *consulapi.Client
	kek   []byte // the members' CA key encryption key (the job's variable)
	// specFile is the rendered job, submitted with nomad job run.
	specFile string
}

// definition: defaults (distinct_hosts on, the members' Consul is their
// host's agent at 127.0.0.1:8500), test-sized resources and etcd timing;
// Nomad is set for the exec driver on host volumes.
func definition(nomadHCL string) clusterdef.Definition {
	return clusterdef.Definition{Name: clusterName, Size: 3, Prefix: "etcd-nomad-hosts", Nomad: nomadHCL}
}

// startBed starts a testbed of one server host and four client hosts (three
// for the members, one spare for a replacement) and runs the job on it.
func startBed(t *testing.T) *bed {
	t.Helper()
	return startBedWith(t, bedOptions{})
}

// bedOptions vary startBed: with volumes, the first three client hosts
// have the host volume "etcd" and the members run with driver "exec" on
// it.
type bedOptions struct {
	volumes bool
}

func startBedWith(t *testing.T, o bedOptions) *bed {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a multi-host Nomad and Consul testbed")
	}
	if os.Geteuid() != 0 {
		t.Skip("the testbed's network namespaces need root")
	}
	dir := t.TempDir()
	binary, err := nomadjob.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	nomadBin, err := devagents.Bin("nomad", devagents.NomadVersion)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	ho := devagents.HostsOptions{Servers: 1, Clients: 4}
	nomadExtra := ""
	if o.volumes {
		// exec runs the member as nobody: the binary's directory (and
		// its parent, t.TempDir's) must let it through.
		for _, d := range []string{dir, filepath.Dir(dir)} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		ho.Volumes, ho.ExecDirs = 3, []string{dir}
		nomadExtra = "driver      = \"exec\"\n    host_volume = \"etcd\""
	}
	tb, err := devagents.StartHosts(ctx, ho)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("testbed %s ready in %s", tb.Name, time.Since(start).Round(time.Millisecond))
	b := &bed{t: t, tb: tb}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Error(err)
		}
		if left := devagents.Leftovers(); len(left) > 0 {
			t.Errorf("left after the testbed's Close: %v", left)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			b.dumpLogs()
		}
	})
	t.Setenv("NOMAD_ADDR", tb.NomadAddr())
	t.Setenv("CONSUL_HTTP_ADDR", tb.ConsulAddr())
	if b.nomad, err = nomadapi.NewClient(&nomadapi.Config{Address: tb.NomadAddr()}); err != nil {
		t.Fatal(err)
	}
	if b.cons, err = consulapi.NewClient(&consulapi.Config{Address: tb.ConsulAddr()}); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(dir, "cluster.hcl")
	if err := os.WriteFile(file, []byte(definition(nomadExtra).HCL()), 0o600); err != nil {
		t.Fatal(err)
	}
	cl, _, diags := config.LoadFile(file)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	b.cl = cl
	spec, err := exec.Command(binary, "job", "render", "-binary", binary, file).Output()
	if err != nil {
		t.Fatalf("job render: %v", err)
	}
	specFile := filepath.Join(dir, "etcd.nomad.hcl")
	b.specFile = specFile
	if err := os.WriteFile(specFile, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	// What `etcd-nomad job run` does first: the members' CA key
	// encryption key in the job's variable; etcd clients need it too.
	kek, err := jobs.EnsureCAKEK(context.Background(), b.nomad, clusterName, "")
	if err != nil {
		t.Fatal(err)
	}
	if b.kek, err = certs.ParseKEK(kek); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(nomadBin, "job", "run", "-detach", "-address", tb.NomadAddr(), specFile).CombinedOutput(); err != nil {
		t.Fatalf("nomad job run: %v\n%s", err, out)
	}
	return b
}

// members reads the cluster's status: every instance Nomad lists, with the
// host its member advertises.
func (b *bed) members() (status.Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bc, err := backends.OpenClient(b.cl)
	if err != nil {
		return status.Cluster{}, err
	}
	return status.Gather(ctx, bc)
}

// hostOf is the testbed host a member's peer URL names.
func (b *bed) hostOf(m status.Cluster, i int) *devagents.Host {
	u, err := url.Parse(m.Members[i].PeerURL)
	if err != nil {
		return nil
	}
	return b.tb.HostOf(u.Hostname())
}

// waitHealthy waits until the cluster is size healthy voters of one cluster
// id on size distinct client hosts, none of them in avoid, and Consul shows
// size passing checks; it returns the member hosts by name and how long it
// waited.
func (b *bed) waitHealthy(timeout time.Duration, avoid *devagents.Host) (map[string]*devagents.Host, time.Duration) {
	b.t.Helper()
	start := time.Now()
	var hosts map[string]*devagents.Host
	clustertest.WaitFor(b.t, timeout, "3 healthy voters on 3 distinct hosts and 3 passing Consul checks", func() (bool, string) {
		st, err := b.members()
		if err != nil {
			return false, err.Error()
		}
		desc := status.Format(st)
		hosts = map[string]*devagents.Host{}
		ids := map[uint64]bool{}
		for i, m := range st.Members {
			h := b.hostOf(st, i)
			if h == nil || h.Server || !m.Healthy || m.Learner {
				return false, desc
			}
			hosts[m.Name] = h
			ids[m.ClusterID] = true
		}
		distinct := map[*devagents.Host]bool{}
		for _, h := range hosts {
			distinct[h] = true
		}
		if len(st.Members) != 3 || len(distinct) != 3 || len(ids) != 1 || (avoid != nil && distinct[avoid]) {
			return false, desc
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ch, err := status.ConsulChecks(ctx, b.cons, clusterName)
		if err != nil || ch.Passing != 3 || ch.Total != 3 {
			return false, fmt.Sprintf("%s\nconsul checks: %+v %v", desc, ch, err)
		}
		return true, ""
	})
	return hosts, time.Since(start)
}

// clientOn is an etcd client whose connections are opened on host h (in
// its network namespace), so it sees what a process there sees.
func (b *bed) clientOn(h *devagents.Host) *clientv3.Client {
	b.t.Helper()
	st, err := b.members()
	if err != nil {
		b.t.Fatal(err)
	}
	co, err := backends.Coordinator(b.cl)
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tc, _, err := backends.EtcdTLS(ctx, b.cl, co, b.kek)
	if err != nil {
		b.t.Fatal(err)
	}
	var eps []string
	for _, m := range st.Members {
		eps = append(eps, m.ClientURL)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: eps, TLS: tc, DialTimeout: 3 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return h.DialContext(ctx, "tcp", addr)
		})},
	})
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { cli.Close() })
	return cli
}

// spare is a client host that runs no member.
func (b *bed) spare(hosts map[string]*devagents.Host) *devagents.Host {
	used := map[*devagents.Host]bool{}
	for _, h := range hosts {
		used[h] = true
	}
	for _, h := range b.tb.Clients {
		if !used[h] {
			return h
		}
	}
	b.t.Fatal("no client host without a member")
	return nil
}

// leaderHost is the host of the etcd leader.
func (b *bed) leaderHost() (*devagents.Host, string) {
	b.t.Helper()
	var h *devagents.Host
	var name string
	clustertest.WaitFor(b.t, 30*time.Second, "a leader", func() (bool, string) {
		st, err := b.members()
		if err != nil {
			return false, err.Error()
		}
		for i, m := range st.Members {
			if m.Leader {
				h, name = b.hostOf(st, i), m.Name
				return h != nil, ""
			}
		}
		return false, status.Format(st)
	})
	return h, name
}

func (b *bed) dumpLogs() {
	// Why tasks did not start: the last events of each allocation.
	if allocs, _, err := b.nomad.Jobs().Allocations(clusterName, true, nil); err == nil {
		for i, a := range allocs {
			if i >= 6 {
				break
			}
			for task, st := range a.TaskStates {
				var evs []string
				for _, e := range st.Events[max(0, len(st.Events)-4):] {
					evs = append(evs, e.Type+": "+e.DisplayMessage)
				}
				b.t.Logf("allocation %s on %s, task %s %s: %s", a.ID[:8], a.NodeName, task, st.State, strings.Join(evs, " | "))
			}
		}
	}
	for _, h := range b.tb.Clients {
		paths, _ := filepath.Glob(filepath.Join(h.AllocDir, "*", "alloc", "logs", "etcd.stderr.*"))
		for _, p := range paths {
			if data, err := os.ReadFile(p); err == nil {
				b.t.Logf("=== host %s %s\n%s", h.Name, strings.TrimPrefix(p, h.AllocDir), clustertest.SupervisorLines(string(data), 40))
			}
		}
	}
}

// TestOneMemberPerHost: the rendered job (distinct_hosts by default) puts
// the 3 members on 3 client hosts; a client on a fourth host reads and
// writes. Isolating the etcd leader's host leaves a majority that accepts
// writes again within seconds, and all are healthy after the heal. A node
// drain of a member's host (the leader's) moves that member to the spare
// host, and a client writing throughout sees no write fail twice and loses
// none.
func TestOneMemberPerHost(t *testing.T) {
	b := startBed(t)
	hosts, took := b.waitHealthy(3*time.Minute, nil)
	t.Logf("3 members on hosts %s, healthy %s after the job was submitted", hostNames(hosts), took.Round(time.Millisecond))
	spare := b.spare(hosts)
	cli := b.clientOn(spare)
	put := func(key string, timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := cli.Put(ctx, key, "v")
		return err
	}
	if err := put("from-"+spare.Name, 10*time.Second); err != nil {
		t.Fatalf("put from host %s: %v", spare.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	got, err := cli.Get(ctx, "from-"+spare.Name)
	cancel()
	if err != nil || got.Count != 1 {
		t.Fatalf("get from host %s: %v %v", spare.Name, got, err)
	}

	t.Run("partition", func(t *testing.T) {
		b.t = t
		leader, name := b.leaderHost()
		w := clustertest.StartWriter(cli, "partition")
		cut := time.Now()
		if err := b.tb.Isolate(leader); err != nil {
			t.Fatal(err)
		}
		t.Logf("isolated host %s (etcd leader %s)", leader.Name, name)
		var writable time.Duration
		clustertest.WaitFor(t, 30*time.Second, "the majority to accept a write", func() (bool, string) {
			err := put(fmt.Sprintf("majority/%d", time.Now().UnixNano()), time.Second)
			writable = time.Since(cut)
			return err == nil, fmt.Sprint(err)
		})
		t.Logf("majority side accepts writes %s after the leader's host was isolated", writable.Round(time.Millisecond))
		// The cut-off member is out of the quorum: it cannot answer a
		// linearizable read, so its check fails.
		clustertest.WaitFor(t, 30*time.Second, "the isolated member unhealthy", func() (bool, string) {
			st, err := b.members()
			if err != nil {
				return false, err.Error()
			}
			for _, m := range st.Members {
				if m.Name == name {
					return !m.Healthy, status.Format(st)
				}
			}
			return false, status.Format(st)
		})
		if err := b.tb.Heal(); err != nil {
			t.Fatal(err)
		}
		_, healed := b.waitHealthy(2*time.Minute, nil)
		acked, gap := w.Finish()
		t.Logf("healed: all healthy %s later; writer: %d acked, %d failed after a retry, longest gap %s", healed.Round(time.Millisecond), len(acked), w.Failed(), gap.Round(time.Millisecond))
		clustertest.CheckAcked(t, cli, acked)
		w.CheckLeases(t, cli)
	})
	if t.Failed() {
		return
	}

	t.Run("drain", func(t *testing.T) {
		b.t = t
		drained, name := b.leaderHost()
		node, err := b.tb.NodeID(context.Background(), drained)
		if err != nil {
			t.Fatal(err)
		}
		w := clustertest.StartWriter(cli, "drain")
		start := time.Now()
		out, err := drained.Run(context.Background(), mustBin(t), "node", "drain", "-enable", "-yes", "-detach", "-address", b.tb.NomadAddr(), node)
		if err != nil {
			t.Fatalf("nomad node drain: %v\n%s", err, out)
		}
		t.Logf("draining host %s (member %s, the etcd leader)", drained.Name, name)
		hosts, _ := b.waitHealthy(3*time.Minute, drained)
		took := time.Since(start)
		acked, gap := w.Finish()
		t.Logf("drain: replaced and healthy after %s on hosts %s; writer: %d acked, %d failed after a retry, longest gap %s", took.Round(time.Millisecond), hostNames(hosts), len(acked), w.Failed(), gap.Round(time.Millisecond))
		// Nomad copies a sticky disk to the drained allocation's
		// replacement when the old host is up (migrate = true): the
		// member then moves with its data and identity (its persisted
		// name) and updates its peer URL. Without the copy it is
		// removed and a new member joins. Either way it now runs on the
		// spare host (waitHealthy: not on the drained one, one per host).
		if h, ok := hosts[name]; ok {
			t.Logf("member %s moved to host %s with its data (sticky disk migrated)", name, h.Name)
		} else {
			t.Logf("member %s left; a new member joined", name)
		}
		allocs, _, err := b.nomad.Nodes().Allocations(node, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range allocs {
			if a.JobID == clusterName && !a.ServerTerminalStatus() && a.ClientStatus != nomadapi.AllocClientStatusComplete {
				t.Errorf("allocation %s still %s/%s on the drained node", a.ID[:8], a.DesiredStatus, a.ClientStatus)
			}
		}
		m, err := clustertest.MemberList(cli)
		if err != nil || m.Voters != 3 || m.Learners != 0 {
			t.Errorf("member list after the drain: %+v %v", m, err)
		}
		clustertest.CheckAcked(t, cli, acked)
		w.CheckLeases(t, cli)
		if f := w.Failed(); f > 0 {
			t.Errorf("%d writes failed even after a retry during the drain", f)
		}
	})
}

func mustBin(t *testing.T) string {
	p, err := devagents.Bin("nomad", devagents.NomadVersion)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func hostNames(hosts map[string]*devagents.Host) string {
	var out []string
	for m, h := range hosts {
		out = append(out, m+"@"+h.Name)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
