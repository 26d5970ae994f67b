package integration_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/localmode"
	"github.com/etcd-nomad/etcd-nomad/provider/asg/asgtest"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Members on an auto-scaling group served by a local AWS endpoint, one
// loopback address per instance: bootstrap, a terminating instance that
// leaves and completes its lifecycle hook, a replacement joining, and an
// unhealthy instance replaced only once no other replacement is in flight.
func TestASGProviderLifecycle(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	clustertest.AWSEnv(t, "AKIDTEST", "secret")
	inst := func(id, ip string) asgtest.Instance {
		return asgtest.Instance{ID: id, Lifecycle: "InService", Health: "Healthy", PrivateIP: ip}
	}
	fake, err := asgtest.Start("etcd", 3, inst("i-a", "127.0.0.2"), inst("i-b", "127.0.0.3"), inst("i-c", "127.0.0.4"))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()

	ports, err := localmode.AllocatePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lay := localmode.Layout{Dir: dir}
	def := fmt.Sprintf(`cluster "asgtest" {
  data_dir = %q
  ports {
    client = %d
    peer   = %d
    status = %d
  }
  etcd {
    heartbeat_interval = "100ms"
    election_timeout   = "1s"
  }
  provider "asg" {
    name           = "etcd"
    region         = "local-1"
    endpoint       = %q
    stale_after    = "2s"
    replace_after  = "3s"
    lifecycle_hook = "etcd-drain"
  }
  coordination "local" {
    dir = %q
  }
}
`, lay.DataDir(), ports[0].Client, ports[0].Peer, ports[0].Status, fake.URL, lay.CoordDir())
	if err := os.WriteFile(lay.Config(), []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	sup := &localmode.Supervisor{Bin: binary, Layout: lay, Restart: false, Log: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Warn})}
	t.Cleanup(func() {
		if t.Failed() {
			quitForStacks(sup, lay)
		}
		if err := sup.StopAll(20 * time.Second); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			(&testCluster{t: t, lay: lay}).dumpLogs()
		}
	})
	cl, _, diags := config.LoadFile(lay.Config())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	gather := func() (status.Cluster, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		bc, err := backends.OpenClient(cl)
		if err != nil {
			return status.Cluster{}, err
		}
		return status.Gather(ctx, bc)
	}
	waitHealthy := func(want int) {
		t.Helper()
		waitFor(t, 90*time.Second, fmt.Sprintf("%d healthy members", want), func() (bool, string) {
			st, err := gather()
			if err != nil {
				return false, err.Error()
			}
			n := 0
			for _, m := range st.Members {
				if m.Healthy {
					n++
				}
			}
			return n == want && len(st.Members) == want, status.Format(st)
		})
	}
	for _, id := range []string{"i-a", "i-b", "i-c"} {
		if err := sup.Start(id); err != nil {
			t.Fatal(err)
		}
	}
	waitHealthy(3)

	// A terminating instance leaves the cluster, then completes the hook:
	// when the hook is completed, its member must be gone already.
	cli := asgClient(t, cl)
	memberAtCompletion := make(chan bool, 1)
	fake.OnComplete = func(id string) {
		m, err := clustertest.MemberList(cli)
		_, still := m.Names[id]
		memberAtCompletion <- err != nil || still
	}
	fake.SetLifecycle("i-c", "Terminating:Wait")
	waitFor(t, 60*time.Second, "i-c to leave and complete its lifecycle hook", func() (bool, string) {
		c := fake.Completed()
		return len(c) == 1 && c[0] == "i-c", fmt.Sprintf("completed %v", c)
	})
	if err := sup.Stop("i-c", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if <-memberAtCompletion {
		t.Fatal("i-c completed its lifecycle hook while its member was still in the cluster")
	}

	// The group launches a replacement; it joins as a learner.
	fake.Remove("i-c")
	fake.Add(inst("i-d", "127.0.0.5"))
	if err := sup.Start("i-d"); err != nil {
		t.Fatal(err)
	}
	waitHealthy(3)

	// i-b dies while another instance is still launching: no second
	// replacement is asked for.
	fake.Add(asgtest.Instance{ID: "i-e", Lifecycle: "Pending", Health: "Healthy", PrivateIP: "127.0.0.6"})
	if err := sup.Stop("i-b", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the leader to hold back the replacement of i-b", func() (bool, string) {
		st, _ := gather()
		for _, m := range st.Members {
			if strings.Contains(m.Reason, "replacement is already in flight") {
				return true, ""
			}
		}
		return false, status.Format(st)
	})
	if h := fake.Health("i-b"); h != "Healthy" {
		t.Fatalf("i-b marked %s while another replacement was in flight", h)
	}
	// Once the launch is over, the dead instance is handed back.
	fake.Remove("i-e")
	waitFor(t, 60*time.Second, "i-b marked unhealthy", func() (bool, string) {
		return fake.Health("i-b") == "Unhealthy", fake.Health("i-b")
	})
	if n := fake.Calls("SetInstanceHealth"); n != 1 {
		t.Fatalf("SetInstanceHealth called %d times, want once", n)
	}
}

// asgClient connects to the members the provider lists.
func asgClient(t *testing.T, cl *config.Cluster) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	co, err := backends.Coordinator(cl)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, _, err := backends.EtcdTLS(ctx, cl, co, nil)
	if err != nil {
		t.Fatal(err)
	}
	insts, err := backends.Instances(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var eps []string
	for _, in := range insts {
		eps = append(eps, fmt.Sprintf("https://%s:%d", in.Address, in.ClientPort))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: tlsCfg, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
