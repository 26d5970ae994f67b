package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/jobs"
)

// needDocker skips t on a machine that cannot run the kit's Docker engine
// (not root, or no Docker and no apt-get to install it), and fails it
// where the engine could run but did not start (Docker not installed:
// `make tools` installs it; or dockerd failed).
func needDocker(t *testing.T) {
	t.Helper()
	switch {
	case docker != nil:
	case errors.Is(dockerErr, devagents.ErrNoDocker):
		t.Skipf("needs a Docker engine: %v", dockerErr)
	default:
		t.Fatalf("the kit's Docker engine did not start: %v", dockerErr)
	}
}

// buildImage builds the etcd-nomad image of the binary under test with
// `make image`'s script (tools/image.sh) into the kit's engine, tagged
// tag, and saves it to save (docker save); it returns how long that took.
func buildImage(t *testing.T, tag, save string) time.Duration {
	t.Helper()
	start := time.Now()
	if err := docker.BuildImage(context.Background(), "../tools/image.sh", binary, tag, save); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// dockerSection is installDoc's section on Docker: its second sh block
// is how the job runs.
const dockerSection = "## With Docker"

// container is a member's container as the engine reports it.
type container struct {
	ID, Image, User, Network string
	// PID is the member's process id on the host (in the container it is 1).
	PID int
}

// containerOf inspects the container Nomad runs for allocation alloc
// (named "etcd-<alloc id>"); ok is false when it does not run.
func containerOf(t *testing.T, alloc string) (c container, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := docker.Run(ctx, "inspect", "-f", "{{.Id}} {{.Config.Image}} {{.Config.User}} {{.HostConfig.NetworkMode}} {{.State.Pid}} {{.State.Running}}", "etcd-"+alloc)
	if err != nil {
		return container{}, false
	}
	f := strings.Fields(out)
	if len(f) != 6 || f[5] != "true" {
		return container{}, false
	}
	pid, _ := strconv.Atoi(f[4])
	return container{ID: f[0], Image: f[1], User: f[2], Network: f[3], PID: pid}, pid > 0
}

// TestMembersInDockerContainers: the rendered job with driver
// "docker" on a real Docker engine (the kit's own), from the image `make
// image` builds (tools/image.sh, no registry), shipped as a client without
// a registry gets it (docker save, docker load): docs/install.md's commands run
// literally (validate, job render, nomad job run) and three members in
// containers (host network, user nonroot) pass their checks;
// a kill -9 of a member's container process comes back as the same member,
// and so does a `docker stop` of another's (SIGTERM: a graceful stop);
// a rolling update to a new image tag replaces every allocation one at a
// time and each replacement runs the same member from the data its
// predecessor left on the sticky disk; two allocations stopped together
// keep the quorum (no recovery: the record's epoch stays). A writer with a
// consumer (leased keys, a lock, an election, a watch) runs throughout and
// must lose nothing it was acknowledged. Parallel: its own job, prefix and
// ports, and no bound on the writer's failure windows (only logged).
func TestMembersInDockerContainers(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents and a Docker engine")
	needDocker(t)
	t.Parallel() // disturbs only its own job: see harness_test.go
	const img1, img2 = "etcd-nomad:e2e-docker-1", "etcd-nomad:e2e-docker-2"
	saved := filepath.Join(t.TempDir(), "etcd-nomad-image.tar")
	took := buildImage(t, img1, saved)
	t.Logf("image %s built from the binary under test and saved in %s (tools/image.sh)", img1, took.Round(10*time.Millisecond))
	// A client without a registry: the image only from the saved file.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := docker.Run(ctx, "rmi", img1); err != nil {
		t.Fatal(err)
	}
	if _, err := docker.Run(ctx, "load", "-i", saved); err != nil {
		t.Fatal(err)
	}
	// The next release: the same image under another tag, for the rolling
	// update (what a new `make image` pushes).
	if _, err := docker.Run(ctx, "tag", img1, img2); err != nil {
		t.Fatal(err)
	}

	c := newCluster(t, "e2e-docker", 3)
	c.quota = concurrentQuota
	c.image = img1
	c.writeDefinition(3, "")
	cmds := readmeCommands(t, dockerSection, 1)
	if len(cmds) < 2 || !strings.Contains(strings.Join(cmds, "\n"), "nomad job run") {
		t.Fatalf("%s %q: the job's commands are gone: %q", installDoc, dockerSection, cmds)
	}
	start := time.Now()
	runLines(t, c.dir, operatorEnv(t), cmds, 4*time.Minute)
	c.waitPassing(3, 3*time.Minute)
	t.Logf("%s %q: %q -> 3 members in containers passing their Consul checks in %s", installDoc, dockerSection, cmds, time.Since(start).Round(100*time.Millisecond))
	if spec, err := os.ReadFile(filepath.Join(c.dir, "etcd.nomad.hcl")); err != nil || !strings.Contains(string(spec), `network_mode = "host"`) {
		t.Fatalf("rendered job (%v) without host networking:\n%s", err, spec)
	}
	// The members created the CA's key encryption key (no ACLs): etcd
	// clients need it.
	text, err := jobs.ReadCAKEK(ctx, nomadClient(t), c.name, "")
	if err != nil || text == "" {
		t.Fatalf("no key encryption key in the job's variable: %v", err)
	}
	if c.kek, err = certs.ParseKEK(text); err != nil {
		t.Fatal(err)
	}
	allocs := c.allocs()
	if len(allocs) != 3 {
		t.Fatalf("%d allocations", len(allocs))
	}
	for _, a := range allocs {
		ct, ok := containerOf(t, a.ID)
		if !ok {
			t.Fatalf("allocation %s has no running container etcd-%s", a.ID[:8], a.ID)
		}
		if ct.Image != img1 || ct.Network != "host" || ct.User != "65532:65532" {
			t.Errorf("allocation %s's container: image %s, network %s, user %q; want %s, host, 65532:65532 (the image's nonroot)", a.ID[:8], ct.Image, ct.Network, ct.User, img1)
		}
	}
	// The data is where raw_exec keeps it: the allocation's alloc/data on
	// the client, written by the container's user.
	for _, a := range allocs {
		data := filepath.Join(nomad.AllocDir, a.ID, "alloc", "data")
		ents, err := os.ReadDir(data)
		if err != nil || len(ents) != 1 {
			t.Fatalf("%s: %v %v, want one member directory", data, ents, err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(data, ents[0].Name()), &st); err != nil || st.Uid != 65532 {
			t.Errorf("%s/%s: owner %d (%v), want the image's user 65532", data, ents[0].Name(), st.Uid, err)
		}
	}

	cli := c.client()
	before, err := c.record()
	if err != nil {
		t.Fatal(err)
	}
	_, _, ids, err := memberList(cli)
	if err != nil {
		t.Fatal(err)
	}
	w := clustertest.StartWriter(cli, "docker")
	watch := clustertest.WatchMembership(cli)
	waitFor(t, 30*time.Second, "the writer's first acknowledged puts", func() (bool, string) {
		return w.Acked() >= 10, fmt.Sprintf("%d acknowledged, %d failed", w.Acked(), w.Failed())
	})

	// cameBack waits until the allocation of a member whose container
	// was ct runs it in a new container (Nomad's restart block), all
	// checks passing, with the same members as before: it came back from
	// its data under its old identity. It returns how long that took
	// from since.
	cameBack := func(alloc string, ct container, what string, since time.Time) time.Duration {
		t.Helper()
		waitFor(t, 2*time.Minute, "a new container for the "+what+" member, healthy", func() (bool, string) {
			now, ok := containerOf(t, alloc)
			if !ok || now.ID == ct.ID {
				return false, "the " + what + " container's replacement is not running yet"
			}
			p, total, desc := c.checks()
			return p == 3 && total == 3, fmt.Sprintf("%d/%d passing\n%s", p, total, desc)
		})
		took := time.Since(since)
		waitVoters(t, c, 3, time.Minute)
		if _, _, now, err := memberList(cli); err != nil || fmt.Sprint(keys(now)) != fmt.Sprint(keys(ids)) {
			t.Fatalf("members after the %s container %v (%v), before %v: the member must come back as itself", what, now, err, ids)
		}
		return took
	}

	// kill -9 of the member's process in its container (PID 1 there).
	victim := allocs[1]
	ct, _ := containerOf(t, victim.ID)
	if err := syscall.Kill(ct.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	took = cameBack(victim.ID, ct, "killed", time.Now())
	t.Logf("kill -9 of a member's container process -> restarted, 3 passing in %s", took.Round(100*time.Millisecond))

	// docker stop of another member's container, as an operator or the
	// host's shutdown does it: SIGTERM (the image's stop signal), SIGKILL
	// only after Docker's 10 s. The member stops gracefully without
	// leaving (its allocation still runs) and comes back the same way.
	victim = allocs[2]
	ct, _ = containerOf(t, victim.ID)
	since := time.Now()
	sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
	defer scancel()
	if _, err := docker.Run(sctx, "stop", ct.ID); err != nil {
		t.Fatal(err)
	}
	stopTook := time.Since(since)
	took = cameBack(victim.ID, ct, "stopped", since)
	t.Logf("docker stop of a member's container (stopped in %s) -> restarted, 3 passing in %s; 3 voters, the same members after %s", stopTook.Round(100*time.Millisecond), took.Round(100*time.Millisecond), time.Since(since).Round(100*time.Millisecond))

	// A new image tag rolls out one allocation at a time; each
	// replacement gets its predecessor's sticky disk and runs the same
	// member from that data (no learner joins from empty).
	old := map[string]bool{}
	for _, a := range c.allocs() {
		old[a.ID] = true
	}
	c.image = img2
	c.writeDefinition(3, "")
	rolled := time.Now()
	c.nomadRun("")
	waitFor(t, 5*time.Minute, "every allocation replaced by one running "+img2, func() (bool, string) {
		fresh := 0
		for _, a := range c.allocs() {
			if ct, ok := containerOf(t, a.ID); ok && !old[a.ID] && ct.Image == img2 {
				fresh++
			}
		}
		p, total, _ := c.checks()
		return fresh == 3 && p == 3 && total == 3, fmt.Sprintf("%d of 3 replaced, checks %d/%d", fresh, p, total)
	})
	t.Logf("rolling update to %s -> 3 replaced allocations passing in %s", img2, time.Since(rolled).Round(100*time.Millisecond))
	waitFor(t, time.Minute, "the same three member ids after the update", func() (bool, string) {
		v, l, now, err := memberList(cli)
		return err == nil && v == 3 && l == 0 && fmt.Sprint(keys(now)) == fmt.Sprint(keys(ids)), fmt.Sprintf("%d voters %d learners %v (before %v) %v", v, l, now, ids, err)
	})

	// Two allocations stopped together: each leaving member removes
	// itself in turn (SIGTERM from Nomad through Docker, within
	// kill_timeout) and the survivor keeps the quorum.
	allocs = c.allocs()
	stopped := time.Now()
	stopTogether(t, allocs[0].ID, allocs[1].ID)
	waitFor(t, 3*time.Minute, "two replacements running, 3 voters", func() (bool, string) {
		running := 0
		for _, a := range c.allocs() {
			if a.ID == allocs[0].ID || a.ID == allocs[1].ID {
				return false, "a stopped allocation is still wanted"
			}
			if _, ok := containerOf(t, a.ID); ok {
				running++
			}
		}
		v, l, _, err := memberList(cli)
		return running == 3 && v == 3 && l == 0, fmt.Sprintf("%d containers, %d voters %d learners %v", running, v, l, err)
	})
	c.waitPassing(3, 2*time.Minute)
	t.Logf("two allocations stopped together -> 3 healthy voters in %s", time.Since(stopped).Round(100*time.Millisecond))

	acked, gap := w.Finish()
	maxLearners, minVoters, _ := watch()
	t.Logf("writer: %d acknowledged puts, %d failed twice, longest failure window %s; membership: at most %d learners, at least %d voters",
		len(acked), w.Failed(), gap.Round(time.Millisecond), maxLearners, minVoters)
	if minVoters < 2 {
		t.Errorf("membership fell to %d voters", minVoters)
	}
	clustertest.CheckAcked(t, c.client(), acked)
	w.CheckLeases(t, c.client())
	if after, err := c.record(); err != nil || after.Epoch != before.Epoch || after.Token != before.Token {
		t.Errorf("the record moved from epoch %d to %d (%v): a recovery ran, the quorum was lost", before.Epoch, after.Epoch, err)
	}
}

// keys lists a member map's ids in order, for comparing memberships.
func keys(m map[uint64]string) []uint64 { return slices.Sorted(maps.Keys(m)) }
