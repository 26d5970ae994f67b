package chaos

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/internal/clusterdef"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest/nomadjob"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/status"

	nomadapi "github.com/hashicorp/nomad/api"
)

const clusterName = "chaos"

// env is one chaos run's world: a Consul server and a Nomad server+client
// with data dirs (so both can be restarted), or a multi-host testbed, and
// the etcd-nomad job.
type env struct {
	t        *testing.T
	dir      string
	binary   string
	nomadBin string
	// consul and nomad: the single-host run's agents.
	consul *devagents.Agent
	nomad  *devagents.Agent
	// tb: the multi-host run's testbed; clientHost runs the load.
	tb         *devagents.Testbed
	clientHost *devagents.Host
	// The Nomad and Consul HTTP APIs (http://...), and where the Nomad
	// clients keep allocations.
	nomadAddr, consulAddr string
	allocDirs             []string
	cl                    *config.Cluster
	co                    coord.Coordinator
	hc                    *http.Client
	tls                   *tls.Config // towards the members; nil without TLS
	scheme                string
	ca                    []byte // the cluster CA bundle in Consul at the start (tls auto)

	consulCli *consulapi.Client
	// after are the current round's checks, run once it is healthy again.
	after []func() error

	mu      sync.Mutex
	insts   []provider.Instance // last instances read from Nomad
	instsAt time.Time
}

// newEnv starts the agents and the job; tlsMode is the cluster's
// tls { mode }.
func newEnv(t *testing.T, tlsMode string) *env {
	t.Helper()
	e := buildEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	if e.consul, err = devagents.StartConsulServer(ctx, filepath.Join(e.dir, "consul")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.consul.Stop(15 * time.Second); err != nil {
			t.Log(err)
		}
	})
	if e.nomad, err = devagents.StartNomadServer(ctx, filepath.Join(e.dir, "nomad"), e.consul.Addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.nomad.Stop(30 * time.Second); err != nil {
			t.Log(err)
		}
		e.unmountLeftovers()
	})
	e.nomadAddr, e.consulAddr, e.allocDirs = e.nomad.Addr, e.consul.Addr, []string{e.nomad.AllocDir}
	t.Cleanup(e.stopJob)
	// One Nomad client: every member on it, all using its Consul agent.
	e.deploy(tlsMode, "10s", clusterdef.SingleClient(e.consul.Addr))
	return e
}

// buildEnv builds etcd-nomad for a run and finds the nomad binary.
func buildEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	var err error
	if e.binary, err = nomadjob.Build(e.dir); err != nil {
		t.Fatal(err)
	}
	if e.nomadBin, err = devagents.Bin("nomad", devagents.NomadVersion); err != nil {
		t.Fatal(err)
	}
	return e
}

// deploy points the CLI at the agents, renders the job (with the
// provider's stale_after; nomadExtra goes into its nomad block) and runs
// it, and waits for the cluster CA.
func (e *env) deploy(tlsMode, staleAfter, nomadExtra string) {
	t := e.t
	t.Setenv("CONSUL_HTTP_ADDR", strings.TrimPrefix(e.consulAddr, "http://"))
	t.Setenv("NOMAD_ADDR", e.nomadAddr)

	file := filepath.Join(e.dir, "cluster.hcl")
	def := clusterdef.Definition{
		Name: clusterName, Size: 3, TLSMode: tlsMode, StaleAfter: staleAfter,
		Prefix: "etcd-nomad-chaos", SessionTTL: "10s", Nomad: nomadExtra,
	}
	if err := def.Write(file); err != nil {
		t.Fatal(err)
	}
	cl, _, diags := config.LoadFile(file)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	e.cl = cl
	var err error
	if e.co, err = backends.Coordinator(cl); err != nil {
		t.Fatal(err)
	}
	spec := e.job().Render(t, file, "")
	t.Cleanup(e.stopJob)
	kek := e.job().Submit(t, spec)
	// The client certificate is issued once, from the CA the first member
	// creates: the CLI only reads it, and after Consul lost its state the
	// CA is missing until a member stores it again.
	if cl.TLS.Mode == config.TLSAuto {
		clustertest.WaitFor(t, 3*time.Minute, "the cluster CA in Consul", func() (bool, string) {
			e.ca, err = e.storedCA()
			return err == nil && e.ca != nil, fmt.Sprintf("found: %v, error: %v", e.ca != nil, err)
		})
	}
	tctx, tcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer tcancel()
	if e.tls, e.scheme, err = backends.EtcdTLS(tctx, cl, e.co, kek); err != nil {
		t.Fatal(err)
	}
	e.hc = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: e.tls}}
}

func (e *env) nomadClient() *nomadapi.Client { return nomadjob.NomadClient(e.t, e.nomadAddr) }

// job is the run's Nomad job, for the shared kit.
func (e *env) job() nomadjob.Job {
	return nomadjob.Job{Name: clusterName, Binary: e.binary, NomadBin: e.nomadBin, Nomad: e.nomadAddr, API: e.nomadClient(), AllocDirs: e.allocDirs}
}

// stopJob stops the job and waits until no member process runs, so that
// stopping the agents leaves nothing behind; on failure it first prints the
// members' logs.
func (e *env) stopJob() {
	if e.t.Failed() {
		e.dumpLogs()
	}
	j := e.job()
	j.Stop(e.t, 2*time.Minute)
	j.CollectGarbage(e.t)
}

// unmountLeftovers unmounts what Nomad left mounted under the test's
// directory (task secrets dirs) once the agent is stopped.
func (e *env) unmountLeftovers() {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], e.dir+"/") {
			if err := syscall.Unmount(f[1], 0); err != nil {
				e.t.Logf("unmount %s: %v", f[1], err)
			}
		}
	}
}

func (e *env) dumpLogs() { e.job().DumpLogs(e.t, 60) }

// instances reads the member slots from Nomad, at most every 5s (each
// read opens a Nomad client); while Nomad is away it returns the last ones
// read.
func (e *env) instances() []provider.Instance {
	e.mu.Lock()
	fresh := len(e.insts) == 3 && time.Since(e.instsAt) < 5*time.Second
	e.mu.Unlock()
	if fresh {
		e.mu.Lock()
		defer e.mu.Unlock()
		return append([]provider.Instance(nil), e.insts...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	insts, err := backends.Instances(ctx, e.cl)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil {
		e.instsAt = time.Now()
		sort.Slice(insts, func(i, j int) bool { return insts[i].Name < insts[j].Name })
		e.insts = insts
	}
	return append([]provider.Instance(nil), e.insts...)
}

func (e *env) statusBase(in provider.Instance) string {
	return in.StatusURL(e.scheme)
}

func (e *env) memberStatus(in provider.Instance) (status.Member, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return status.Fetch(ctx, e.hc, e.statusBase(in))
}

func (e *env) endpoints() []string {
	var eps []string
	for _, in := range e.instances() {
		eps = append(eps, in.ClientURL(e.scheme))
	}
	return eps
}

func (e *env) client() *clientv3.Client {
	cfg := clientv3.Config{Endpoints: e.endpoints(), TLS: e.tls, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
	if h := e.clientHost; h != nil {
		// The load runs on a host of its own: it sees that host's faults.
		cfg.DialOptions = []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return h.DialContext(ctx, "tcp", addr)
		})}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cli.Close() })
	return cli
}

// followEndpoints keeps cli's endpoints those of the members Nomad lists
// now, as a client that resolves the service (Consul DNS) would: members
// move to new ports and hosts (drains, stopped allocations, lost hosts),
// and after enough rounds none is left at a first endpoint. It returns a
// function that stops following.
func (e *env) followEndpoints(cli *clientv3.Client) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		last := strings.Join(cli.Endpoints(), " ")
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Second):
			}
			if eps := e.endpoints(); len(eps) == 3 && strings.Join(eps, " ") != last {
				cli.SetEndpoints(eps...)
				last = strings.Join(eps, " ")
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// healthy holds when Nomad lists 3 member slots, each member runs as a
// healthy voter of one cluster id, etcd lists 3 voters, the cluster
// record in Consul names that cluster id, and Consul shows 3 passing
// member checks.
func (e *env) healthy(cli *clientv3.Client) (bool, string) {
	var b strings.Builder
	insts := e.instances()
	ok := len(insts) == 3
	fmt.Fprintf(&b, "%d instances\n", len(insts))
	var id uint64
	for _, in := range insts {
		st, err := e.memberStatus(in)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", in.Name, err)
			ok = false
			continue
		}
		fmt.Fprintf(&b, "%s: pid %d running %v healthy %v learner %v cluster %x decision %s (%s)\n", in.Name, st.PID, st.Running, st.Healthy, st.Learner, st.ClusterID, st.Decision, st.Reason)
		if !st.Running || !st.Healthy || st.Learner || st.ClusterID == 0 || (id != 0 && st.ClusterID != id) {
			ok = false
		}
		id = st.ClusterID
	}
	m, err := clustertest.MemberList(cli)
	fmt.Fprintf(&b, "etcd: %d voters %d learners %v\n", m.Voters, m.Learners, err)
	ok = ok && err == nil && m.Voters == 3 && m.Learners == 0
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	rec, err := e.co.Record(ctx)
	fmt.Fprintf(&b, "record: cluster %x epoch %d %v\n", rec.ClusterID, rec.Epoch, err)
	ok = ok && err == nil && rec.ClusterID == id
	if e.ca != nil {
		ca, err := e.storedCA()
		same := err == nil && bytes.Equal(ca, e.ca)
		fmt.Fprintf(&b, "CA in Consul: the cluster's %v (found %v, %v)\n", same, ca != nil, err)
		ok = ok && same
	}
	passing, total, desc := e.checks()
	fmt.Fprintf(&b, "consul: %d/%d passing\n%s", passing, total, desc)
	return ok && passing == 3 && total == 3, b.String()
}

// consulClient is one client (one connection pool) for the run: Consul
// limits connections per client address.
func (e *env) consulClient() *consulapi.Client {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.consulCli == nil {
		e.consulCli = nomadjob.ConsulClient(e.t, e.consulAddr)
	}
	return e.consulCli
}

// storedCA reads the cluster CA certificate from Consul as it is (nil if
// none): it reads Consul directly, for the check after each round. The
// key is sealed (a fresh nonce at every store), so the certificate is
// what is compared.
func (e *env) storedCA() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	kv, _, err := e.consulClient().KV().Get(e.cl.Coordination.Prefix+"/"+clusterName+"/kv/ca-sealed", (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil || kv == nil {
		return nil, err
	}
	return certs.SealedCert(kv.Value)
}

func (e *env) checks() (passing, total int, desc string) {
	return nomadjob.Checks(e.consulClient(), clusterName)
}

// memberPID returns the PID a member reports, after checking that it is
// one of this run's member processes (our binary, `member`).
func (e *env) memberPID(in provider.Instance) (int, error) {
	st, err := e.memberStatus(in)
	if err != nil {
		return 0, err
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.PID))
	if err != nil {
		return 0, fmt.Errorf("member %s pid %d: %w", in.Name, st.PID, err)
	}
	args := strings.Split(string(cmdline), "\x00")
	if len(args) < 2 || args[0] != e.binary || args[1] != "member" {
		return 0, fmt.Errorf("member %s reports pid %d, which runs %q: not this run's member", in.Name, st.PID, args)
	}
	return st.PID, nil
}

// gone holds once pid has exited (reaped, or a zombie).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

func (e *env) kill(pids ...int) {
	e.t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			e.t.Fatalf("kill -9 %d: %v", pid, err)
		}
	}
	clustertest.WaitFor(e.t, 30*time.Second, fmt.Sprintf("pids %v to exit", pids), func() (bool, string) {
		for _, pid := range pids {
			if !gone(pid) {
				return false, fmt.Sprintf("%d still runs", pid)
			}
		}
		return true, ""
	})
}

// memberDir is where a member keeps its data: data_dir (the allocation's
// shared alloc/data) / member name.
func (e *env) memberDir(in provider.Instance) (string, error) {
	var m []string
	for _, d := range e.allocDirs {
		found, err := filepath.Glob(filepath.Join(d, "*", "alloc", "data", in.Name))
		if err != nil {
			return "", err
		}
		m = append(m, found...)
	}
	if len(m) != 1 {
		return "", fmt.Errorf("member %s: %d data dirs found: %v", in.Name, len(m), m)
	}
	return m[0], nil
}

// ctx returns a context for an agent operation.
func agentCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 3*time.Minute)
}
