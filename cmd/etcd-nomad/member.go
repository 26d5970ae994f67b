package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/provider/static"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/task"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
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
	if kek == nil && kekInJobVariable(cl) {
		if kek, err = memberKEK(ctx, cl, parts.Coordinator, log); err != nil {
			c.ui.Error(err.Error())
			return 1
		}
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
	if opts.Snapshots, err = memberSnapshots(cl, parts, kek); err != nil {
		c.ui.Error(err.Error())
		return 1
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

// memberSnapshots is the member's snapshot settings (nil without a
// snapshot block), authenticated with the KEK the member finally holds:
// the environment's, or the job variable's (memberKEK) on the plain
// 'nomad job run' path, where backends.OpenMember, which reads the
// environment alone, derived no MAC key. Without this such members wrote
// every snapshot and delta without a MAC and refused the MAC'd ones.
func memberSnapshots(cl *config.Cluster, parts *backends.Member, kek []byte) (*backup.Snapshots, error) {
	if parts.Store == nil {
		return nil, nil
	}
	enc := parts.Encryption
	if len(kek) > 0 {
		key, err := snapshot.DeriveMACKey(kek, cl.Name)
		if err != nil {
			return nil, err
		}
		enc.MACKey = key
	}
	return &backup.Snapshots{Store: parts.Store, Encryption: enc, Interval: cl.Snapshot.Interval, RetainCount: cl.Snapshot.RetainCount, RetainAge: cl.Snapshot.RetainAge, DeltaEvery: cl.Snapshot.DeltaInterval}, nil
}

// kekInJobVariable: the member runs in a Nomad allocation of a cluster
// whose key encryption key lives in the job's Nomad variable.
func kekInJobVariable(cl *config.Cluster) bool {
	return kekInVariable(cl) && os.Getenv("NOMAD_ALLOC_ID") != ""
}

// kekInVariable: cl's members on Nomad seal the cluster CA in Consul (TLS
// auto), with a key encryption key kept in the job's Nomad variable.
func kekInVariable(cl *config.Cluster) bool {
	return cl.Provider.Kind == config.ProviderNomad && cl.Coordination.Kind == config.CoordConsul && cl.TLS.Mode == config.TLSAuto
}

// kekNote is what validate and job render say up front about that key:
// who creates it, and the one command to run before a plain `nomad job
// run` where the members may not (Nomad ACLs); "" when cl has no such key.
func kekNote(cl *config.Cluster) string {
	if !kekInVariable(cl) {
		return ""
	}
	return fmt.Sprintf("note: the key that seals the cluster CA in Consul lives in Nomad variable %s (key %s); the first member creates it "+
		"when its workload identity may write that variable (Nomad without ACLs). Under Nomad ACLs workload identities may only read it: "+
		"before 'nomad job run', run once\n  %s\n(or deploy with 'etcd-nomad job run', which creates it)",
		jobs.TokenVariable(cl.Nomad.Job), jobs.CAKEKKey, jobs.FirstKEKCommand(cl.Nomad.Job, cl.Nomad.Namespace))
}

// memberKEK takes the key encryption key from the job's Nomad variable
// (jobs.MemberCAKEK) for a member whose environment has none: the job was
// submitted with a plain `nomad job run` before anyone created the key.
func memberKEK(ctx context.Context, cl *config.Cluster, co coord.Coordinator, log hclog.Logger) ([]byte, error) {
	cli, err := nomadglue.Client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sealed := func(ctx context.Context) (bool, error) {
		_, err := co.Load(ctx, clusterca.SealedKey)
		if errors.Is(err, coord.ErrNotStored) {
			return false, nil
		}
		return err == nil, err
	}
	path := jobs.TokenVariable(cl.Nomad.Job)
	text, created, err := jobs.MemberCAKEK(ctx, cli, cl.Nomad.Job, cmp.Or(cl.Nomad.Namespace, os.Getenv("NOMAD_NAMESPACE")), sealed)
	if err != nil {
		return nil, fmt.Errorf("%s is not set and the job's variable gave none: %w", certs.KEKEnv, err)
	}
	if created {
		log.Info("created the cluster CA's key encryption key in the job's Nomad variable (first writer wins)", "variable", path, "key", jobs.CAKEKKey)
	} else {
		log.Info("read the cluster CA's key encryption key from the job's Nomad variable", "variable", path, "key", jobs.CAKEKKey)
	}
	return certs.ParseKEK(text)
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
