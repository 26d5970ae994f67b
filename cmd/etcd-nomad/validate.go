package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/config"
)

type validateCommand struct{ ui cli.Ui }

func (c *validateCommand) Synopsis() string { return "Check a cluster definition" }
func (c *validateCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad validate FILE

  Parses and checks the HCL cluster definition FILE and prints every problem
  with file, line, column and a source snippet. Exits 1 when there is an
  error; warnings alone exit 0.`)
}

func (c *validateCommand) Run(args []string) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		c.ui.Error(c.Help())
		return 1
	}
	path := fs.Arg(0)
	cl, res, diags := config.LoadFile(path)
	if len(diags) > 0 {
		_ = res.WriteDiagnostics(os.Stderr, diags)
	}
	if diags.HasErrors() {
		c.ui.Error(fmt.Sprintf("%s: %d error(s)", path, len(diags.Errs())))
		return 1
	}
	valid := "valid"
	if n := len(diags); n > 0 {
		valid = fmt.Sprintf("valid with %d warning(s)", n)
	}
	c.ui.Output(fmt.Sprintf("%s: %s: cluster %q, %d members, provider %s, coordination %s, tls %s",
		path, valid, cl.Name, cl.Size, cl.Provider.Kind, cl.Coordination.Kind, cl.TLS.Mode))
	if note := kekNote(cl); note != "" {
		c.ui.Output(note)
	}
	return 0
}

// loadConfig loads a definition, printing diagnostics; nil on error.
func loadConfig(ui cli.Ui, path string) *config.Cluster {
	cl, res, diags := config.LoadFile(path)
	if diags.HasErrors() {
		_ = res.WriteDiagnostics(os.Stderr, diags)
		ui.Error(fmt.Sprintf("%s: invalid cluster definition", path))
		return nil
	}
	return cl
}

func loadConfigQuiet(path string) (*config.Cluster, config.Result, error) {
	cl, res, diags := config.LoadFile(path)
	if diags.HasErrors() {
		return nil, res, diags
	}
	return cl, res, nil
}
