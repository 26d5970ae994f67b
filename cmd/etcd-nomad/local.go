package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/localmode"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// memberKillTimeout is how long local mode waits for a member it stops
// before it kills it: the member's graceful stop and the margin for its
// exit, as validate asks of Nomad's kill_timeout.
const memberKillTimeout = config.MemberStopTimeout + config.KillTimeoutMargin

type localCommand struct{}

func (c *localCommand) Synopsis() string { return "Run a cluster on this machine without Nomad" }
func (c *localCommand) Help() string {
	return "Usage: etcd-nomad local up|down [options]\n\n  Runs a cluster of member processes on 127.0.0.1."
}
func (c *localCommand) Run([]string) int { return cli.RunResultHelp }

type localUpCommand struct{ ui cli.Ui }

func (c *localUpCommand) Synopsis() string { return "Start a local cluster and supervise it" }
func (c *localUpCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad local up [-size N] [-dir DIR]

  Starts N members as child processes on 127.0.0.1 with free ports, the
  static provider and the local coordinator, waits until every member is
  healthy, prints the endpoints and TLS files, and supervises them: a member
  that dies is restarted. Ctrl-C, SIGTERM or 'etcd-nomad local down -dir DIR'
  stop everything. Data is kept in DIR: a second 'local up' on the same DIR
  restarts the same cluster with its data.

Options:
  -size N    number of members (default 3)
  -dir DIR   working directory (default ./etcd-nomad-local)
  -timeout   how long to wait for a healthy cluster (default 60s)`)
}

func (c *localUpCommand) Run(args []string) int {
	fs := flag.NewFlagSet("local up", flag.ContinueOnError)
	size := fs.Int("size", 3, "")
	dir := fs.String("dir", "etcd-nomad-local", "")
	timeout := fs.Duration("timeout", 60*time.Second, "")
	if err := fs.Parse(args); err != nil {
		c.ui.Error(c.Help())
		return 1
	}
	if *size < 1 || *size > 9 {
		c.ui.Error(fmt.Sprintf("-size must be between 1 and 9, got %d", *size))
		return 1
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	lay := localmode.Layout{Dir: abs}
	if pid := readPID(lay); pid > 0 && syscall.Kill(pid, 0) == nil {
		c.ui.Error(fmt.Sprintf("a local cluster already runs in %s (pid %d); stop it with: etcd-nomad local down -dir %s", abs, pid, *dir))
		return 1
	}
	cl := c.prepare(lay, *size)
	if cl == "" {
		return 1
	}
	bin, err := os.Executable()
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "local", Output: os.Stderr, Level: hclog.Info})
	sup := &localmode.Supervisor{Bin: bin, Layout: lay, Log: log, Restart: true}
	if err := os.WriteFile(lay.PIDFile(), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	defer os.Remove(lay.PIDFile())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	names := memberNames(lay)
	for _, n := range names {
		if err := sup.Start(n); err != nil {
			c.ui.Error(err.Error())
			_ = sup.StopAll(memberKillTimeout)
			return 1
		}
	}
	code := c.waitHealthy(ctx, lay, cl, *timeout)
	if code == 0 {
		c.ui.Output("\nRunning. Ctrl-C or 'etcd-nomad local down -dir " + *dir + "' stops the cluster; a member that dies is restarted.")
		<-ctx.Done()
	}
	c.ui.Output("stopping members...")
	if err := sup.StopAll(memberKillTimeout); err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	c.ui.Output("stopped; data kept in " + lay.DataDir())
	return code
}

// prepare writes the definition on first use and returns the cluster name.
func (c *localUpCommand) prepare(lay localmode.Layout, size int) string {
	if _, err := os.Stat(lay.Config()); err == nil {
		cl := loadConfig(c.ui, lay.Config())
		if cl == nil {
			return ""
		}
		if len(cl.Provider.Static) != size {
			c.ui.Warn(fmt.Sprintf("%s already defines %d members; keeping it (edit it to scale)", lay.Config(), len(cl.Provider.Static)))
		}
		return cl.Name
	}
	ports, err := localmode.AllocatePorts(size)
	if err != nil {
		c.ui.Error(err.Error())
		return ""
	}
	if err := lay.WriteConfig(localmode.Options{Name: "local"}, ports); err != nil {
		c.ui.Error(fmt.Sprintf("write %s: %v", lay.Config(), err))
		return ""
	}
	c.ui.Output("wrote " + lay.Config())
	return "local"
}

func memberNames(lay localmode.Layout) []string {
	cl, _, diags := loadConfigQuiet(lay.Config())
	if diags != nil {
		return nil
	}
	var out []string
	for _, m := range cl.Provider.Static {
		out = append(out, m.Name)
	}
	return out
}

func (c *localUpCommand) waitHealthy(ctx context.Context, lay localmode.Layout, cluster string, timeout time.Duration) int {
	cl := loadConfig(c.ui, lay.Config())
	if cl == nil {
		return 1
	}
	bc, err := backends.OpenClient(cl)
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		st, err := status.Gather(sctx, bc)
		cancel()
		healthy := 0
		for _, m := range st.Members {
			if m.Healthy {
				healthy++
			}
		}
		line := fmt.Sprintf("waiting for members: %d of %d healthy", healthy, len(cl.Provider.Static))
		if err == nil && healthy == len(cl.Provider.Static) {
			break
		}
		if line != last {
			c.ui.Output(line)
			last = line
		}
		if time.Now().After(deadline) {
			c.ui.Error(fmt.Sprintf("cluster not healthy after %s; member logs are in %s", timeout, lay.LogDir()))
			if err == nil {
				c.ui.Error(status.Format(st))
			}
			return 1
		}
		select {
		case <-ctx.Done():
			return 1
		case <-time.After(300 * time.Millisecond):
		}
	}
	files, err := lay.ClientCerts(ctx, cluster)
	if err != nil {
		c.ui.Error(fmt.Sprintf("issue client certificate: %v", err))
		return 1
	}
	var st status.Cluster
	if bc, err := backends.OpenClient(cl); err == nil {
		st, _ = status.Gather(ctx, bc)
	}
	c.ui.Output("\n" + status.Format(st) + "\n")
	var eps []string
	for _, m := range cl.Provider.Static {
		eps = append(eps, fmt.Sprintf("https://127.0.0.1:%d", m.ClientPort))
	}
	c.ui.Output("endpoints: " + strings.Join(eps, ","))
	c.ui.Output(fmt.Sprintf("TLS:       --cacert %s --cert %s --key %s", files.CA, files.Cert, files.Key))
	c.ui.Output(fmt.Sprintf("try:       etcdctl --endpoints %s --cacert %s --cert %s --key %s put hello world", strings.Join(eps, ","), files.CA, files.Cert, files.Key))
	c.ui.Output(fmt.Sprintf("or:        eval $(etcd-nomad env -config %s) && etcdctl member list", lay.Config()))
	c.ui.Output(fmt.Sprintf("status:    etcd-nomad status -dir %s", lay.Dir))
	c.ui.Output(fmt.Sprintf("logs:      %s", lay.LogDir()))
	return 0
}

type localDownCommand struct{ ui cli.Ui }

func (c *localDownCommand) Synopsis() string { return "Stop a local cluster started by 'local up'" }
func (c *localDownCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad local down [-dir DIR]

  Sends SIGTERM to the 'local up' process of DIR and waits until it has
  stopped every member. Data stays in DIR.`)
}

func (c *localDownCommand) Run(args []string) int {
	fs := flag.NewFlagSet("local down", flag.ContinueOnError)
	dir := fs.String("dir", "etcd-nomad-local", "")
	timeout := fs.Duration("timeout", 60*time.Second, "")
	if err := fs.Parse(args); err != nil {
		c.ui.Error(c.Help())
		return 1
	}
	abs, _ := filepath.Abs(*dir)
	lay := localmode.Layout{Dir: abs}
	pid := readPID(lay)
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		c.ui.Output("no local cluster runs in " + abs)
		return 0
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		c.ui.Error(fmt.Sprintf("signal pid %d: %v", pid, err))
		return 1
	}
	deadline := time.Now().Add(*timeout)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			c.ui.Error(fmt.Sprintf("pid %d still runs after %s", pid, *timeout))
			return 1
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.ui.Output("stopped the local cluster in " + abs)
	return 0
}

func readPID(lay localmode.Layout) int {
	b, err := os.ReadFile(lay.PIDFile())
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}
