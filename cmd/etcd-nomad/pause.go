package main

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
)

type pauseCommand struct {
	ui     cli.Ui
	resume bool
}

func (c *pauseCommand) Synopsis() string {
	if c.resume {
		return "Let the members act again after a pause"
	}
	return "Stop every member from changing the cluster until resume"
}

func (c *pauseCommand) Help() string {
	if c.resume {
		return strings.TrimSpace(`
Usage: etcd-nomad resume -config FILE

  Removes the operator's pause: members take their decisions again
  (membership changes, recovery, maintenance) at their next loop.`)
	}
	return strings.TrimSpace(`
Usage: etcd-nomad pause -config FILE [-reason TEXT]

  Sets a pause in the coordinator that every member obeys at its next loop
  (within a second): no membership change, no automatic recovery, no
  record write, no data set aside, no maintenance (defragmentation,
  NOSPACE handling). A member that restarts still starts its own data,
  and 'etcd-nomad recover' still works. 'status' and each member's Consul
  check say PAUSED. Lift it with 'etcd-nomad resume'.

Options:
  -config FILE   cluster definition
  -reason TEXT   shown with the pause`)
}

func (c *pauseCommand) Run(args []string) int {
	name := "pause"
	if c.resume {
		name = "resume"
	}
	fs := newClusterFlags(name)
	reason := fs.String("reason", "", "")
	cl := fs.load(c.ui, c.Help(), args, false)
	if cl == nil {
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := setPause(ctx, cl, !c.resume, *reason); err != nil {
		c.ui.Error(name + ": " + err.Error())
		return 1
	}
	if c.resume {
		c.ui.Output(fmt.Sprintf("cluster %s resumed: members act again at their next loop", cl.Name))
	} else {
		c.ui.Output(fmt.Sprintf("cluster %s paused: members hold every change from their next loop; 'etcd-nomad resume -config %s' lifts it", cl.Name, *fs.path))
	}
	return 0
}

func setPause(ctx context.Context, cl *config.Cluster, on bool, reason string) error {
	co, err := backends.Coordinator(cl)
	if err != nil {
		return err
	}
	if !on {
		return co.SetPause(ctx, nil)
	}
	return co.SetPause(ctx, &coord.Pause{By: operatorName(), Reason: reason, Since: time.Now().UTC()})
}

// operatorName is user@host, for the record of who paused or recovered.
func operatorName() string {
	who := "unknown"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	host, _ := os.Hostname()
	return who + "@" + host
}
