package integration_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/localmode"
	"github.com/etcd-nomad/etcd-nomad/status"
)

var binary string

// TestMain builds the etcd-nomad binary the tests run as member processes;
// in the short tier (-short) it builds nothing and every test skips.
//
// Parallel tests. Every test's cluster is its own: a directory, a local
// coordinator in it, ports of its own. A test calls t.Parallel when it also
// changes no environment variable (t.Setenv), runs no writer whose every
// put must succeed or whose gaps are measured, and asserts no time bound a
// loaded machine could break (a 10 s wait, scheduled snapshots' spacing, a
// connection count over time). Go runs the parallel tests after every
// serial one has ended, -parallel (GOMAXPROCS) at a time.
// docs/test-timing.md lists which tests are which and why.
func TestMain(m *testing.M) {
	os.Exit(tier.Main(m, run))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "etcd-nomad-bin-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "etcd-nomad")
	out, err := exec.Command("go", "build", "-o", binary, "../cmd/etcd-nomad").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build etcd-nomad: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// testCluster is a local cluster of member processes owned by one test.
type testCluster struct {
	t     *testing.T
	lay   localmode.Layout
	sup   *localmode.Supervisor
	ports []localmode.MemberPorts
	opts  localmode.Options
}

func newCluster(t *testing.T, dir string, size int, stale time.Duration) *testCluster {
	t.Helper()
	ports, err := localmode.AllocatePorts(size)
	if err != nil {
		t.Fatal(err)
	}
	lay := localmode.Layout{Dir: dir}
	tc := &testCluster{t: t, lay: lay, ports: ports, opts: localmode.Options{Name: "test", StaleAfter: stale}}
	if err := lay.WriteConfig(tc.opts, ports); err != nil {
		t.Fatal(err)
	}
	tc.sup = &localmode.Supervisor{Bin: binary, Layout: lay, Restart: true,
		Log: hclog.New(&hclog.LoggerOptions{Name: "supervisor", Output: os.Stderr, Level: hclog.Warn})}
	t.Cleanup(func() {
		if t.Failed() {
			quitForStacks(tc.sup, tc.lay)
		}
		if err := tc.sup.StopAll(20 * time.Second); err != nil {
			t.Errorf("stop members: %v", err)
		}
		if t.Failed() {
			tc.dumpLogs()
		}
	})
	return tc
}

// quitForStacks sends SIGQUIT to every member still running, so that its
// goroutines land in its log (Go prints them and exits) for dumpLogs: a
// member that went silent (CI once saw one log nothing for 60 s, then not
// even its stop) shows where it waits.
func quitForStacks(sup *localmode.Supervisor, lay localmode.Layout) {
	files, _ := filepath.Glob(filepath.Join(lay.LogDir(), "*.log"))
	var quit []int
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".log")
		if pid := sup.PID(name); pid > 0 && sup.Kill(name, syscall.SIGQUIT) == nil {
			quit = append(quit, pid)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range quit {
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// memberStacks is the goroutine dump a SIGQUIT left in log: the
// goroutines with a frame of this module, at most n lines.
func memberStacks(log string, n int) string {
	i := strings.Index(log, "SIGQUIT: quit")
	if i < 0 {
		return ""
	}
	var out []string
	for _, g := range strings.Split(log[i:], "\n\n") {
		if strings.Contains(g, "etcd-nomad/etcd-nomad/") {
			out = append(out, strings.Split(g, "\n")...)
			out = append(out, "")
		}
	}
	if len(out) > n {
		out = append(out[:n], "…")
	}
	return strings.Join(out, "\n")
}

func (tc *testCluster) dumpLogs() {
	files, _ := filepath.Glob(filepath.Join(tc.lay.LogDir(), "*.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		tc.t.Logf("=== %s (etcd-nomad lines, last 60)\n%s", f, clustertest.SupervisorLines(string(b), 60))
		if st := memberStacks(string(b), 300); st != "" {
			tc.t.Logf("=== %s: goroutines with this module's frames at SIGQUIT\n%s", f, st)
		}
	}
}

func (tc *testCluster) startAll() {
	for i := range tc.ports {
		if err := tc.sup.Start(localmode.MemberName(i)); err != nil {
			tc.t.Fatal(err)
		}
	}
}

func (tc *testCluster) config() *config.Cluster {
	cl, _, diags := config.LoadFile(tc.lay.Config())
	if diags.HasErrors() {
		tc.t.Fatal(diags.Error())
	}
	return cl
}

func (tc *testCluster) status() (status.Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bc, err := backends.OpenClient(tc.config())
	if err != nil {
		return status.Cluster{}, err
	}
	return status.Gather(ctx, bc)
}

// waitHealthy waits until every member in the definition is healthy.
func (tc *testCluster) waitHealthy(timeout time.Duration) status.Cluster {
	tc.t.Helper()
	var st status.Cluster
	waitFor(tc.t, timeout, "all members healthy", func() (bool, string) {
		var err error
		st, err = tc.status()
		if err != nil {
			return false, err.Error()
		}
		for _, m := range st.Members {
			if !m.Healthy {
				return false, status.Format(st)
			}
		}
		return len(st.Members) > 0, status.Format(st)
	})
	return st
}

func (tc *testCluster) client() *clientv3.Client {
	tc.t.Helper()
	files, err := tc.lay.ClientCerts(context.Background(), tc.opts.Name)
	if err != nil {
		tc.t.Fatal(err)
	}
	tlsCfg, err := certs.ClientConfig(files)
	if err != nil {
		tc.t.Fatal(err)
	}
	var eps []string
	for _, m := range tc.config().Provider.Static {
		eps = append(eps, fmt.Sprintf("https://127.0.0.1:%d", m.ClientPort))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: tlsCfg, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.t.Cleanup(func() { cli.Close() })
	return cli
}

func (tc *testCluster) record() coord.Record {
	tc.t.Helper()
	co, err := backends.Coordinator(tc.config())
	if err != nil {
		tc.t.Fatal(err)
	}
	r, err := co.Record(context.Background())
	if err != nil {
		tc.t.Fatal(err)
	}
	return r
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	clustertest.WaitFor(t, timeout, what, cond)
}

func putKeys(t *testing.T, cli *clientv3.Client, prefix string, n int) {
	t.Helper()
	clustertest.PutKeys(t, cli, prefix, n)
}

func checkKeys(t *testing.T, cli *clientv3.Client, prefix string, n int) {
	t.Helper()
	if got := clustertest.CountKeys(t, cli, prefix); got != int64(n) {
		t.Fatalf("%s: %d keys, want %d", prefix, got, n)
	}
}

func memberList(cli *clientv3.Client) (voters, learners int, names map[string]uint64, err error) {
	m, err := clustertest.MemberList(cli)
	return m.Voters, m.Learners, m.Names, err
}

func logOf(t *testing.T, lay localmode.Layout, name string) string {
	b, err := os.ReadFile(filepath.Join(lay.LogDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func itoa(n int) string { return fmt.Sprint(n) }

func names2(m map[string]uint64) string { return fmt.Sprint(m) }

func errs(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (tc *testCluster) recorded() (status.Cluster, coord.Record, error) {
	st, err := tc.status()
	if err != nil {
		return st, coord.Record{}, err
	}
	return st, tc.record(), nil
}

// waitConfirmed waits until the record names a confirmed cluster id and
// every member reports it and the record's epoch.
func (tc *testCluster) waitConfirmed(timeout time.Duration) (status.Cluster, coord.Record) {
	tc.t.Helper()
	return clustertest.WaitOnRecord(tc.t, timeout, 0, false, tc.recorded)
}

// waitConfirmedAfter waits until every member is healthy on a confirmed
// record of at least epoch.
func (tc *testCluster) waitConfirmedAfter(epoch uint64, timeout time.Duration) (status.Cluster, coord.Record) {
	tc.t.Helper()
	return clustertest.WaitOnRecord(tc.t, timeout, epoch, true, tc.recorded)
}

// replaceEmpty brings the stopped members m1 and m2 back as their
// replacements would come: the same names at new ports, with empty data
// dirs (the old ones moved out of the way, as a lost host's), and waits
// until every instance answers and none is healthy (m0 alone holds data,
// without a quorum).
func (tc *testCluster) replaceEmpty() {
	t := tc.t
	t.Helper()
	// m0's ports may be free for a moment (a test restarts it just
	// before): fresh ports must not be among them, or the definition
	// names one port twice and is refused.
	used := map[int]bool{}
	for _, p := range tc.ports {
		used[p.Client], used[p.Peer], used[p.Status] = true, true, true
	}
	var fresh []localmode.MemberPorts
	for attempt := 0; ; attempt++ {
		var err error
		if fresh, err = localmode.AllocatePorts(2); err != nil {
			t.Fatal(err)
		}
		clash := false
		for _, p := range fresh {
			clash = clash || used[p.Client] || used[p.Peer] || used[p.Status]
		}
		if !clash {
			break
		}
		if attempt == 20 {
			t.Fatal("no free ports apart from the cluster's own")
		}
	}
	tc.ports = []localmode.MemberPorts{tc.ports[0], fresh[0], fresh[1]}
	if err := tc.lay.WriteConfig(tc.opts, tc.ports); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"m1", "m2"} {
		if err := os.Rename(filepath.Join(tc.lay.DataDir(), n), filepath.Join(t.TempDir(), n)); err != nil {
			t.Fatal(err)
		}
		if err := tc.sup.Start(n); err != nil {
			t.Fatal(err)
		}
	}
}

// waitNoneHealthy waits until every instance answers and none is healthy.
func (tc *testCluster) waitNoneHealthy() {
	tc.t.Helper()
	waitFor(tc.t, 30*time.Second, "every instance answers, none healthy", func() (bool, string) {
		st, err := tc.status()
		if err != nil {
			return false, err.Error()
		}
		for _, m := range st.Members {
			if m.Unreachable || m.Healthy {
				return false, status.Format(st)
			}
		}
		return true, status.Format(st)
	})
}
