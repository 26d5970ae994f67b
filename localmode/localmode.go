// Package localmode runs a cluster on one machine without Nomad: it writes a
// cluster definition with free loopback ports, the static provider and the
// local coordinator, and supervises one `etcd-nomad member` child process
// per member, restarting a child that dies as Nomad would. It is what
// `etcd-nomad local up` and the integration tests use.
package localmode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord/local"
)

// restartDelay is the pause before a dead member is restarted; Nomad's
// own restart block waits similarly.
const restartDelay = 500 * time.Millisecond

// Layout names the files of a local cluster directory.
type Layout struct{ Dir string }

func (l Layout) Config() string    { return filepath.Join(l.Dir, "cluster.hcl") }
func (l Layout) DataDir() string   { return filepath.Join(l.Dir, "data") }
func (l Layout) CoordDir() string  { return filepath.Join(l.Dir, "coord") }
func (l Layout) LogDir() string    { return filepath.Join(l.Dir, "logs") }
func (l Layout) ClientDir() string { return filepath.Join(l.Dir, "client") }
func (l Layout) PIDFile() string   { return filepath.Join(l.Dir, "local.pid") }

// MemberName is the name of the i-th member.
func MemberName(i int) string { return fmt.Sprintf("m%d", i) }

// MemberPorts are one member's ports.
type MemberPorts struct{ Client, Peer, Status int }

// AllocatePorts returns free ports for n members.
func AllocatePorts(n int) ([]MemberPorts, error) {
	ps, err := FreePorts(3 * n)
	if err != nil {
		return nil, err
	}
	out := make([]MemberPorts, n)
	for i := range out {
		out[i] = MemberPorts{ps[3*i], ps[3*i+1], ps[3*i+2]}
	}
	return out, nil
}

// Options shape the generated cluster definition.
type Options struct {
	Name       string
	TLSMode    string // default auto
	StaleAfter time.Duration
	// SnapshotDir, optional, adds a snapshot block with a file store.
	SnapshotDir string
	// SnapshotInterval, optional, defaults to 30m.
	SnapshotInterval time.Duration
	// RecoveryGrace, optional, turns on automatic quorum-loss recovery.
	RecoveryGrace time.Duration
	// SnapshotPassphraseEnv, optional with SnapshotDir, encrypts the
	// snapshots with the passphrase in this environment variable.
	SnapshotPassphraseEnv string
	// CertificateTTL, optional, sets tls.certificate_ttl (TLS auto).
	CertificateTTL time.Duration
	// DeltaInterval, optional with SnapshotDir, sets the snapshot block's
	// delta_interval ("0s": continuous backup off; "": the default).
	DeltaInterval string
	// ConsulPrefix, optional, coordinates through Consul (the agent the
	// environment names, CONSUL_HTTP_ADDR) under this key prefix instead
	// of the local coordinator in the layout's directory.
	ConsulPrefix string
}

// WriteConfig writes the cluster definition for the given members.
func (l Layout) WriteConfig(o Options, ports []MemberPorts) error {
	if o.Name == "" {
		o.Name = "local"
	}
	if o.TLSMode == "" {
		o.TLSMode = config.TLSAuto
	}
	if o.StaleAfter == 0 {
		o.StaleAfter = 5 * time.Second
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by etcd-nomad local up. Members re-read this file: edit the\n# member list to scale the cluster.\n")
	ttl := ""
	if o.CertificateTTL > 0 {
		ttl = fmt.Sprintf("\n    certificate_ttl = %q", o.CertificateTTL.String())
	}
	fmt.Fprintf(&b, "cluster %q {\n  data_dir = %q\n\n  tls {\n    mode = %q%s\n  }\n\n", o.Name, l.DataDir(), o.TLSMode, ttl)
	if o.RecoveryGrace > 0 {
		fmt.Fprintf(&b, "  recovery_grace = %q\n\n", o.RecoveryGrace.String())
	}
	fmt.Fprintf(&b, "  etcd {\n    heartbeat_interval = \"100ms\"\n    election_timeout   = \"1s\"\n  }\n\n")
	fmt.Fprintf(&b, "  provider \"static\" {\n    stale_after = %q\n", o.StaleAfter.String())
	for i, p := range ports {
		fmt.Fprintf(&b, "    member %q {\n      address     = \"127.0.0.1\"\n      client_port = %d\n      peer_port   = %d\n      status_port = %d\n    }\n", MemberName(i), p.Client, p.Peer, p.Status)
	}
	if o.ConsulPrefix != "" {
		fmt.Fprintf(&b, "  }\n\n  coordination \"consul\" {\n    prefix = %q\n  }\n", o.ConsulPrefix)
	} else {
		fmt.Fprintf(&b, "  }\n\n  coordination \"local\" {\n    dir = %q\n  }\n", l.CoordDir())
	}
	if o.SnapshotDir != "" {
		if o.SnapshotInterval == 0 {
			o.SnapshotInterval = 30 * time.Minute
		}
		fmt.Fprintf(&b, "\n  snapshot {\n    interval     = %q\n    retain_count = 5\n    store \"file\" {\n      path = %q\n    }\n", o.SnapshotInterval.String(), o.SnapshotDir)
		if o.DeltaInterval != "" {
			fmt.Fprintf(&b, "    delta_interval = %q\n", o.DeltaInterval)
		}
		if o.SnapshotPassphraseEnv != "" {
			fmt.Fprintf(&b, "    encryption {\n      passphrase_env = %q\n    }\n", o.SnapshotPassphraseEnv)
		}
		fmt.Fprintf(&b, "  }\n")
	}
	fmt.Fprintf(&b, "}\n")
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return err
	}
	tmp := l.Config() + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, l.Config())
}

// localClientValidity is the validity of the client certificate 'local
// up' writes: a development cluster on 127.0.0.1, used for days.
const localClientValidity = 7 * 24 * time.Hour

// ClientCerts issues a client certificate for etcd's root user from the
// cluster CA into ClientDir, for etcdctl and the CLI.
func (l Layout) ClientCerts(ctx context.Context, cluster string) (certs.Files, error) {
	c, err := local.New(l.CoordDir())
	if err != nil {
		return certs.Files{}, err
	}
	ca, err := clusterca.Read(ctx, c, cluster, nil)
	if err != nil {
		return certs.Files{}, err
	}
	p, err := certs.IssueClient(ca, certs.RootUser, time.Now(), localClientValidity)
	if err != nil {
		return certs.Files{}, err
	}
	return certs.Write(l.ClientDir(), "client", ca.Cert, p)
}

// Supervisor runs member processes.
type Supervisor struct {
	Bin    string
	Layout Layout
	Log    hclog.Logger
	// Restart restarts members that exit without being stopped.
	Restart bool

	mu    sync.Mutex
	procs map[string]*proc
	done  bool
}

type proc struct {
	cmd      *exec.Cmd
	exited   chan struct{}
	stopping bool
	restarts int
}

// Start launches member name.
func (s *Supervisor) Start(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.procs == nil {
		s.procs = map[string]*proc{}
	}
	if p, ok := s.procs[name]; ok && !isClosed(p.exited) {
		return fmt.Errorf("member %s already runs (pid %d)", name, p.cmd.Process.Pid)
	}
	restarts := 0
	if p, ok := s.procs[name]; ok {
		restarts = p.restarts
	}
	return s.startLocked(name, restarts)
}

func (s *Supervisor) startLocked(name string, restarts int) error {
	if err := os.MkdirAll(s.Layout.LogDir(), 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(s.Layout.LogDir(), name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.Bin, "member", "-config", s.Layout.Config(), "-name", name)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start member %s: %w", name, err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{}), restarts: restarts}
	s.procs[name] = p
	if s.Log != nil {
		s.Log.Info("member started", "member", name, "pid", cmd.Process.Pid)
	}
	go func() {
		err := cmd.Wait()
		logf.Close()
		close(p.exited)
		s.mu.Lock()
		defer s.mu.Unlock()
		if p.stopping || s.done || !s.Restart || s.procs[name] != p {
			return
		}
		if s.Log != nil {
			s.Log.Warn("member exited; restarting", "member", name, "error", err, "delay", restartDelay)
		}
		time.AfterFunc(restartDelay, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.done || s.procs[name] != p {
				return
			}
			if err := s.startLocked(name, p.restarts+1); err != nil && s.Log != nil {
				s.Log.Error("restart failed", "member", name, "error", err)
			}
		})
	}()
	return nil
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// PID returns a running member's process id, 0 if none.
func (s *Supervisor) PID(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.procs[name]; ok && !isClosed(p.exited) {
		return p.cmd.Process.Pid
	}
	return 0
}

// Restarts returns how often member name was restarted after dying.
func (s *Supervisor) Restarts(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.procs[name]; ok {
		return p.restarts
	}
	return 0
}

// Kill sends sig to a member's process without marking it stopped: with
// Restart on, the supervisor brings it back.
func (s *Supervisor) Kill(name string, sig syscall.Signal) error {
	s.mu.Lock()
	p, ok := s.procs[name]
	s.mu.Unlock()
	if !ok || isClosed(p.exited) {
		return fmt.Errorf("member %s is not running", name)
	}
	return p.cmd.Process.Signal(sig)
}

// Stop stops member name: SIGTERM, then SIGKILL after timeout.
func (s *Supervisor) Stop(name string, timeout time.Duration) error {
	s.mu.Lock()
	p, ok := s.procs[name]
	if ok {
		p.stopping = true
	}
	s.mu.Unlock()
	if !ok {
		return nil
	}
	if isClosed(p.exited) {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("member %s did not stop within %s: killed", name, timeout)
	}
}

// StopAll stops every member, concurrently, and disables restarts.
func (s *Supervisor) StopAll(timeout time.Duration) error {
	s.mu.Lock()
	s.done = true
	var names []string
	for n := range s.procs {
		names = append(names, n)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, n := range names {
		wg.Add(1)
		go func(i int, n string) {
			defer wg.Done()
			errs[i] = s.Stop(n, timeout)
		}(i, n)
	}
	wg.Wait()
	return errors.Join(errs...)
}
