package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
)

// checkConsumerSurvivesARestart drives the demo cluster as a real etcd
// consumer does (a session whose lease is kept alive, keys attached to it,
// a lock, an election, a watch: clustertest.Consumer), kills one member's
// process with SIGKILL, and requires the member back (Nomad restarts the
// task on its data) with every acknowledged leased key on its lease and
// the consumer's session alive throughout. Before task's
// TestRestartWithLeasedDataRejoinsAsTheSameMember, a member whose
// data held one leased key panicked at every start, forever; no workload of
// the demo's test held a lease.
func checkConsumerSurvivesARestart(t *testing.T, dir string, cli *clientv3.Client) {
	t.Helper()
	const prefix, writes = "demo-consumer", 20
	c := clustertest.StartConsumer(cli, prefix)
	// The writer beside the consumer: its watch follows prefix/.
	for i := 0; i < writes; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cli.Put(ctx, fmt.Sprintf("%s/k%02d", prefix, i), "v")
		cancel()
		if err != nil {
			c.Finish()
			t.Fatalf("put %d: %v", i, err)
		}
	}
	clustertest.WaitFor(t, time.Minute, "the consumer's leased keys, lock, election and watch", func() (bool, string) {
		r := c.Report()
		return r.LeasedKeys >= 3 && r.Locks >= 1 && r.Proclaims >= 1 && r.WatchEvents >= 1, r.String()
	})
	pids := memberPIDs(t, dir)
	if len(pids) != 3 {
		c.Finish()
		t.Fatalf("want 3 member processes running from the demo dir, found %v in:\n%s", pids, strings.Join(survivors(t, dir), "\n"))
	}
	victim := pids[0]
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		c.Finish()
		t.Fatalf("kill member pid %d: %v", victim, err)
	}
	start := time.Now()
	clustertest.WaitFor(t, 3*time.Minute, "the killed member restarted and 3 members answering", func() (bool, string) {
		now := memberPIDs(t, dir)
		for _, p := range now {
			if p == victim {
				return false, fmt.Sprintf("pid %d still runs", victim)
			}
		}
		if len(now) != 3 {
			return false, fmt.Sprintf("member processes %v", now)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, ep := range cli.Endpoints() {
			st, err := cli.Status(ctx, ep)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", ep, err)
			}
			if st.IsLearner || len(st.Errors) > 0 {
				return false, fmt.Sprintf("%s: learner %v, errors %v", ep, st.IsLearner, st.Errors)
			}
		}
		return true, ""
	})
	t.Logf("member pid %d killed; 3 members answering again after %.1fs", victim, time.Since(start).Seconds())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != writes {
		t.Errorf("acknowledged writes after the restart: %v (%v), want %d", r, err, writes)
	}
	rep := c.CheckLeases(t, cli)
	if rep.SessionsLost > 0 || rep.LeasesExpired > 0 {
		t.Errorf("a member restart ended the consumer's session: %s", rep)
	}
}

// memberPIDs lists the etcd-nomad member processes of the demo's job:
// `etcd-nomad member -config …` children of a Nomad executor or of a
// container's containerd shim that runs from the demo dir (the allocation
// dirs themselves are elsewhere).
func memberPIDs(t *testing.T, dir string) []int {
	t.Helper()
	executors := map[int]bool{}
	for _, s := range survivors(t, dir) {
		var pid int
		// A member's parent: Nomad's executor (raw_exec), or the
		// containerd shim of its container (make demo DRIVER=docker).
		if _, err := fmt.Sscanf(s, "pid %d", &pid); err == nil && (strings.Contains(s, " executor ") || strings.Contains(s, "containerd-shim")) {
			executors[pid] = true
		}
	}
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		// stat: pid (comm) state ppid …; comm may hold spaces.
		var ppid int
		if j := strings.LastIndexByte(string(stat), ')'); j > 0 {
			if f := strings.Fields(string(stat[j+1:])); len(f) > 1 {
				ppid, _ = strconv.Atoi(f[1])
			}
		}
		if executors[ppid] && strings.Contains(string(cmd), "\x00member\x00-config\x00") {
			pids = append(pids, pid)
		}
	}
	return pids
}
