package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/status"
	"github.com/etcd-nomad/etcd-nomad/task"
)

type recoverCommand struct{ ui cli.Ui }

func (c *recoverCommand) Synopsis() string {
	return "Recover a cluster that lost its quorum from the member an operator chooses"
}

func (c *recoverCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad recover -config FILE -from MEMBER

  Chooses the recovery source when automatic recovery is off
  (recovery_grace = "0s"), paused, or waiting for an operator: member
  MEMBER restarts as a one-member cluster from its own data
  (ForceNewCluster, etcd's cluster id kept) and the others set their data
  aside and join it as learners (after 'etcd-nomad resume' if paused).

  The fencing is the automatic path's: under the cluster lock, refused
  while any instance does not answer or any member answers as a healthy
  voter (a quorum), when MEMBER holds no data or a learner's, and when
  another member holds newer data (a newer epoch, or the same incarnation
  at a higher revision); the next epoch is recorded (compare-and-set)
  before MEMBER restarts. To restore from a snapshot instead, use
  'etcd-nomad snapshot restore'.

Options:
  -config FILE   cluster definition
  -from MEMBER   the member whose data becomes the cluster`)
}

func (c *recoverCommand) Run(args []string) int {
	fs := newClusterFlags("recover")
	from := fs.String("from", "", "")
	cl := fs.load(c.ui, c.Help(), args, false, from)
	if cl == nil {
		return 1
	}
	ctx, cancel := signalContext()
	defer cancel()
	rec, err := operatorRecover(ctx, cl, *from)
	if err != nil {
		c.ui.Error("recover: " + err.Error())
		return 1
	}
	c.ui.Output(fmt.Sprintf("recorded epoch %d: a recovery from %s's data (token %s epoch %d); %s restarts as a one-member cluster at its next loop, the others join it as learners",
		rec.Epoch, *from, shortToken(rec.LastConfirmedToken), rec.LastConfirmedEpoch, *from))
	return 0
}

// operatorRecover records an operator's recovery from member from, under
// the lock, after observing every instance (planner.OperatorRecovery).
func operatorRecover(ctx context.Context, cl *config.Cluster, from string) (coord.Record, error) {
	co, err := backends.OpenClient(cl)
	if err != nil {
		return coord.Record{}, err
	}
	lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
	defer lcancel()
	l, err := co.Lock(lctx, "etcd-nomad-recover")
	if err != nil {
		return coord.Record{}, fmt.Errorf("take the cluster lock: %w", err)
	}
	defer l.Unlock(context.Background())
	// Observed under the lock: no member changes the record meanwhile.
	cur, err := co.Record(ctx)
	var rec *planner.Record
	switch {
	case err == nil:
		rec = task.PlannerRecord(cur)
	case !errors.Is(err, coord.ErrNoRecord):
		return coord.Record{}, err
	}
	st, err := status.Gather(ctx, co)
	if err != nil {
		return coord.Record{}, err
	}
	v := planner.OperatorView{Record: rec, From: from, NewToken: task.NewToken()}
	for _, m := range st.Members {
		if m.Unreachable {
			v.Silent = append(v.Silent, m.Name)
			continue
		}
		v.Answered = append(v.Answered, planner.PeerStatus{Name: m.Name, MemberID: m.MemberID, Token: m.Token, Epoch: m.Epoch,
			Running: m.Running, Learner: m.Learner, Healthy: m.Healthy, Revision: m.Revision})
	}
	next, err := planner.OperatorRecovery(v)
	if err != nil {
		return coord.Record{}, err
	}
	written, err := co.UpdateRecord(ctx, l, task.StoredRecord(next, cur.Index))
	if err != nil {
		return coord.Record{}, fmt.Errorf("record epoch %d: %w", next.Epoch, err)
	}
	return written, nil
}

func shortToken(t string) string {
	if len(t) > 8 {
		return t[:8]
	}
	return t
}
