package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
)

// Deadlines of `down`. The job's tasks get their kill_timeout (30s by
// default) before Nomad kills them; allocStopTimeout leaves room for that
// and for a member's graceful leave before it.
var (
	allocStopTimeout = 2 * time.Minute
	agentStopTimeout = 30 * time.Second
	// leftoverTimeout is how long a process still running after the agents
	// stopped gets after SIGTERM before SIGKILL.
	leftoverTimeout = 5 * time.Second
)

// down stops the demo in the order that leaves nothing behind: the job
// first, waiting until Nomad reports every allocation terminal (the tasks
// have exited: a task's executor runs in a process group of its own and
// outlives an agent killed before it), then the Nomad and Consul agents.
// Last it looks for any process still running from the demo dir, kills it
// and says so.
func down(dir string, out io.Writer) error {
	step := func(format string, args ...any) { fmt.Fprintf(out, "==> "+format+"\n", args...) }
	var errs []error
	var st state
	b, err := os.ReadFile(statePath(dir))
	if err != nil {
		fmt.Fprintln(out, "no demo state in", dir)
	} else {
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("read %s: %w", statePath(dir), err)
		}
		if ours(st.NomadPID, dir) {
			if err := stopJob(st, step); err != nil {
				// The agents are stopped anyway; the leftover check
				// below finds what this left running.
				errs = append(errs, err)
				step("%v", err)
			}
		}
		for _, p := range []struct {
			name string
			pid  int
		}{{"nomad", st.NomadPID}, {"consul", st.ConsulPID}} {
			if !ours(p.pid, dir) {
				continue
			}
			step("stopping %s (pid %d)", p.name, p.pid)
			if err := stopAgent(p.pid); err != nil {
				errs = append(errs, fmt.Errorf("stop %s: %w", p.name, err))
				step("%v", errs[len(errs)-1])
			}
		}
	}
	if st.DockerPID != 0 {
		step("stopping the Docker engine (pid %d) and its containers", st.DockerPID)
		if err := devagents.StopDockerAt(st.DockerDir, st.DockerPID); err != nil {
			errs = append(errs, fmt.Errorf("stop the Docker engine: %w", err))
			step("%v", errs[len(errs)-1])
		}
	}
	left, err := killLeftovers(dir, step)
	if err != nil {
		errs = append(errs, err)
	}
	if st.AllocDir != "" {
		n, err := killLeftovers(st.AllocDir, step)
		left += n
		if err != nil {
			errs = append(errs, err)
		}
		_ = os.RemoveAll(st.AllocDir)
	}
	if left > 0 {
		step("%d processes of the demo outlived its agents and were killed", left)
	} else if err == nil {
		step("no process of the demo is left")
	}
	if err := unmountLeftovers(dir, step); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := os.Remove(statePath(dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// stopJob deregisters the job (without purge: its allocations stay listed
// until they are terminal, where a purged job's vanish at once) and waits
// until every allocation is terminal, printing progress.
func stopJob(st state, step func(string, ...any)) error {
	cfg := nomadapi.DefaultConfig()
	cfg.Address = st.NomadAddr
	cli, err := nomadapi.NewClient(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), allocStopTimeout)
	defer cancel()
	q := (&nomadapi.WriteOptions{}).WithContext(ctx)
	step("nomad job stop %s", st.Job)
	if _, _, err := cli.Jobs().Deregister(st.Job, false, q); err != nil {
		var ue nomadapi.UnexpectedResponseError
		if errors.As(err, &ue) && ue.StatusCode() == 404 {
			return nil
		}
		return fmt.Errorf("stop job %s: %w", st.Job, err)
	}
	start := time.Now()
	var last string
	lastPrint := time.Time{}
	for {
		allocs, _, err := cli.Jobs().Allocations(st.Job, true, (&nomadapi.QueryOptions{}).WithContext(ctx))
		var live []string
		for _, a := range allocs {
			if !terminal(a.ClientStatus) {
				live = append(live, fmt.Sprintf("%s %s (desired %s)", a.ID[:8], a.ClientStatus, a.DesiredStatus))
			}
		}
		sort.Strings(live)
		if err == nil && len(live) == 0 {
			step("all %d allocations of %s stopped (%.1fs)", len(allocs), st.Job, time.Since(start).Seconds())
			return nil
		}
		now := strings.Join(live, ", ")
		if err != nil {
			now = err.Error()
		}
		if now != last || time.Since(lastPrint) > 5*time.Second {
			step("waiting for allocations to stop (%.0fs): %s", time.Since(start).Seconds(), now)
			last, lastPrint = now, time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("allocations of %s not stopped after %s: %s", st.Job, allocStopTimeout, now)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// terminal: the client has reported the allocation's tasks exited, or
// (lost) the server has given up on the client, which for the demo is the
// dev agent itself.
func terminal(clientStatus string) bool {
	switch clientStatus {
	case nomadapi.AllocClientStatusComplete, nomadapi.AllocClientStatusFailed, nomadapi.AllocClientStatusLost:
		return true
	}
	return false
}

// stopAgent sends SIGTERM to an agent and waits; after agentStopTimeout it
// kills the agent's process group (devagents starts each agent as the
// leader of its own group, and its plugin processes, such as Nomad's
// logmons, stay in it).
func stopAgent(pid int) error {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitGone(pid, agentStopTimeout) {
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitGone(pid, 5*time.Second)
	return fmt.Errorf("pid %d ignored SIGTERM for %s: killed", pid, agentStopTimeout)
}

// waitGone waits until pid has exited; a zombie (exited, not yet reaped
// by its parent) counts as gone.
func waitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for alive(pid) && procState(pid) != 'Z' {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// killLeftovers finds the processes still running from dir and stops
// them: SIGTERM, then SIGKILL after leftoverTimeout. It returns how many
// it found; the error names those that would not die.
//
// It scans again after each round of kills, up to three rounds: a process
// may fork a child (a shell running its command) between the scan and the
// kill, and the child outlives its parent.
func killLeftovers(dir string, step func(string, ...any)) (int, error) {
	total := 0
	for round := 0; round < 3; round++ {
		n, err := killLeftoversOnce(dir, step)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
	return total, nil
}

func killLeftoversOnce(dir string, step func(string, ...any)) (int, error) {
	procs, err := demoProcesses(dir)
	if err != nil {
		return 0, fmt.Errorf("look for processes left from %s: %w", dir, err)
	}
	for _, p := range procs {
		step("still running after the agents stopped: pid %d: %s", p.pid, p.cmd)
		_ = syscall.Kill(p.pid, syscall.SIGTERM)
	}
	var stuck []string
	for _, p := range procs {
		if waitGone(p.pid, leftoverTimeout) {
			continue
		}
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
		if !waitGone(p.pid, 5*time.Second) {
			stuck = append(stuck, strconv.Itoa(p.pid))
		}
	}
	if len(stuck) > 0 {
		return len(procs), fmt.Errorf("processes of the demo survive SIGKILL: %s", strings.Join(stuck, ", "))
	}
	return len(procs), nil
}

type proc struct {
	pid int
	cmd string
}

// demoProcesses lists the processes started by the demo in dir: those
// whose working directory is in dir (the agents run in dir/consul and
// dir/nomad, and their plugins, executors and tasks inherit it or run in
// an allocation dir) or whose command line names it. This process and its
// ancestors (`go run ./cmd/demo down -dir DIR`) are not among them.
func demoProcesses(dir string) ([]proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	skip := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !skip[pid]; pid = parent(pid) {
		skip[pid] = true
	}
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || skip[pid] {
			continue
		}
		if !ours(pid, dir) {
			continue
		}
		out = append(out, proc{pid: pid, cmd: cmdline(pid)})
	}
	return out, nil
}

// ours reports whether pid runs from dir (working directory or command
// line): the recorded PIDs are checked with it too, so that a PID reused
// by another program after the demo's agent died is never signalled.
func ours(pid int, dir string) bool {
	if !alive(pid) {
		return false
	}
	if cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd")); err == nil && within(cwd, dir) {
		return true
	}
	return strings.Contains(cmdline(pid), dir+string(filepath.Separator))
}

func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

func cmdline(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

func parent(pid int) int {
	f := stat(pid)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// procState is the state letter of pid (R, S, Z...), 0 if unknown.
func procState(pid int) byte {
	f := stat(pid)
	if len(f) < 1 || f[0] == "" {
		return 0
	}
	return f[0][0]
}

// stat is /proc/PID/stat after the command name: state, ppid, ...
func stat(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// unmountLeftovers unmounts what a Nomad client killed before it cleaned
// up left mounted in its allocation dirs (the tasks' secrets and private
// tmpfs), so that the demo dir can be removed.
func unmountLeftovers(dir string, step func(string, ...any)) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return fmt.Errorf("look for mounts left in %s: %w", dir, err)
	}
	var errs []error
	for _, m := range mounts {
		step("still mounted after the agents stopped: %s", m)
		if err := syscall.Unmount(m, 0); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points in dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		// The mount point is the fifth field, with spaces and the like
		// escaped as octal.
		mp := unescapeOctal(f[4])
		if within(mp, dir) && mp != dir {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

func unescapeOctal(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
