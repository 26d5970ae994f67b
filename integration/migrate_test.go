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

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/localmode"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// outsideCluster is a plain etcd cluster, etcd's own server binary built
// by tools/build.sh, started and killed by the test (by PID).
type outsideCluster struct {
	clientURLs []string
	procs      []*exec.Cmd
	exited     []chan struct{} // closed when the process has exited
}

func startOutside(t *testing.T, version string, n int) *outsideCluster {
	t.Helper()
	bin, err := devagents.Bin("etcd", version)
	if err != nil {
		t.Fatal(err)
	}
	ports, err := localmode.AllocatePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	var initial []string
	for i, p := range ports {
		initial = append(initial, fmt.Sprintf("old%d=http://127.0.0.1:%d", i, p.Peer))
	}
	oc := &outsideCluster{}
	dir := t.TempDir()
	for i, p := range ports {
		client := fmt.Sprintf("http://127.0.0.1:%d", p.Client)
		peer := fmt.Sprintf("http://127.0.0.1:%d", p.Peer)
		cmd := exec.Command(bin, "--name", fmt.Sprintf("old%d", i), "--data-dir", filepath.Join(dir, fmt.Sprintf("old%d", i)),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", "outside", "--initial-cluster-state", "new",
			"--heartbeat-interval", "100", "--election-timeout", "1000", "--log-level", "error")
		log, err := os.Create(filepath.Join(dir, fmt.Sprintf("old%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		oc.procs = append(oc.procs, cmd)
		oc.exited = append(oc.exited, exited)
		oc.clientURLs = append(oc.clientURLs, client)
	}
	t.Cleanup(func() {
		for i, c := range oc.procs {
			_ = c.Process.Signal(syscall.SIGKILL)
			<-oc.exited[i]
		}
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("=== %s (last 2000 bytes)\n%s", l, b[max(0, len(b)-2000):])
			}
		}
	})
	return oc
}

// TestMigrateInAPlainEtcdCluster: a running plain etcd cluster (3.5, and
// the embedded 3.6.16) is migrated in with 'etcd-nomad migrate': the
// members join it as learners, are promoted, and remove its members one at
// a time, leaving three etcd-nomad voters with the same cluster id, every
// key, and no client request that failed twice while a writer kept
// writing.
func TestMigrateInAPlainEtcdCluster(t *testing.T) {
	tier.Starts(t, "plain etcd servers and etcd-nomad member processes")
	for _, version := range []string{"v3.5.35", devagents.EtcdctlVersion} {
		t.Run(version, func(t *testing.T) { migrateIn(t, version) })
	}
}

func migrateIn(t *testing.T, version string) {
	oc := startOutside(t, version, 3)
	cli, err := clientv3.New(clientv3.Config{Endpoints: oc.clientURLs, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var clusterID uint64
	waitFor(t, 30*time.Second, "the outside cluster answers", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		if _, err := cli.Put(ctx, "probe", "x"); err != nil {
			return false, err.Error()
		}
		clusterID = resp.Header.ClusterId
		return true, ""
	})
	putKeys(t, cli, "before", 100)

	dir := t.TempDir()
	tc := newCluster(t, dir, 3, 5*time.Second)
	tc.opts.TLSMode = "off"
	if err := tc.lay.WriteConfig(tc.opts, tc.ports); err != nil {
		t.Fatal(err)
	}
	var newURLs []string
	for _, p := range tc.ports {
		newURLs = append(newURLs, fmt.Sprintf("http://127.0.0.1:%d", p.Client))
	}

	// A writer through every client URL, old and new, the whole time.
	wcli, err := clientv3.New(clientv3.Config{Endpoints: append(append([]string{}, oc.clientURLs...), newURLs...), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer wcli.Close()
	w := clustertest.StartWriter(wcli, "live")

	start := time.Now()
	cmd := exec.Command(binary, "migrate", "-config", tc.lay.Config(), "-endpoints", strings.Join(oc.clientURLs, ","), "-timeout", "4m")
	var out clustertest.SyncBuffer // written by the command's copier, read by the test
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	migrated := make(chan error, 1)
	go func() { migrated <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	waitFor(t, 30*time.Second, "the migration recorded", func() (bool, string) {
		return strings.Contains(out.String(), "recorded cluster"), out.String()
	})
	tc.startAll()
	select {
	case err := <-migrated:
		if err != nil {
			st, serr := tc.status()
			var reasons []string
			for _, m := range st.Members {
				reasons = append(reasons, m.Name+": "+m.Reason)
			}
			t.Fatalf("migrate: %v\n%s\nmembers: %s %v\n%s", err, out.String(), status.Format(st), serr, strings.Join(reasons, "\n"))
		}
	case <-time.After(5 * time.Minute):
		st, err := tc.status()
		t.Fatalf("migrate did not finish in 5m:\n%s\nmembers: %s %v", out.String(), status.Format(st), err)
	}
	took := time.Since(start)
	acked, gap := w.Finish()
	t.Logf("migrate output:\n%s", out.String())

	c, err := clientv3.New(clientv3.Config{Endpoints: newURLs, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range resp.Members {
		if m.IsLearner {
			t.Fatalf("a learner is left: %v", resp.Members)
		}
		names = append(names, m.Name)
	}
	if len(names) != 3 || resp.Header.ClusterId != clusterID {
		t.Fatalf("after the migration: members %v of cluster %x, want m0, m1, m2 of the outside cluster %x", names, resp.Header.ClusterId, clusterID)
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "m") {
			t.Fatalf("outside member %s left in %v", n, names)
		}
	}
	checkKeys(t, c, "before", 100)
	clustertest.CheckAcked(t, c, acked)
	w.CheckLeases(t, c)
	retried := w.Retried()
	if f := w.Failed(); f > 0 {
		t.Fatalf("%d writes failed twice during the migration; the attempts that failed: %v", f, retried)
	}
	if rec := tc.record(); rec.ClusterID != clusterID || len(rec.Join) != 0 {
		t.Fatalf("record after the migration: %+v", rec)
	}
	t.Logf("etcd %s migrated in %s: %d writes acknowledged meanwhile, longest gap %s, %d needed their one retry (%v), 0 failed twice", version, took.Round(100*time.Millisecond), len(acked), gap.Round(time.Millisecond), len(retried), retried)
	// The outside members shut themselves down once removed.
	waitFor(t, 30*time.Second, "the removed outside members exit", func() (bool, string) {
		for i, ch := range oc.exited {
			select {
			case <-ch:
			default:
				return false, fmt.Sprintf("old%d still runs", i)
			}
		}
		return true, ""
	})
}
