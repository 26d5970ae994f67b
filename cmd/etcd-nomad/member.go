package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/provider/static"
	"github.com/etcd-nomad/etcd-nomad/task"
)

type memberCommand struct{ ui cli.Ui }

func (c *memberCommand) Synopsis() string { return "Run one supervised etcd member (in place of etcd)" }
func (c *memberCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad member -config FILE -name NAME

  Runs the etcd member NAME of the cluster defined in FILE: it seeds, rejoins
  with its data, joins as a learner and is promoted, removes stale members,
  and serves /health, /status and /metrics on its status port. SIGTERM or
  SIGINT stop it gracefully (leadership is handed over first).

  With the static provider the file is re-read when it changes, so editing
  the member list scales the cluster.

Options:
  -config FILE      cluster definition (required)
  -name NAME        member name (static provider: required; nomad: derived
                    from NOMAD_GROUP_NAME and NOMAD_ALLOC_ID)
  -log-level LEVEL  trace, debug, info, warn, error (default info)`)
}

func (c *memberCommand) Run(args []string) int {
	fs := flag.NewFlagSet("member", flag.ContinueOnError)
	path := fs.String("config", "", "")
	name := fs.String("name", "", "")
	level := fs.String("log-level", "info", "")
	if err := fs.Parse(args); err != nil || *path == "" {
		c.ui.Error(c.Help())
		return 1
	}
	cl := loadConfig(c.ui, *path)
	if cl == nil {
		return 1
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "etcd-nomad", Level: hclog.LevelFromString(*level), Output: os.Stderr})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cl.DataDir = os.ExpandEnv(cl.DataDir)
	kek, err := clusterca.KEKFromEnv()
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	parts, err := backends.OpenMember(ctx, cl, *name, log)
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	if parts.Static != nil {
		go watchStatic(ctx, log, *path, parts.Static)
	}
	opts := task.Options{Cluster: cl, Name: parts.Name, Coordinator: parts.Coordinator, Provider: parts.Provider, Self: parts.Self,
		Identities: parts.Identities, CAKEK: kek, Logger: log}
	if parts.Reads != nil { // a nil *consul.Watched is not a nil task.Reads
		opts.Reads = parts.Reads
	}
	if cl.Provider.Kind == config.ProviderNomad {
		// The leave must fit in the job's kill_timeout.
		opts.LeaveTimeout = task.LeaveBudget(cl.Nomad.KillTimeout)
	}
	if why := backends.Unauthenticated(cl, kek); why != "" {
		log.Warn(why)
	}
	if parts.Store != nil && !parts.Encryption.Enabled() {
		log.Warn("snapshots are stored unencrypted: the snapshot block has no encryption")
	}
	if parts.Store != nil {
		opts.Snapshots = &task.Snapshots{Store: parts.Store, Encryption: parts.Encryption, Interval: cl.Snapshot.Interval, RetainCount: cl.Snapshot.RetainCount, RetainAge: cl.Snapshot.RetainAge, DeltaEvery: cl.Snapshot.DeltaInterval}
	}
	m, err := task.New(ctx, opts)
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	if err := m.Run(ctx); err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	return 0
}

// watchStatic re-reads the definition when it changes and replaces the
// static member list; an invalid edit is logged and ignored.
func watchStatic(ctx context.Context, log hclog.Logger, path string, p *static.Provider) {
	var last time.Time
	if st, err := os.Stat(path); err == nil {
		last = st.ModTime()
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := os.Stat(path)
		if err != nil || !st.ModTime().After(last) {
			continue
		}
		last = st.ModTime()
		cl, _, diags := config.LoadFile(path)
		if diags.HasErrors() {
			log.Warn("changed cluster definition is invalid; keeping the previous member list", "file", path, "error", diags.Error())
			continue
		}
		p.Set(cl.Provider.Static)
		log.Info("member list reloaded", "file", path, "members", len(cl.Provider.Static))
	}
}
