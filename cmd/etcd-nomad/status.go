package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/status"
	"github.com/hashicorp/cli"
)

type statusCommand struct{ ui cli.Ui }

func (c *statusCommand) Synopsis() string { return "Show the members of a cluster" }
func (c *statusCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad status [-config FILE | -dir DIR] [-ca-bundle FILE] [-json]

  Asks every member's /status (over mutual TLS) and prints a table: name,
  member id, role, revision, healthy, learner, plus the cluster id and epoch
  from the cluster record, and below it every copy of data a member set
  aside (its data dir's aside/, never deleted on the spot: where, which
  epoch and cluster, which revision, when). It only reads: with TLS auto it needs the cluster
  CA from the coordinator (Consul key read) and never creates one.

Options:
  -config FILE     cluster definition
  -dir DIR         a directory made by 'etcd-nomad local up' (uses DIR/cluster.hcl)
  -ca-bundle FILE  TLS auto: use this cluster CA (a member's
                   <data_dir>/<member>/tls/ca.bundle) instead of the
                   coordinator's, e.g. after Consul lost its state
  -json            print JSON instead of a table`)
}

func (c *statusCommand) Run(args []string) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	path := fs.String("config", "", "")
	dir := fs.String("dir", "", "")
	asJSON := fs.Bool("json", false, "")
	caBundle := fs.String("ca-bundle", "", "")
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
	var ca *certs.Pair
	if *caBundle != "" {
		b, err := os.ReadFile(*caBundle)
		if err == nil {
			var p certs.Pair
			p, err = certs.ParseBundle(b)
			ca = &p
		}
		if err != nil {
			c.ui.Error(fmt.Sprintf("-ca-bundle %s: %v", *caBundle, err))
			return 1
		}
	}
	bc, err := backends.OpenClient(cl)
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	bc.CA = ca
	st, err := status.Gather(ctx, bc)
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
