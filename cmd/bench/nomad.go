package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/bench"
	"github.com/etcd-nomad/etcd-nomad/internal/clusterdef"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// The rendered job's group (members are named group-<alloc id prefix>,
// nomadglue.MemberName) and task (Nomad's docker driver names a task's
// container task-<alloc id>).
const (
	nomadGroup = "etcd"
	nomadTask  = "etcd"
)

// nomadKit is what every deployment of the Nomad figures runs on: real
// Consul and Nomad dev agents (and, for the docker driver, the kit's
// Docker engine), shared by the deployments of both drivers.
type nomadKit struct {
	dir        string
	bin        string // etcd-nomad, for `job render`
	nomadBin   string
	consulAddr string // host:port
	nomadAddr  string
	ccli       *consulapi.Client
	ncli       *nomadapi.Client
}

// newNomadKit is the kit on running agents. It points this process's
// CONSUL_HTTP_ADDR and NOMAD_ADDR at them: the rendered definitions and
// the status clients read them.
func newNomadKit(dir, bin, nomadBin string, consul, nomad *devagents.Agent) (*nomadKit, error) {
	k := &nomadKit{dir: dir, bin: bin, nomadBin: nomadBin, consulAddr: strings.TrimPrefix(consul.Addr, "http://"), nomadAddr: nomad.Addr}
	os.Setenv("CONSUL_HTTP_ADDR", k.consulAddr)
	os.Setenv("NOMAD_ADDR", nomad.Addr)
	ccfg := consulapi.DefaultConfig()
	ccfg.Address = k.consulAddr
	var err error
	if k.ccli, err = consulapi.NewClient(ccfg); err != nil {
		return nil, err
	}
	ncfg := nomadapi.DefaultConfig()
	ncfg.Address = nomad.Addr
	if k.ncli, err = nomadapi.NewClient(ncfg); err != nil {
		return nil, err
	}
	return k, nil
}

// nomadDriver is how the members of a deployment run.
type nomadDriver struct {
	// name is the task driver: raw_exec or docker.
	name string
	// release is `etcd-nomad job render`'s arguments and what the
	// definition's nomad block adds for release 1 (the deployment) or 2
	// (the rolling update's): a new binary path for raw_exec, a new image
	// tag for docker.
	release func(n int) (render []string, nomadHCL string)
	// instances names the running instance of each member of job
	// (raw_exec: its process; docker: its container), by member name.
	instances func(ctx context.Context, k *nomadKit, job string, st status.Cluster) (map[string]string, error)
	// kill sends SIGKILL to the process of a member's instance on the
	// host.
	kill func(ctx context.Context, m status.Member, instance string) error
}

// rawExecDriver runs the members as bin (release 1) and bin2 (release 2)
// processes; a member's /status PID is its instance.
func rawExecDriver(bin, bin2 string) nomadDriver {
	return nomadDriver{
		name: "raw_exec",
		release: func(n int) ([]string, string) {
			if n == 2 {
				return []string{"-binary", bin2}, ""
			}
			return []string{"-binary", bin}, ""
		},
		instances: func(_ context.Context, _ *nomadKit, _ string, st status.Cluster) (map[string]string, error) {
			out := map[string]string{}
			for _, m := range st.Members {
				if m.PID != 0 {
					out[m.Name] = strconv.Itoa(m.PID)
				}
			}
			return out, nil
		},
		kill: func(_ context.Context, m status.Member, _ string) error { return killMember(m.Name, m.PID) },
	}
}

// dockerDriver runs the members in containers of images[0] (release 1)
// and images[1] (release 2) on engine d; a member's instance is its
// allocation's container. The PID in a member's /status is 1 there (its
// container's PID namespace), and its name is not its allocation's (a
// member that adopts its predecessor's data keeps the name it has
// there): its allocation is the one whose "client" port its client URL
// is on, and the process to kill is its container's on the host.
func dockerDriver(d *devagents.Docker, images [2]string) nomadDriver {
	clientPort := map[string]string{} // alloc id -> its client port
	return nomadDriver{
		name: "docker",
		release: func(n int) ([]string, string) {
			img := images[n-1]
			return []string{"-image", img}, fmt.Sprintf("driver = \"docker\"\n    image  = %q", img)
		},
		instances: func(ctx context.Context, k *nomadKit, job string, st status.Cluster) (map[string]string, error) {
			allocs, _, err := k.ncli.Jobs().Allocations(job, false, nil)
			if err != nil {
				return nil, fmt.Errorf("list allocations: %w", err)
			}
			running, err := d.Containers(ctx)
			if err != nil {
				return nil, err
			}
			byPort := map[string]string{} // client port -> container id
			for _, a := range allocs {
				id := running[nomadTask+"-"+a.ID]
				if a.ClientStatus != nomadapi.AllocClientStatusRunning || id == "" {
					continue
				}
				if clientPort[a.ID] == "" {
					alloc, _, err := k.ncli.Allocations().Info(a.ID, nil)
					if err != nil {
						return nil, fmt.Errorf("allocation %s: %w", a.ID, err)
					}
					if alloc.AllocatedResources != nil {
						for _, p := range alloc.AllocatedResources.Shared.Ports {
							if p.Label == "client" {
								clientPort[a.ID] = strconv.Itoa(p.Value)
							}
						}
					}
				}
				byPort[clientPort[a.ID]] = id
			}
			out := map[string]string{}
			for _, m := range st.Members {
				if u, err := url.Parse(m.ClientURL); err == nil && byPort[u.Port()] != "" {
					out[m.Name] = byPort[u.Port()]
				}
			}
			return out, nil
		},
		kill: func(ctx context.Context, m status.Member, container string) error {
			pid, err := d.ContainerPID(ctx, container)
			if err != nil {
				return fmt.Errorf("member %s: %w", m.Name, err)
			}
			return killMember(m.Name, pid)
		},
	}
}

// killMember sends SIGKILL to a member's process on the host.
func killMember(name string, pid int) error {
	if pid <= 1 {
		return fmt.Errorf("member %s: no process to kill (pid %d)", name, pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill member %s (pid %d): %w", name, pid, err)
	}
	return nil
}

// nomadTimes are one deployment's figures, in seconds.
type nomadTimes struct {
	bootstrap   float64 // `nomad job run` -> 3 passing checks
	killHealthy float64 // kill -9 -> the member healthy again
	killConsul  float64 // kill -9 -> 3 passing checks again
	killRestart float64 // the task's restart -> 3 passing checks
	replace     float64 // `nomad alloc stop` -> replaced, healthy
	roll        float64 // `nomad job run` of release 2 -> every allocation replaced, healthy
}

// nomadFigures measures (b) bootstrap and (c) kill -9, alloc stop and a
// rolling update on 3-member clusters deployed with `nomad job run` on
// real Consul and Nomad dev agents, with the raw_exec driver and with the
// docker driver (the kit's own engine, an image of the same binary) in
// the same run, -nomad-rounds deployments each, alternating. raw_exec's
// figures have absolute goals (plain etcd has no equivalent); docker's
// are compared with raw_exec's.
func (e *runEnv) nomadFigures(ctx context.Context) (_ []bench.Result, _ []string, err error) {
	results := []bench.Result{
		{ID: "b.bootstrap", Name: "`nomad job run` -> 3 passing Consul checks", Unit: "s", GoalKind: bench.AtMost, Goal: 10},
		{ID: "c.kill", Name: "kill -9 a member -> healthy again (its /status)", Unit: "s", GoalKind: bench.AtMost, Goal: 5},
		{ID: "c.kill.consul", Name: "kill -9 a member -> 3 passing Consul checks again", Unit: "s", GoalKind: bench.AtMost, Goal: 5},
		{ID: "c.kill.restart", Name: "Nomad's restart of the killed task -> 3 passing Consul checks", Unit: "s", GoalKind: bench.AtMost, Goal: 5},
		{ID: "c.replace", Name: "`nomad alloc stop` -> replaced, promoted, healthy", Unit: "s", GoalKind: bench.AtMost, Goal: 20},
	}
	// The docker driver's figures, each next to raw_exec's of the same
	// run (the baseline): what running the members in containers costs.
	// The goals allow 2 s per container start in sequence.
	docker := []bench.Result{
		{ID: "b.bootstrap.docker", Name: "docker driver: `nomad job run` -> 3 passing Consul checks (baseline: raw_exec)", Unit: "s", GoalKind: bench.DeltaAtMost, Goal: 2},
		{ID: "c.kill.docker", Name: "docker driver: kill -9 a member's container process -> healthy again (baseline: raw_exec's kill -9)", Unit: "s", GoalKind: bench.DeltaAtMost, Goal: 2},
		{ID: "c.replace.docker", Name: "docker driver: `nomad alloc stop` -> replaced, promoted, healthy (baseline: raw_exec)", Unit: "s", GoalKind: bench.DeltaAtMost, Goal: 2},
		{ID: "c.roll.docker", Name: "docker driver: rolling update to a new image tag -> 3 replaced allocations, 3 healthy voters, 3 passing checks (baseline: raw_exec to a new binary path)", Unit: "s", GoalKind: bench.DeltaAtMost, Goal: 6},
	}
	skip := func(rs []bench.Result, why string) []bench.Result {
		for i := range rs {
			rs[i].Skipped = why
		}
		return rs
	}
	if e.opts.nomadRounds < 1 {
		return nil, nil, fmt.Errorf("-nomad-rounds %d: at least 1", e.opts.nomadRounds)
	}
	nomadBin, err := devagents.Bin("nomad", devagents.NomadVersion)
	if err != nil {
		return append(skip(results, err.Error()), skip(docker, err.Error())...), nil, nil
	}
	if _, err := devagents.Bin("consul", devagents.ConsulVersion); err != nil {
		return append(skip(results, err.Error()), skip(docker, err.Error())...), nil, nil
	}
	// One static binary for both drivers: raw_exec runs it, the image
	// holds it. Release 2 of raw_exec is the same binary at another path
	// (a changed task command: Nomad replaces every allocation).
	bin, err := e.etcdNomadStatic(ctx)
	if err != nil {
		return nil, nil, err
	}
	bin2 := filepath.Join(filepath.Dir(bin), "release2", "etcd-nomad")
	if err := os.MkdirAll(filepath.Dir(bin2), 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.Link(bin, bin2); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, nil, fmt.Errorf("release 2 of the binary: %w", err)
	}
	dir := filepath.Join(e.opts.work, "nomad")
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	consul, err := devagents.StartConsul(actx, filepath.Join(dir, "consul"))
	if err != nil {
		return nil, nil, err
	}
	defer consul.Stop(15 * time.Second)

	// The kit's own Docker engine (as the e2e's and `make demo
	// DRIVER=docker`), stopped after Nomad by its PID; what is left of it
	// fails the figures.
	drivers := []nomadDriver{rawExecDriver(bin, bin2)}
	var engine *devagents.Docker
	var imageNote string
	if err := devagents.DockerAvailable(); err != nil {
		docker = skip(docker, err.Error())
	} else if engine, err = devagents.StartDocker(actx, filepath.Join(dir, "docker")); err != nil {
		docker = skip(docker, "the kit's Docker engine did not start: "+err.Error())
	} else {
		defer func() {
			if serr := engine.Stop(); serr != nil {
				err = errors.Join(err, fmt.Errorf("stop the Docker engine: %w", serr))
			}
			if left := devagents.DockerLeftovers(); len(left) > 0 {
				err = errors.Join(err, fmt.Errorf("left of the Docker engine after its Stop: %v", left))
			}
		}()
		images := [2]string{"etcd-nomad:bench-1", "etcd-nomad:bench-2"}
		start := time.Now()
		if err := engine.BuildImage(ctx, filepath.Join(e.opts.repo, "tools", "image.sh"), bin, images[0], ""); err != nil {
			return nil, nil, err
		}
		if _, err := engine.Run(ctx, "tag", images[0], images[1]); err != nil {
			return nil, nil, err
		}
		imageNote = fmt.Sprintf(" The image (tools/image.sh, `docker import` of the static binary: no registry) was built into the engine in %.1f s, not timed in the figures; release 2 is the same image under a second tag.", time.Since(start).Seconds())
		drivers = append(drivers, dockerDriver(engine, images))
	}
	nomad, err := devagents.StartNomadWith(actx, filepath.Join(dir, "nomad"), consul.Addr, devagents.Options{Docker: engine})
	if err != nil {
		return nil, nil, err
	}
	defer nomad.Stop(30 * time.Second)
	k, err := newNomadKit(dir, bin, nomadBin, consul, nomad)
	if err != nil {
		return nil, nil, err
	}

	// Rounds alternate which driver deploys first, so that the machine's
	// other load falls on both alike; the median of each figure counts.
	times := map[string][]nomadTimes{}
	for round := 1; round <= e.opts.nomadRounds; round++ {
		for i := range drivers {
			d := drivers[i]
			if round%2 == 0 {
				d = drivers[len(drivers)-1-i]
			}
			job := fmt.Sprintf("bench-%d-%s", round, strings.ReplaceAll(d.name, "_", "-"))
			t, err := e.deploy(ctx, k, d, job)
			if err != nil {
				return nil, nil, fmt.Errorf("%s, round %d: %w", d.name, round, err)
			}
			e.log.Info("deployment measured", "driver", d.name, "round", round, "times", fmt.Sprintf("%+v", t))
			times[d.name] = append(times[d.name], t)
		}
	}
	raw := medianTimes(times["raw_exec"])
	for i, v := range []float64{raw.bootstrap, raw.killHealthy, raw.killConsul, raw.killRestart, raw.replace} {
		results[i].Value = v
	}
	var dockerNote string
	if engine != nil {
		dk := medianTimes(times["docker"])
		for i, v := range [][2]float64{{dk.bootstrap, raw.bootstrap}, {dk.killHealthy, raw.killHealthy}, {dk.replace, raw.replace}, {dk.roll, raw.roll}} {
			docker[i].Value, docker[i].Baseline = v[0], v[1]
		}
		// raw_exec's absolute goals, which hold for members in
		// containers as well.
		for i, abs := range []bench.Result{results[0], results[1], results[4]} {
			abs.Value = docker[i].Value
			abs.Judge()
			docker[i].Notes = fmt.Sprintf("%s s against %s's goal (%s): %s.", num1(abs.Value), abs.ID, abs.GoalText(), map[bool]string{true: "met", false: "NOT met"}[abs.Pass])
		}
		dockerNote = fmt.Sprintf(" The docker rows: the same job with `nomad { driver = \"docker\", image }` (rendered with `-image`: host networking, the data on the allocation's sticky disk as under raw_exec) on the kit's own Docker engine (`devagents.StartDocker`: own socket, data and exec roots, no iptables, no bridge; stopped by its PID at the end), measured the same way, each next to raw_exec's median from the same run; a member's instance is its allocation's container (its /status PID is 1 there; the allocation is the one whose client port the member advertises), and kill -9 goes to the container's process on the host. Their goals bound the cost of containers: at most 2 s over raw_exec per container start in sequence (one for bootstrap, kill and replacement, three for the rolling update); a container starts in about half a second on this machine. Their ratio column is docker ÷ raw_exec (value ÷ baseline, as for the f rows): above 1, the containers took longer.%s c.roll.docker: from `nomad job run` of release 2 (docker: a new image tag; raw_exec: the same binary at a new path) until every running allocation is of the new job version, 3 members are healthy voters and Consul shows 3 passing checks; the update replaces one allocation at a time (max_parallel 1, each healthy for min_healthy_time 3s first, shutdown_delay 5s before each stop), so it is about three replacements in sequence.", imageNote)
	}
	note := fmt.Sprintf("Nomad (b, c): real `consul agent -dev` and `nomad agent -dev` (raw_exec, docker; devagents), a 3-member job rendered by `etcd-nomad job render` (TLS auto, Consul coordination, stale_after 5s) from a static (CGO_ENABLED=0) build and submitted with `nomad job run`; %d deployment(s) per driver, alternating which goes first, a fresh job each, the median counts (%s). Times from the command (or the kill) until the condition is seen by polling every 200 ms: Consul shows exactly 3 passing member checks, and for c the member's `/status` reports it healthy (kill: same name, a new instance; replacement: the replacement allocation's member, which adopts the stopped one's data handed over by the sticky disk (same member ID, a new instance) or joins as a new member ID, with 3 healthy voters). The rendered job restarts a dead task after `restart.delay` 2s and Consul runs the member check every 2s; both are inside the figures counted from the kill; c.kill.restart counts from the task's last `Started` event in Nomad, as the issue's goal (at most 5 s after the restart) does. raw_exec's goals are absolute: plain etcd has no equivalent to compare with.%s",
		e.opts.nomadRounds, roundsText(times), dockerNote)
	if engine == nil {
		note += " The docker rows are skipped: " + docker[0].Skipped
	}
	return append(results, docker...), []string{note}, nil
}

// deploy measures one 3-member job named job whose members run with
// driver d: bootstrap, kill -9 of a member, `nomad alloc stop` of one and
// a rolling update to release 2. It stops and purges the job before it
// returns.
func (e *runEnv) deploy(ctx context.Context, k *nomadKit, d nomadDriver, job string) (nomadTimes, error) {
	var t nomadTimes
	dir := filepath.Join(k.dir, job)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return t, err
	}
	def := filepath.Join(dir, "cluster.hcl")
	specFile := filepath.Join(dir, "etcd.nomad.hcl")
	// render writes the definition and the job of release n.
	render := func(n int) error {
		args, nomadHCL := d.release(n)
		return renderNomadJob(ctx, k, job, "", nomadHCL, args, def, specFile)
	}
	run := func() error {
		if out, err := exec.CommandContext(ctx, k.nomadBin, "job", "run", "-detach", "-address", k.nomadAddr, specFile).CombinedOutput(); err != nil {
			return fmt.Errorf("nomad job run: %w\n%s", err, out)
		}
		return nil
	}
	if err := render(1); err != nil {
		return t, err
	}
	cl, _, diags := config.LoadFile(def)
	if diags.HasErrors() {
		return t, fmt.Errorf("bench definition: %s", diags.Error())
	}
	defer func() {
		// Stop the job and wait for its members before the next one (or
		// the agents) go; purge it and collect its allocations.
		_ = exec.Command(k.nomadBin, "job", "stop", "-detach", "-yes", "-address", k.nomadAddr, job).Run()
		sctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := nomadglue.WaitStopped(sctx, k.ncli, job, ""); err != nil {
			e.log.Warn("job did not stop", "job", job, "error", err)
		}
		_ = exec.Command(k.nomadBin, "job", "stop", "-detach", "-purge", "-yes", "-address", k.nomadAddr, job).Run()
		_ = exec.Command(k.nomadBin, "system", "gc", "-address", k.nomadAddr).Run()
	}()

	passing := func() (bool, string) {
		ch, err := status.ConsulChecks(ctx, k.ccli, job)
		if err != nil {
			return false, err.Error()
		}
		return ch.Passing == 3 && ch.Total == 3, fmt.Sprintf("%d/%d passing: %s", ch.Passing, ch.Total, strings.Join(ch.Lines, ", "))
	}
	bc, err := backends.OpenClient(cl)
	if err != nil {
		return t, err
	}
	gather := func() (status.Cluster, error) {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return status.Gather(sctx, bc)
	}

	// What `etcd-nomad job run` does first (not timed): the key that
	// seals the cluster CA's key in Consul, in the job's Nomad variable.
	if _, err := jobs.EnsureCAKEK(ctx, k.ncli, job, ""); err != nil {
		return t, err
	}

	// (b) bootstrap.
	start := time.Now()
	if err := run(); err != nil {
		return t, err
	}
	if err := poll(ctx, 3*time.Minute, "3 passing Consul checks after nomad job run", passing); err != nil {
		return t, err
	}
	t.bootstrap = time.Since(start).Seconds()

	// (c) kill -9 one member's process; Nomad restarts the task (raw_exec:
	// a new process; docker: a new container).
	st, err := gather()
	if err != nil {
		return t, err
	}
	victim := st.Members[len(st.Members)-1]
	inst, err := d.instances(ctx, k, job, st)
	if err != nil {
		return t, err
	}
	old := inst[victim.Name]
	if old == "" {
		return t, fmt.Errorf("no running instance of member %s", victim.Name)
	}
	start = time.Now()
	if err := d.kill(ctx, victim, old); err != nil {
		return t, err
	}
	var healthyAfter time.Duration
	err = poll(ctx, 2*time.Minute, "the killed member healthy again in a new instance and 3 passing checks", func() (bool, string) {
		if healthyAfter == 0 {
			st, err := gather()
			if err != nil {
				return false, err.Error()
			}
			now, err := d.instances(ctx, k, job, st)
			if err != nil {
				return false, err.Error()
			}
			for _, m := range st.Members {
				if i := now[m.Name]; m.Name == victim.Name && i != "" && i != old && m.Healthy {
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
		return t, err
	}
	t.killHealthy = healthyAfter.Seconds()
	t.killConsul = time.Since(start).Seconds()
	// The goal counts from the restart: the task's last "Started"
	// event in Nomad (after its restart delay).
	passingAt := time.Now()
	restarted, err := lastStarted(k.ncli, job, strings.TrimPrefix(victim.Name, nomadGroup+"-"))
	if err != nil {
		return t, err
	}
	t.killRestart = passingAt.Sub(restarted).Seconds()

	// (c) alloc stop: Nomad places a replacement allocation. A member
	// stopped while its job keeps its count is not leaving: it keeps its
	// membership, and the replacement adopts its data where the sticky
	// disk is handed over (same member id, a new instance), or joins as a
	// new member (a new id) while the old one is removed once stale.
	if st, err = gather(); err != nil {
		return t, err
	}
	if inst, err = d.instances(ctx, k, job, st); err != nil {
		return t, err
	}
	before := map[uint64]string{} // member id -> instance
	for _, m := range st.Members {
		before[m.MemberID] = inst[m.Name]
	}
	allocs, _, err := k.ncli.Jobs().Allocations(job, false, nil)
	if err != nil {
		return t, err
	}
	var allocID string
	for _, a := range allocs {
		if a.DesiredStatus == nomadapi.AllocDesiredStatusRun {
			allocID = a.ID
		}
	}
	start = time.Now()
	if out, err := exec.CommandContext(ctx, k.nomadBin, "alloc", "stop", "-detach", "-address", k.nomadAddr, allocID).CombinedOutput(); err != nil {
		return t, fmt.Errorf("nomad alloc stop: %w\n%s", err, out)
	}
	err = poll(ctx, 3*time.Minute, "a member of the replacement allocation (a new instance, or a new member), 3 healthy voters, 3 passing checks", func() (bool, string) {
		st, err := gather()
		if err != nil {
			return false, err.Error()
		}
		now, err := d.instances(ctx, k, job, st)
		if err != nil {
			return false, err.Error()
		}
		fresh, healthy := 0, 0
		for _, m := range st.Members {
			if i, ok := before[m.MemberID]; m.MemberID != 0 && (!ok || (now[m.Name] != "" && now[m.Name] != i)) {
				fresh++
			}
			if m.Healthy && !m.Learner {
				healthy++
			}
		}
		if fresh == 0 || healthy != 3 || len(st.Members) != 3 {
			return false, fmt.Sprintf("%d members in a new instance, %d healthy voters: %+v", fresh, healthy, st.Members)
		}
		return passing()
	})
	if err != nil {
		return t, err
	}
	t.replace = time.Since(start).Seconds()

	// (c) rolling update to release 2: Nomad replaces one allocation at a
	// time, each replacement healthy (its Consul check) before the next.
	if err := render(2); err != nil {
		return t, err
	}
	start = time.Now()
	if err := run(); err != nil {
		return t, err
	}
	info, _, err := k.ncli.Jobs().Info(job, nil)
	if err != nil {
		return t, err
	}
	version := *info.Version
	err = poll(ctx, 5*time.Minute, fmt.Sprintf("every allocation of job version %d running, 3 healthy voters, 3 passing checks", version), func() (bool, string) {
		allocs, _, err := k.ncli.Jobs().Allocations(job, false, nil)
		if err != nil {
			return false, err.Error()
		}
		fresh, wanted := 0, 0
		for _, a := range allocs {
			if a.DesiredStatus != nomadapi.AllocDesiredStatusRun {
				continue
			}
			wanted++
			if a.JobVersion == version && a.ClientStatus == nomadapi.AllocClientStatusRunning {
				fresh++
			}
		}
		if fresh != 3 || wanted != 3 {
			return false, fmt.Sprintf("%d of %d wanted allocations running version %d", fresh, wanted, version)
		}
		st, err := gather()
		if err != nil {
			return false, err.Error()
		}
		healthy := 0
		for _, m := range st.Members {
			if m.Healthy && !m.Learner {
				healthy++
			}
		}
		if healthy != 3 || len(st.Members) != 3 {
			return false, fmt.Sprintf("%d healthy voters: %+v", healthy, st.Members)
		}
		return passing()
	})
	if err != nil {
		return t, err
	}
	t.roll = time.Since(start).Seconds()
	return t, nil
}

// medianTimes is the median of each figure over the deployments.
func medianTimes(ts []nomadTimes) nomadTimes {
	col := func(f func(nomadTimes) float64) float64 {
		var vs []float64
		for _, t := range ts {
			vs = append(vs, f(t))
		}
		return middle(vs)
	}
	return nomadTimes{
		bootstrap:   col(func(t nomadTimes) float64 { return t.bootstrap }),
		killHealthy: col(func(t nomadTimes) float64 { return t.killHealthy }),
		killConsul:  col(func(t nomadTimes) float64 { return t.killConsul }),
		killRestart: col(func(t nomadTimes) float64 { return t.killRestart }),
		replace:     col(func(t nomadTimes) float64 { return t.replace }),
		roll:        col(func(t nomadTimes) float64 { return t.roll }),
	}
}

// roundsText lists every deployment's figures, per driver, for the note.
func roundsText(times map[string][]nomadTimes) string {
	var parts []string
	for _, d := range []string{"raw_exec", "docker"} {
		for i, t := range times[d] {
			parts = append(parts, fmt.Sprintf("%s #%d: bootstrap %s s, kill -9 %s s, replacement %s s, rolling update %s s",
				d, i+1, num1(t.bootstrap), num1(t.killHealthy), num1(t.replace), num1(t.roll)))
		}
	}
	return strings.Join(parts, "; ")
}

// num1 prints seconds with one decimal.
func num1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

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

// lastStarted is when Nomad last started the etcd task of job's running
// allocation whose id begins with prefix.
func lastStarted(ncli *nomadapi.Client, job, prefix string) (time.Time, error) {
	allocs, _, err := ncli.Jobs().Allocations(job, false, nil)
	if err != nil {
		return time.Time{}, fmt.Errorf("list allocations: %w", err)
	}
	for _, a := range allocs {
		if !strings.HasPrefix(a.ID, prefix) || a.TaskStates[nomadTask] == nil {
			continue
		}
		var at int64
		for _, e := range a.TaskStates[nomadTask].Events {
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

// renderNomadJob writes the definition of a 3-member cluster named job on
// the kit (Consul coordination, stale_after 5s, every member on the one
// Nomad client) to def, with quota as etcd's quota_backend_bytes ("": the
// default) and nomadHCL added to its nomad block, and `etcd-nomad job
// render` of it with args to specFile.
func renderNomadJob(ctx context.Context, k *nomadKit, job, quota, nomadHCL string, args []string, def, specFile string) error {
	d := clusterdef.Definition{Name: job, Size: 3, Group: nomadGroup, StaleAfter: "5s", Prefix: "etcd-nomad-" + job,
		Quota: quota, MemoryMB: 256, Nomad: clusterdef.SingleClient(k.consulAddr) + "\n    " + nomadHCL}
	if err := os.WriteFile(def, []byte(d.HCL()), 0o600); err != nil {
		return err
	}
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, k.bin, append(append([]string{"job", "render"}, args...), def)...)
	cmd.Stderr = &stderr
	spec, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("job render %v: %w: %s", args, err, stderr.String())
	}
	return os.WriteFile(specFile, spec, 0o600)
}
