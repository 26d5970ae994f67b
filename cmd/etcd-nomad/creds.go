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

	"github.com/etcd-nomad/etcd-nomad/coord/consul"
	"github.com/etcd-nomad/etcd-nomad/creds"
)

type credsCommand struct{ ui cli.Ui }

func (c *credsCommand) Synopsis() string {
	return "Keep an application's etcd client certificate fresh (Nomad task)"
}
func (c *credsCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad creds -cluster NAME -dir DIR [-prefix etcd-nomad]
                        [-ca-fingerprint sha256:HEX] [-identity-file FILE] [-once]

  Runs in an application's Nomad job, beside the application: trades the
  task's workload identity for a short-lived etcd client certificate at a
  member's exchange endpoint and writes DIR/ca.crt, DIR/client.crt and
  DIR/client.key (0600, DIR 0700); the key is made here and never sent.
  The certificate's CN is the user whose nomad_jobs in the cluster's access
  block name this job. Without -once it renews at two thirds of the
  validity until stopped (a poststart sidecar); with -once it fetches one
  and exits (a prestart task, so the application starts with its files).

  Members are found in Consul (CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN): the
  cluster's service, and the CA certificate at PREFIX/NAME/ca.crt. Whoever
  may write those could receive the identity: pin the cluster CA with
  -ca-fingerprint (the operator reads it with 'etcd-nomad tls fingerprint').
  With a pin, the identity is sent only to a member whose certificate
  verifies under the pinned CA, or under a new CA the pinned one
  cross-signed during 'tls rotate-ca'; a CA in Consul that is neither is
  refused, naming both fingerprints, before anything is sent. Without
  one, the CA in Consul is trusted as it is, with a warning.

Options:
  -cluster NAME         the cluster (its Consul service's name)
  -dir DIR              where to write; e.g. ${NOMAD_ALLOC_DIR}/etcd, shared
                        by the tasks of the allocation
  -prefix P             coordination "consul" prefix; default etcd-nomad
  -ca-fingerprint FP    the cluster CA's pin, sha256:<hex of the SHA-256 of
                        its DER>; default $ETCD_NOMAD_CA_FINGERPRINT
  -identity-file FILE   the workload identity; default
                        ${NOMAD_SECRETS_DIR}/nomad_etcd.jwt (identity "etcd")
  -once                 fetch one certificate and exit`)
}

func (c *credsCommand) Run(args []string) int {
	fs := flag.NewFlagSet("creds", flag.ContinueOnError)
	cluster := fs.String("cluster", "", "")
	dir := fs.String("dir", "", "")
	prefix := fs.String("prefix", "etcd-nomad", "")
	idFile := fs.String("identity-file", os.ExpandEnv("${NOMAD_SECRETS_DIR}/nomad_etcd.jwt"), "")
	once := fs.Bool("once", false, "")
	pin := fs.String("ca-fingerprint", os.Getenv(creds.FingerprintEnv), "")
	if err := fs.Parse(args); err != nil || *cluster == "" || *dir == "" || fs.NArg() != 0 {
		c.ui.Error(c.Help())
		return 1
	}
	if *pin != "" {
		// A pin given but unreadable fails here, never as no pin.
		fp, err := creds.ParseFingerprint(*pin)
		if err != nil {
			c.ui.Error(err.Error())
			return 1
		}
		*pin = fp
	}
	co, err := consul.EnvClient()
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "etcd-nomad.creds", Output: os.Stderr})
	o := creds.Options{Catalog: creds.ConsulCatalog{Client: co.Client, Prefix: *prefix, Cluster: *cluster}, CAFingerprint: *pin, IdentityFile: *idFile, Dir: *dir, Logger: log}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *once {
		// A prestart task: retried until the members answer, within
		// Nomad's own patience for the task.
		deadline := time.Now().Add(2 * time.Minute)
		for {
			r, err := creds.Fetch(ctx, o)
			if err == nil {
				log.Info("certificate written", "user", r.User, "not_after", r.NotAfter.UTC().Format(time.RFC3339), "dir", *dir)
				return 0
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				c.ui.Error(err.Error())
				return 1
			}
			log.Warn("no certificate yet", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}
	if err := creds.Run(ctx, o); err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	return 0
}
