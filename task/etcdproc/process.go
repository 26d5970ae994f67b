package etcdproc

import (
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/server/v3/embed"
)

// Config is what the process takes from the member.
type Config struct {
	Log hclog.Logger
	// BeforeStop, optional, runs when Stop is about to close a running
	// server: the backups cancel a save that streams from it.
	BeforeStop func()
}

// Process is the member's embedded etcd server: Start launches it from
// the configuration the loop builds, Stop closes it, Stopped says when it
// stopped on its own (removed from the cluster, a fatal error).
type Process struct {
	cfg Config

	mu      sync.Mutex
	etcd    *embed.Etcd
	stopped chan struct{} // closed when the running etcd stops on its own
	// startFailures: consecutive failed starts (the loop's only).
	startFailures int
}

// New builds the process. It starts nothing.
func New(cfg Config) *Process { return &Process{cfg: cfg} }

// Start launches etcd with cfg and watches it; it returns the server.
// A failed start is counted (Failures) and a started one resets the count.
func (p *Process) Start(cfg *embed.Config) (*embed.Etcd, error) {
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		p.startFailures++
		return nil, fmt.Errorf("start etcd (failure %d in a row): %w", p.startFailures, err)
	}
	p.startFailures = 0
	stopped := make(chan struct{})
	go func() {
		select {
		case <-e.Server.StopNotify():
		case err := <-e.Err():
			p.cfg.Log.Warn("etcd error", "error", err)
		}
		close(stopped)
	}()
	p.mu.Lock()
	p.etcd = e
	p.stopped = stopped
	p.mu.Unlock()
	return e, nil
}

// Failures is how many starts in a row failed.
func (p *Process) Failures() int { return p.startFailures }

// Server is the running server, nil when none runs.
func (p *Process) Server() *embed.Etcd {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.etcd
}

// Stopped is closed when the running server stops on its own; nil (a
// channel that never fires) when none runs.
func (p *Process) Stopped() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped == nil {
		return nil
	}
	return p.stopped
}

// Take forgets the running server and returns it (nil: none ran): its
// caller closes it, or already did.
func (p *Process) Take() *embed.Etcd {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.etcd
	p.etcd = nil
	p.stopped = nil
	return e
}

// Stop closes the running server, if any (BeforeStop first).
func (p *Process) Stop() {
	e := p.Take()
	if e == nil {
		return
	}
	if p.cfg.BeforeStop != nil {
		p.cfg.BeforeStop()
	}
	select {
	case <-e.Server.ReadyNotify():
	default:
		// embed.Etcd.Close waits for client serving to begin, which only
		// happens once the server is ready: a member restarted without
		// quorum never is, and Close would hang (and with it a recovery).
		// Stopping the server first makes serving give up.
		e.Server.HardStop()
	}
	e.Close()
}
