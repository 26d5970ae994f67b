package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/identity"
	"github.com/etcd-nomad/etcd-nomad/provider/asg"
	"github.com/etcd-nomad/etcd-nomad/provider/nomad"
	"github.com/etcd-nomad/etcd-nomad/provider/static"
	"github.com/etcd-nomad/etcd-nomad/snapshot/open"
	"github.com/etcd-nomad/etcd-nomad/status"
	"github.com/etcd-nomad/etcd-nomad/task"
	nomadapi "github.com/hashicorp/nomad/api"
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
	co, err := status.Coordinator(cl)
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	opts := task.Options{Cluster: cl, Name: *name, Coordinator: co, Logger: log}
	if opts.CAKEK, err = clusterca.KEKFromEnv(); err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	if cl.Provider.Kind == config.ProviderNomad {
		// The leave must fit in the job's kill_timeout.
		opts.LeaveTimeout = task.LeaveBudget(cl.Nomad.KillTimeout)
	}
	switch cl.Provider.Kind {
	case config.ProviderStatic:
		if *name == "" {
			c.ui.Error("the static provider needs -name")
			return 1
		}
		prov := static.New(cl.Provider.Static)
		go watchStatic(ctx, log, *path, prov)
		opts.Provider = prov
	case config.ProviderNomad:
		self, alloc, err := nomad.SelfFromEnv()
		if err != nil {
			c.ui.Error(err.Error())
			return 1
		}
		cli, err := nomadapi.NewClient(nomadapi.DefaultConfig())
		if err != nil {
			c.ui.Error(fmt.Sprintf("nomad client: %v", err))
			return 1
		}
		job := firstOf(cl.Provider.Nomad.Job, os.Getenv("NOMAD_JOB_ID"), cl.Nomad.Job)
		group := firstOf(os.Getenv("NOMAD_GROUP_NAME"), cl.Provider.Nomad.Group)
		ns := firstOf(cl.Provider.Nomad.Namespace, os.Getenv("NOMAD_NAMESPACE"))
		prov := nomad.New(nomad.Options{Client: cli, Namespace: ns, Job: job, Group: group, SelfAlloc: alloc, Logger: log.Named("nomad")})
		go prov.Watch(ctx)
		opts.Provider = prov
		// Workloads trade their identity for a client certificate
		// (access block): verified against this Nomad cluster's keys.
		opts.Identities = &identity.Verifier{Keys: identity.NomadJWKS{Client: cli}}
		if a := cl.Provider.Nomad.ASG; a != nil {
			group, err := asg.New(ctx, asg.Options{Group: a.Name, Region: a.Region, Endpoint: a.Endpoint, SelfID: "-", LifecycleHook: a.LifecycleHook})
			if err != nil {
				c.ui.Error(err.Error())
				return 1
			}
			opts.Provider = &asg.OnNomad{Allocs: prov, Group: group, Nodes: &asg.NomadNodes{Client: cli, Attribute: cl.Provider.Nomad.NodeAttribute}}
		}
		opts.Self = &self
		if opts.Name == "" {
			opts.Name = self.Name
		}
	case config.ProviderASG:
		// -name is the instance id; without it, IMDS says.
		prov, err := asg.New(ctx, status.ASGOptions(cl, *name))
		if err != nil {
			c.ui.Error(err.Error())
			return 1
		}
		self, err := prov.Self(ctx)
		if err != nil {
			c.ui.Error(err.Error())
			return 1
		}
		opts.Provider, opts.Self, opts.Name = prov, &self, self.Name
	default:
		c.ui.Error(fmt.Sprintf("provider %q cannot run members in this build", cl.Provider.Kind))
		return 1
	}
	if cl.Snapshot != nil {
		store, err := open.StoreWithLog(ctx, cl, log.Named("snapshots"))
		if err != nil {
			c.ui.Error(err.Error())
			return 1
		}
		enc, err := open.Encryption(cl)
		if err != nil {
			c.ui.Error(err.Error())
			return 1
		}
		opts.Snapshots = &task.Snapshots{Store: store, Encryption: enc, Interval: cl.Snapshot.Interval, RetainCount: cl.Snapshot.RetainCount, RetainAge: cl.Snapshot.RetainAge, DeltaEvery: cl.Snapshot.DeltaInterval}
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

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
