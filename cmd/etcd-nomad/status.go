package main

import (
	"context"
	"encoding/json"
	"flag"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcd-nomad/etcd-nomad/status"
	"github.com/hashicorp/cli"
)

type statusCommand struct{ ui cli.Ui }

func (c *statusCommand) Synopsis() string { return "Show the members of a cluster" }
func (c *statusCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad status [-config FILE | -dir DIR] [-json]

  Asks every member's /status (over mutual TLS) and prints a table: name,
  member id, role, revision, healthy, learner, plus the cluster id and epoch
  from the cluster record.

Options:
  -config FILE   cluster definition
  -dir DIR       a directory made by 'etcd-nomad local up' (uses DIR/cluster.hcl)
  -json          print JSON instead of a table`)
}

func (c *statusCommand) Run(args []string) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	path := fs.String("config", "", "")
	dir := fs.String("dir", "", "")
	asJSON := fs.Bool("json", false, "")
	if err := fs.Parse(args); err != nil {
		c.ui.Error(c.Help())
		return 1
	}
	if *dir != "" {
		*path = filepath.Join(*dir, "cluster.hcl")
	}
	if *path == "" {
		c.ui.Error("status needs -config FILE or -dir DIR\n\n" + c.Help())
		return 1
	}
	cl := loadConfig(c.ui, *path)
	if cl == nil {
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := status.Gather(ctx, cl)
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	if *asJSON {
		b, _ := json.MarshalIndent(st, "", "  ")
		c.ui.Output(string(b))
	} else {
		c.ui.Output(status.Format(st))
	}
	healthy := 0
	for _, m := range st.Members {
		if m.Healthy {
			healthy++
		}
	}
	if healthy < len(cl.Provider.Static)/2+1 {
		return 2
	}
	return 0
}
