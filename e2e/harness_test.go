package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/internal/clusterdef"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest/nomadjob"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/status"
)

var (
	binary   string
	nomadBin string
	consul   *devagents.Agent
	nomad    *devagents.Agent
	workDir  string
	// docker is the kit's own Docker engine, which the Nomad agent's
	// docker driver uses; nil when it could not start (dockerErr says
	// why: the Docker tests skip or fail on it).
	docker    *devagents.Docker
	dockerErr error
)

// TestMain builds etcd-nomad, starts one real Consul and one real Nomad dev
// agent for the package, and stops both by PID at the end; in the short tier
// (-short) it does none of it and every test skips.
//
// Parallel tests. A test calls t.Parallel when it disturbs nothing but its
// own job (a cluster name, Consul prefix and ports of its own), changes no
// environment variable (t.Setenv), neither restarts nor reconfigures the
// shared agents nor changes the node, and asserts no time bound that a
// loaded machine could break (a writer's longest failure window, writes
// that must all succeed across a certificate's renewals). Go runs the
// parallel tests after every serial one has ended, -parallel (GOMAXPROCS)
// at a time, so the serial tests keep the agents to themselves.
// docs/test-timing.md lists which tests are which and why.
func TestMain(m *testing.M) {
	os.Exit(tier.Main(m, run))
}

func run(m *testing.M) (code int) {
	var err error
	workDir, err = os.MkdirTemp("", "etcd-nomad-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(workDir)
	if binary, err = nomadjob.Build(workDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if nomadBin, err = devagents.Bin("nomad", devagents.NomadVersion); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if consul, err = devagents.StartConsul(ctx, filepath.Join(workDir, "consul")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer consul.Stop(15 * time.Second)
	// A Docker engine of the kit's own (own socket, data and exec roots,
	// no iptables, no bridge) for the Docker tests, stopped after Nomad:
	// its containers removed, then dockerd and containerd by PID; what
	// remains fails the run.
	if dockerErr = devagents.DockerAvailable(); dockerErr == nil {
		if docker, dockerErr = devagents.StartDocker(ctx, filepath.Join(workDir, "docker")); dockerErr == nil {
			defer func() {
				if err := docker.Stop(); err != nil {
					fmt.Fprintln(os.Stderr, "stop the Docker engine:", err)
				}
				if left := devagents.DockerLeftovers(); len(left) > 0 {
					fmt.Fprintln(os.Stderr, "left of the Docker engine after its Stop:", left)
					code = 1
				}
			}()
		}
	}
	if nomad, err = devagents.StartNomadWith(ctx, filepath.Join(workDir, "nomad"), consul.Addr, devagents.Options{Docker: docker}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer nomad.Stop(30 * time.Second)
	os.Setenv("CONSUL_HTTP_ADDR", strings.TrimPrefix(consul.Addr, "http://"))
	os.Setenv("NOMAD_ADDR", nomad.Addr)
	return m.Run()
}

// cluster is one etcd-nomad job owned by a test.
type cluster struct {
	t    *testing.T
	name string
	dir  string
	file string
	size int
	// extra is HCL added inside the cluster block (recovery_grace,
	// snapshot, ...).
	extra string
	// quota, when set, is etcd's quota_backend_bytes: a small one keeps
	// the members' sticky disks small when clusters run at once
	// (clusterdef.Definition.Quota).
	quota string
	// kek is the cluster CA's key encryption key the members read from
	// the job's Nomad variable (set by nomadRun): etcd clients need it.
	kek []byte
	// image, when set, runs the members with driver "docker" from this
	// image (writeDefinition and render).
	image string
}

func newCluster(t *testing.T, name string, size int) *cluster {
	t.Helper()
	c := &cluster{t: t, name: name, dir: t.TempDir(), size: size}
	c.file = filepath.Join(c.dir, "cluster.hcl")
	c.writeDefinition(size, "")
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs()
		}
		stopJob(t, name)
	})
	return c
}

func (c *cluster) writeDefinition(size int, extraEnv string) {
	c.t.Helper()
	c.size = size
	n := clusterdef.SingleClient(consul.Addr)
	if c.image != "" {
		n += fmt.Sprintf("\n    driver = \"docker\"\n    image  = %q", c.image)
	}
	def := clusterdef.Definition{
		Name: c.name, Size: size, StaleAfter: "5s", Prefix: "etcd-nomad-e2e", Quota: c.quota,
		Nomad: n, Extra: c.extra, Comment: extraEnv,
	}
	if err := def.Write(c.file); err != nil {
		c.t.Fatal(err)
	}
}

// job is the cluster's Nomad job, for the shared kit.
func (c *cluster) job() nomadjob.Job {
	j := job(c.t, c.name)
	j.Image = c.image
	return j
}

func job(t *testing.T, name string) nomadjob.Job {
	return nomadjob.Job{Name: name, Binary: binary, NomadBin: nomadBin, Nomad: nomad.Addr, API: nomadClient(t), AllocDirs: []string{nomad.AllocDir}}
}

// render runs `etcd-nomad job render`; extra lines go into the task's env.
func (c *cluster) render(envLine string) string {
	c.t.Helper()
	return c.job().Render(c.t, c.file, envLine)
}

// nomadRun submits the rendered job with the real `nomad job run`.
func (c *cluster) nomadRun(envLine string) {
	c.t.Helper()
	c.submit(c.render(envLine))
}

// submit does what `etcd-nomad job run` does first (the members' CA key
// encryption key in the job's variable, also kept in c.kek), then submits
// the job file at path with the real `nomad job run`.
func (c *cluster) submit(path string) {
	c.t.Helper()
	c.kek = c.job().Submit(c.t, path)
}

func (c *cluster) config() *config.Cluster {
	cl, _, diags := config.LoadFile(c.file)
	if diags.HasErrors() {
		c.t.Fatal(diags.Error())
	}
	return cl
}

var (
	clientsOnce  sync.Once
	sharedConsul *consulapi.Client
	sharedNomad  *nomadapi.Client
)

// record reads the cluster record from Consul.
func (c *cluster) record() (coord.Record, error) {
	co, err := backends.Coordinator(c.config())
	if err != nil {
		return coord.Record{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return co.Record(ctx)
}

func (c *cluster) recorded() (status.Cluster, coord.Record, error) {
	st, err := c.status()
	if err != nil {
		return st, coord.Record{}, err
	}
	rec, err := c.record()
	return st, rec, err
}

func consulClient(t *testing.T) *consulapi.Client {
	clientsOnce.Do(func() { initClients(t) })
	return sharedConsul
}

func nomadClient(t *testing.T) *nomadapi.Client {
	clientsOnce.Do(func() { initClients(t) })
	return sharedNomad
}

func initClients(t *testing.T) {
	sharedConsul = newConsulClient(t)
	sharedNomad = newNomadClient(t)
}

func newConsulClient(t *testing.T) *consulapi.Client { return nomadjob.ConsulClient(t, consul.Addr) }

func newNomadClient(t *testing.T) *nomadapi.Client { return nomadjob.NomadClient(t, nomad.Addr) }

// checks returns the passing and total Consul checks of the service.
func (c *cluster) checks() (passing, total int, desc string) {
	return nomadjob.Checks(consulClient(c.t), c.name)
}

// waitPassing waits until exactly want checks exist and all pass.
func (c *cluster) waitPassing(want int, timeout time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	waitFor(c.t, timeout, fmt.Sprintf("%d passing Consul checks", want), func() (bool, string) {
		p, total, desc := c.checks()
		return p == want && total == want, fmt.Sprintf("%d/%d passing\n%s", p, total, desc)
	})
	return time.Since(start)
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	clustertest.WaitFor(t, timeout, what, cond)
}

func (c *cluster) status() (status.Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bc, err := backends.OpenClient(c.config())
	if err != nil {
		return status.Cluster{}, err
	}
	return status.Gather(ctx, bc)
}

func (c *cluster) client() *clientv3.Client {
	c.t.Helper()
	cli, err := clientv3.New(c.clientConfig())
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// clientConfig is the configuration of client(): the members' client URLs
// and the cluster's client TLS.
func (c *cluster) clientConfig() clientv3.Config {
	c.t.Helper()
	cl := c.config()
	co, err := backends.Coordinator(cl)
	if err != nil {
		c.t.Fatal(err)
	}
	tc, _, err := backends.EtcdTLS(context.Background(), cl, co, c.kek)
	if err != nil {
		c.t.Fatal(err)
	}
	st, err := c.status()
	if err != nil {
		c.t.Fatal(err)
	}
	var eps []string
	for _, m := range st.Members {
		if m.ClientURL != "" {
			eps = append(eps, m.ClientURL)
		}
	}
	// The client follows the membership as a long-lived application's
	// does (AutoSyncInterval): a rolling update or a scale-down gives
	// every member a new address, and a client left with the old ones
	// loses its sessions however well the cluster keeps quorum.
	return clientv3.Config{Endpoints: eps, TLS: tc, DialTimeout: 3 * time.Second, AutoSyncInterval: 2 * time.Second, Logger: zap.NewNop()}
}

// allocs lists the job's allocations that Nomad wants running.
func (c *cluster) allocs() []*nomadapi.AllocationListStub { return c.job().Running(c.t) }

// stopJob stops a job, waits until none of its member processes runs, then
// purges it: stopping the agent afterwards leaves no task behind.
func stopJob(t *testing.T, name string) {
	j := job(t, name)
	j.Stop(t, 90*time.Second)
	j.Purge(t)
}

func (c *cluster) dumpLogs() { c.job().DumpLogs(c.t, 40) }

func memberList(cli *clientv3.Client) (voters, learners int, ids map[uint64]string, err error) {
	m, err := clustertest.MemberList(cli)
	return m.Voters, m.Learners, m.IDs, err
}
