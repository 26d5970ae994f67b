package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcd-nomad/etcd-nomad/config"
)

// etcdFlags are the settings of one plain member. The defaults are those
// etcd-nomad gives its members (config package), so that both sides of a
// comparison run etcd alike.
type etcdFlags struct {
	Name, Dir, ClientURL, PeerURL, InitialCluster, Token string
	QuotaBytes                                           int64
	Heartbeat, Election                                  time.Duration
	SnapshotCount                                        uint64
	CompactionMode, CompactionRetention                  string
}

func defaultEtcdFlags() etcdFlags {
	return etcdFlags{
		Token:               "bench",
		QuotaBytes:          config.DefaultQuotaBackendBytes,
		Heartbeat:           config.DefaultHeartbeat,
		Election:            config.DefaultElection,
		SnapshotCount:       config.DefaultSnapshotCount,
		CompactionMode:      config.DefaultCompactionMode,
		CompactionRetention: config.DefaultCompactionRetain,
	}
}

func (f etcdFlags) args() []string {
	return []string{"etcd", "-name", f.Name, "-dir", f.Dir, "-client-url", f.ClientURL, "-peer-url", f.PeerURL,
		"-initial-cluster", f.InitialCluster, "-token", f.Token, "-quota-bytes", fmt.Sprint(f.QuotaBytes),
		"-heartbeat", f.Heartbeat.String(), "-election", f.Election.String(), "-snapshot-count", fmt.Sprint(f.SnapshotCount),
		"-compaction-mode", f.CompactionMode, "-compaction-retention", f.CompactionRetention}
}

// runEtcd is the "etcd" helper process: one plain embedded etcd member,
// configured as etcd-nomad configures its own (TLS off), until SIGTERM.
func runEtcd(args []string) error {
	f := defaultEtcdFlags()
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	fs.StringVar(&f.Name, "name", "m0", "")
	fs.StringVar(&f.Dir, "dir", "", "")
	fs.StringVar(&f.ClientURL, "client-url", "", "")
	fs.StringVar(&f.PeerURL, "peer-url", "", "")
	fs.StringVar(&f.InitialCluster, "initial-cluster", "", "")
	fs.StringVar(&f.Token, "token", f.Token, "")
	fs.Int64Var(&f.QuotaBytes, "quota-bytes", f.QuotaBytes, "")
	fs.DurationVar(&f.Heartbeat, "heartbeat", f.Heartbeat, "")
	fs.DurationVar(&f.Election, "election", f.Election, "")
	fs.Uint64Var(&f.SnapshotCount, "snapshot-count", f.SnapshotCount, "")
	fs.StringVar(&f.CompactionMode, "compaction-mode", f.CompactionMode, "")
	fs.StringVar(&f.CompactionRetention, "compaction-retention", f.CompactionRetention, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	client, err := url.Parse(f.ClientURL)
	if err != nil {
		return fmt.Errorf("-client-url: %w", err)
	}
	peer, err := url.Parse(f.PeerURL)
	if err != nil {
		return fmt.Errorf("-peer-url: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = f.Name
	cfg.Dir = f.Dir
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.InitialCluster = f.InitialCluster
	cfg.InitialClusterToken = f.Token
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.QuotaBackendBytes = f.QuotaBytes
	cfg.AutoCompactionMode = f.CompactionMode
	cfg.AutoCompactionRetention = f.CompactionRetention
	cfg.TickMs = uint(f.Heartbeat / time.Millisecond)
	cfg.ElectionMs = uint(f.Election / time.Millisecond)
	cfg.SnapshotCount = f.SnapshotCount
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{"stderr"}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcd: %w", err)
	}
	e.Close()
	return nil
}

// child is a helper process started by this benchmark, stopped by its PID.
type child struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// startChild starts this binary with args, output to logDir/name.log.
func (e *runEnv) startChild(name string, args []string) (*child, error) {
	logDir := filepath.Join(e.opts.work, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(e.self, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		logf.Close()
		close(c.exited)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// stop sends SIGTERM, then SIGKILL after timeout, and waits.
func (c *child) stop(timeout time.Duration) {
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(timeout):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}
