package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/bench"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	nomadglue "github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// nomadJob is the job the Nomad figures deploy.
const nomadJob = "bench"

// nomadFigures measures (b) bootstrap and (c) kill -9 and alloc stop on a
// 3-member cluster deployed with `nomad job run` on real Consul and Nomad
// dev agents. They have no plain-etcd baseline: the goals are absolute.
func (e *runEnv) nomadFigures(ctx context.Context) ([]bench.Result, []string, error) {
	results := []bench.Result{
		{ID: "b.bootstrap", Name: "`nomad job run` -> 3 passing Consul checks", Unit: "s", GoalKind: bench.AtMost, Goal: 10},
		{ID: "c.kill", Name: "kill -9 a member -> healthy again (its /status)", Unit: "s", GoalKind: bench.AtMost, Goal: 5},
		{ID: "c.kill.consul", Name: "kill -9 a member -> 3 passing Consul checks again", Unit: "s", GoalKind: bench.AtMost, Goal: 5},
		{ID: "c.kill.restart", Name: "Nomad's restart of the killed task -> 3 passing Consul checks", Unit: "s", GoalKind: bench.AtMost, Goal: 5},
		{ID: "c.replace", Name: "`nomad alloc stop` -> replaced, promoted, healthy", Unit: "s", GoalKind: bench.AtMost, Goal: 20},
	}
	skip := func(why string) ([]bench.Result, []string, error) {
		for i := range results {
			results[i].Skipped = why
		}
		return results, nil, nil
	}
	nomadBin, err := devagents.Bin("nomad", devagents.NomadVersion)
	if err != nil {
		return skip(err.Error())
	}
	if _, err := devagents.Bin("consul", devagents.ConsulVersion); err != nil {
		return skip(err.Error())
	}
	bin, err := e.etcdNomad(ctx)
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(e.opts.work, "nomad")
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	consul, err := devagents.StartConsul(actx, filepath.Join(dir, "consul"))
	if err != nil {
		return nil, nil, err
	}
	defer consul.Stop(15 * time.Second)
	nomad, err := devagents.StartNomad(actx, filepath.Join(dir, "nomad"), consul.Addr)
	if err != nil {
		return nil, nil, err
	}
	defer nomad.Stop(30 * time.Second)
	os.Setenv("CONSUL_HTTP_ADDR", strings.TrimPrefix(consul.Addr, "http://"))
	os.Setenv("NOMAD_ADDR", nomad.Addr)
	ccfg := consulapi.DefaultConfig()
	ccfg.Address = strings.TrimPrefix(consul.Addr, "http://")
	ccli, err := consulapi.NewClient(ccfg)
	if err != nil {
		return nil, nil, err
	}
	ncfg := nomadapi.DefaultConfig()
	ncfg.Address = nomad.Addr
	ncli, err := nomadapi.NewClient(ncfg)
	if err != nil {
		return nil, nil, err
	}

	def := filepath.Join(dir, "cluster.hcl")
	if err := os.WriteFile(def, []byte(fmt.Sprintf(`cluster %q {
  size = 3

  etcd {
    heartbeat_interval = "100ms"
    election_timeout   = "1s"
  }

  provider "nomad" {
    group       = "etcd"
    stale_after = "5s"
  }

  coordination "consul" {
    prefix = "etcd-nomad-bench"
  }

  nomad {
    # One Nomad client: every member on it.
    distinct_hosts = false
    cpu          = 100
    memory_mb    = 256
    kill_timeout = "20s"
    consul {
      address = %q
    }
  }
}
`, nomadJob, strings.TrimPrefix(consul.Addr, "http://"))), 0o600); err != nil {
		return nil, nil, err
	}
	cl, _, diags := config.LoadFile(def)
	if diags.HasErrors() {
		return nil, nil, fmt.Errorf("bench definition: %s", diags.Error())
	}
	spec, err := exec.CommandContext(ctx, bin, "job", "render", "-binary", bin, def).Output()
	if err != nil {
		return nil, nil, fmt.Errorf("job render: %w", err)
	}
	specFile := filepath.Join(dir, "etcd.nomad.hcl")
	if err := os.WriteFile(specFile, spec, 0o600); err != nil {
		return nil, nil, err
	}
	defer func() {
		// Stop the job and wait for its member processes before the agents go.
		_ = exec.Command(nomadBin, "job", "stop", "-detach", "-yes", "-address", nomad.Addr, nomadJob).Run()
		sctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := nomadglue.WaitStopped(sctx, ncli, nomadJob, ""); err != nil {
			e.log.Warn("job did not stop", "error", err)
		}
		_ = exec.Command(nomadBin, "job", "stop", "-detach", "-purge", "-yes", "-address", nomad.Addr, nomadJob).Run()
	}()

	passing := func() (bool, string) {
		ch, err := status.ConsulChecks(ctx, ccli, nomadJob)
		if err != nil {
			return false, err.Error()
		}
		return ch.Passing == 3 && ch.Total == 3, fmt.Sprintf("%d/%d passing: %s", ch.Passing, ch.Total, strings.Join(ch.Lines, ", "))
	}
	bc, err := backends.OpenClient(cl)
	if err != nil {
		return nil, nil, err
	}
	gather := func() (status.Cluster, error) {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return status.Gather(sctx, bc)
	}

	// What `etcd-nomad job run` does first (not timed): the key that
	// seals the cluster CA's key in Consul, in the job's Nomad variable.
	if _, err := jobs.EnsureCAKEK(ctx, ncli, nomadJob, ""); err != nil {
		return nil, nil, err
	}

	// (b) bootstrap.
	start := time.Now()
	if out, err := exec.CommandContext(ctx, nomadBin, "job", "run", "-detach", "-address", nomad.Addr, specFile).CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("nomad job run: %w\n%s", err, out)
	}
	if err := poll(ctx, 3*time.Minute, "3 passing Consul checks after nomad job run", passing); err != nil {
		return nil, nil, err
	}
	results[0].Value = time.Since(start).Seconds()
	e.log.Info("bootstrap", "took", time.Since(start).Round(10*time.Millisecond))

	// (c) kill -9 one member process; Nomad restarts the task.
	st, err := gather()
	if err != nil {
		return nil, nil, err
	}
	victim := st.Members[len(st.Members)-1]
	if victim.PID == 0 {
		return nil, nil, fmt.Errorf("no pid in the status of %s", victim.Name)
	}
	start = time.Now()
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		return nil, nil, fmt.Errorf("kill member %s (pid %d): %w", victim.Name, victim.PID, err)
	}
	var healthyAfter time.Duration
	err = poll(ctx, 2*time.Minute, "the killed member healthy again and 3 passing checks", func() (bool, string) {
		if healthyAfter == 0 {
			st, err := gather()
			if err != nil {
				return false, err.Error()
			}
			for _, m := range st.Members {
				if m.Name == victim.Name && m.PID != 0 && m.PID != victim.PID && m.Healthy {
					healthyAfter = time.Since(start)
				}
			}
			if healthyAfter == 0 {
				return false, fmt.Sprintf("%s not back: %+v", victim.Name, st.Members)
			}
		}
		return passing()
	})
	if err != nil {
		return nil, nil, err
	}
	results[1].Value = healthyAfter.Seconds()
	results[2].Value = time.Since(start).Seconds()
	// The goal counts from the restart: the task's last "Started"
	// event in Nomad (after its restart delay).
	passingAt := time.Now()
	restarted, err := lastStarted(ncli, strings.TrimPrefix(victim.Name, "etcd-"))
	if err != nil {
		return nil, nil, err
	}
	results[3].Value = passingAt.Sub(restarted).Seconds()
	e.log.Info("kill -9 -> healthy", "healthy", healthyAfter.Round(10*time.Millisecond), "consul_passing", time.Since(start).Round(10*time.Millisecond))

	// (c) alloc stop: Nomad places a replacement allocation. A member
	// stopped while its job keeps its count is not leaving: it keeps its
	// membership, and the replacement adopts its data where the sticky
	// disk is handed over (same member id, a new process), or joins as a
	// new member (a new id) while the old one is removed once stale.
	st, err = gather()
	if err != nil {
		return nil, nil, err
	}
	before := map[uint64]int{} // member id -> PID
	for _, m := range st.Members {
		before[m.MemberID] = m.PID
	}
	allocs, _, err := ncli.Jobs().Allocations(nomadJob, false, nil)
	if err != nil {
		return nil, nil, err
	}
	var allocID string
	for _, a := range allocs {
		if a.DesiredStatus == nomadapi.AllocDesiredStatusRun {
			allocID = a.ID
		}
	}
	start = time.Now()
	if out, err := exec.CommandContext(ctx, nomadBin, "alloc", "stop", "-detach", "-address", nomad.Addr, allocID).CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("nomad alloc stop: %w\n%s", err, out)
	}
	err = poll(ctx, 3*time.Minute, "a member of the replacement allocation (a new process, or a new member), 3 healthy voters, 3 passing checks", func() (bool, string) {
		st, err := gather()
		if err != nil {
			return false, err.Error()
		}
		fresh, healthy := 0, 0
		for _, m := range st.Members {
			if pid, ok := before[m.MemberID]; m.MemberID != 0 && (!ok || m.PID != pid) {
				fresh++
			}
			if m.Healthy && !m.Learner {
				healthy++
			}
		}
		if fresh == 0 || healthy != 3 || len(st.Members) != 3 {
			return false, fmt.Sprintf("%d members in a new process, %d healthy voters: %+v", fresh, healthy, st.Members)
		}
		return passing()
	})
	if err != nil {
		return nil, nil, err
	}
	results[4].Value = time.Since(start).Seconds()
	e.log.Info("alloc stop -> replaced", "took", time.Since(start).Round(10*time.Millisecond))
	note := "Nomad (b, c): real `consul agent -dev` and `nomad agent -dev` (raw_exec, devagents), a 3-member job rendered by `etcd-nomad job render` (TLS auto, Consul coordination, stale_after 5s) and submitted with `nomad job run`; times from the command (or the kill) until the condition is seen by polling every 200 ms: Consul shows exactly 3 passing member checks, and for c the member's `/status` reports it healthy (kill: same name, new PID; replacement: the replacement allocation's member, which adopts the stopped one's data handed over by the sticky disk (same member ID, a new PID) or joins as a new member ID, with 3 healthy voters). The rendered job restarts a dead task after `restart.delay` 2s and Consul runs the member check every 2s; both are inside the figures counted from the kill; c.kill.restart counts from the task's last `Started` event in Nomad, as the issue's goal (at most 5 s after the restart) does. These goals are absolute: plain etcd has no equivalent to compare with."
	return results, []string{note}, nil
}

// poll checks cond every 200ms until it holds or timeout passes.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s; last seen: %s", timeout, what, state)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// lastStarted is when Nomad last started the etcd task of the running
// allocation whose id begins with prefix.
func lastStarted(ncli *nomadapi.Client, prefix string) (time.Time, error) {
	allocs, _, err := ncli.Jobs().Allocations(nomadJob, false, nil)
	if err != nil {
		return time.Time{}, fmt.Errorf("list allocations: %w", err)
	}
	for _, a := range allocs {
		if !strings.HasPrefix(a.ID, prefix) || a.TaskStates["etcd"] == nil {
			continue
		}
		var at int64
		for _, e := range a.TaskStates["etcd"].Events {
			if e.Type == nomadapi.TaskStarted {
				at = e.Time
			}
		}
		if at != 0 {
			return time.Unix(0, at), nil
		}
	}
	return time.Time{}, fmt.Errorf("no started etcd task in an allocation %s*", prefix)
}
