package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/cli"
	consulapi "github.com/hashicorp/consul/api"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	"github.com/etcd-nomad/etcd-nomad/nomad"
)

type jobCommand struct{}

func (c *jobCommand) Synopsis() string { return "Render or run the Nomad job of a cluster" }
func (c *jobCommand) Help() string {
	return "Usage: etcd-nomad job render|run FILE\n\n  Turns a cluster definition into its Nomad job."
}
func (c *jobCommand) Run([]string) int { return cli.RunResultHelp }

type jobRenderCommand struct {
	ui cli.Ui
	// stdout receives the job (os.Stdout when nil); the ui's error
	// writer, what the operator should know first.
	stdout io.Writer
}

func (c *jobRenderCommand) Synopsis() string { return "Print the Nomad job of a cluster definition" }
func (c *jobRenderCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad job render [-binary PATH | -image REF] FILE > etcd.nomad.hcl

  Prints the Nomad job (HCL2) that runs the cluster defined in FILE, for
  'nomad job validate' and 'nomad job run'. Nothing of this shell's
  environment goes into the job: the members reach Nomad through their
  client's task API socket, and Consul at the definition's
  nomad { consul { address } } (default 127.0.0.1:8500). The job
  holds no token: under ACLs the members use their workload identity for
  Nomad and read CONSUL_HTTP_TOKEN from the Nomad variable nomad/jobs/JOB
  (key consul_token); see 'job run -store-consul-token'. With TLS auto the
  members also read the key that seals the cluster CA's key in Consul from
  that variable (key ca_kek); where it is missing the first member creates
  it there (check-and-set: one key for all). Under Nomad ACLs, whose
  workload identities may only read the variable, 'job run' creates it, or
  run the command this prints (on stderr) before 'nomad job run'.

Options:
  -binary PATH   etcd-nomad's path on the Nomad clients, over the
                 definition's nomad { binary } or { artifact }; one of
                 them is required (a dev or demo cluster: -binary $(which etcd-nomad))
  -image REF     driver "docker": the image the clients run, over the
                 definition's nomad { image } ('make image' builds one)`)
}

// renderJob parses the -binary and -image flags and FILE from args (fs may
// define more flags) and renders the job; ok is false once the error is
// reported.
func renderJob(ui cli.Ui, fs *flag.FlagSet, args []string, help string) (spec string, cl *config.Cluster, ok bool) {
	bin := fs.String("binary", "", "")
	img := fs.String("image", "", "")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		ui.Error(help)
		return "", nil, false
	}
	cl = loadConfig(ui, fs.Arg(0))
	if cl == nil {
		return "", nil, false
	}
	spec, err := jobs.Render(cl, jobs.Options{Binary: *bin, Image: *img})
	if err != nil {
		ui.Error(err.Error())
		return "", nil, false
	}
	return spec, cl, true
}

func (c *jobRenderCommand) Run(args []string) int {
	spec, cl, ok := renderJob(c.ui, flag.NewFlagSet("job render", flag.ContinueOnError), args, c.Help())
	if !ok {
		return 1
	}
	if note := kekNote(cl); note != "" {
		c.ui.Warn(note)
	}
	out := c.stdout
	if out == nil {
		out = os.Stdout
	}
	fmt.Fprint(out, spec)
	return 0
}

type jobRunCommand struct{ ui cli.Ui }

func (c *jobRunCommand) Synopsis() string { return "Register the Nomad job and follow its deployment" }
func (c *jobRunCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad job run [-binary PATH | -image REF] [-timeout 10m] [-store-consul-token] FILE

  Renders the job for FILE, registers it with Nomad (NOMAD_ADDR,
  NOMAD_TOKEN) and follows the deployment until every member passes its
  health check, printing progress.

  Under Nomad ACLs it first attaches the ACL policy etcd-nomad-JOB (read-job)
  to the job, so the members can list its allocations with their workload
  identity; this needs a management token, or apply the policy yourself.
  With TLS auto it makes sure the Nomad variable nomad/jobs/JOB holds a
  key for the cluster CA's key (key ca_kek), creating one if needed; this
  needs variables write on that path.

Options:
  -binary PATH          etcd-nomad's path on the Nomad clients, over the
                        definition's nomad { binary } or { artifact }
  -image REF            driver "docker": the image, over nomad { image }
  -timeout DURATION     give up following the deployment after this long
  -store-consul-token   store CONSUL_HTTP_TOKEN in the Nomad variable
                        nomad/jobs/JOB (key consul_token), where the members
                        read their Consul token; without it, put a token
                        there yourself: nomad var put nomad/jobs/JOB consul_token=...`)
}

func (c *jobRunCommand) Run(args []string) int {
	fs := flag.NewFlagSet("job run", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 10*time.Minute, "")
	storeToken := fs.Bool("store-consul-token", false, "")
	spec, cl, ok := renderJob(c.ui, fs, args, c.Help())
	if !ok {
		return 1
	}
	cli, err := nomadglue.Client()
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	o := jobs.RunOptions{Grant: true, CAKEK: cl.TLS.Mode == config.TLSAuto}
	if *storeToken {
		if o.ConsulToken = consulToken(); o.ConsulToken == "" {
			c.ui.Error("-store-consul-token: CONSUL_HTTP_TOKEN (or CONSUL_HTTP_TOKEN_FILE) is not set")
			return 1
		}
	}
	if err := jobs.RunWith(ctx, cli, spec, os.Stdout, o); err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	c.ui.Output("deployment successful: every member passes its health check")
	return 0
}

// consulToken is the Consul token of this process's environment, as the
// Consul API client reads it.
func consulToken() string {
	cfg := consulapi.DefaultConfig()
	if cfg.Token == "" && cfg.TokenFile != "" {
		if b, err := os.ReadFile(cfg.TokenFile); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return cfg.Token
}
