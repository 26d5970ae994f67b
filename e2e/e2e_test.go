package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/provider/asg"
)

func putN(t *testing.T, c *cluster, prefix string, n int) {
	t.Helper()
	cli := c.client()
	for i := 0; i < n; i++ {
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err := cli.Put(ctx, fmt.Sprintf("%s/%04d", prefix, i), "v")
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("put %s/%04d: %v", prefix, i, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func countPrefix(t *testing.T, c *cluster, prefix string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.client().Get(ctx, prefix+"/", clientv3WithPrefixCount()...)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

func waitVoters(t *testing.T, c *cluster, want int, timeout time.Duration) {
	t.Helper()
	cli := c.client()
	waitFor(t, timeout, fmt.Sprintf("%d voters and no learner", want), func() (bool, string) {
		v, l, ids, err := memberList(cli)
		return err == nil && v == want && l == 0, fmt.Sprintf("%d voters %d learners %v %v", v, l, ids, err)
	})
}

// Deploy 3 members from the rendered job with `nomad job run`, then kill -9
// one member process, then `nomad alloc stop` one allocation.
func TestDeployKillAndReplace(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	t.Parallel() // disturbs only its own job: see harness_test.go
	c := newCluster(t, "e2e-main", 3)
	c.nomadRun("")
	took := c.waitPassing(3, 3*time.Minute)
	t.Logf("nomad job run -> 3 passing Consul checks in %s", took.Round(100*time.Millisecond))
	putN(t, c, "deploy", 50)
	if n := countPrefix(t, c, "deploy"); n != 50 {
		t.Fatalf("read back %d keys, want 50", n)
	}
	// The cluster CA's key is in Consul only sealed with the job's key
	// encryption key: no value under the cluster's prefix holds it in the
	// clear, and nothing is at the old path kv/ca. (c.status() reads every
	// member's /status with the status CA, without that key.)
	co, err := backends.Coordinator(c.config())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := clusterca.Read(context.Background(), co, c.name, c.kek)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "etcd-nomad-e2e/" + c.name + "/"
	clustertest.NoCAKeyInKV(t, consulClient(t).KV(), prefix, ca.Cert, prefix+"kv/ca")
	_, _, desc := c.checks()
	for _, want := range []string{"role=", "revision=", "db_size="} {
		if !strings.Contains(desc, want) {
			t.Fatalf("Consul check output lacks %q:\n%s", want, desc)
		}
	}

	t.Run("kill -9 a member process", func(t *testing.T) {
		st, err := c.status()
		if err != nil {
			t.Fatal(err)
		}
		victim := st.Members[1]
		if victim.PID == 0 {
			t.Fatalf("no pid in status: %+v", victim)
		}
		if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		waitFor(t, time.Minute, "the killed member to be restarted by Nomad", func() (bool, string) {
			st, err := c.status()
			if err != nil {
				return false, err.Error()
			}
			for _, m := range st.Members {
				if m.Name == victim.Name && m.PID != 0 && m.PID != victim.PID && m.Healthy {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", st.Members)
		})
		c.waitPassing(3, time.Minute)
		t.Logf("kill -9 -> healthy again in %s", time.Since(killed).Round(100*time.Millisecond))
		st, _ = c.status()
		for _, m := range st.Members {
			if m.Name == victim.Name && m.MemberID != victim.MemberID {
				t.Fatalf("member %s came back as %x, want its old id %x", m.Name, m.MemberID, victim.MemberID)
			}
		}
		if n := countPrefix(t, c, "deploy"); n != 50 {
			t.Fatalf("%d keys after the kill, want 50", n)
		}
	})

	t.Run("nomad alloc stop", func(t *testing.T) {
		allocs := c.allocs()
		if len(allocs) != 3 {
			t.Fatalf("%d allocations", len(allocs))
		}
		_, _, before, err := memberList(c.client())
		if err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		out, err := exec.Command(nomadBin, "alloc", "stop", "-detach", "-address", nomad.Addr, allocs[0].ID).CombinedOutput()
		if err != nil {
			t.Fatalf("nomad alloc stop: %v\n%s", err, out)
		}
		// The replacement either takes the sticky disk over (Nomad places it
		// during the group's shutdown_delay, so the stopping member sees it
		// inherit its data and keeps its membership) or, when it does not,
		// joins as a new member after the old one removed itself.
		var ids map[uint64]string
		waitFor(t, 2*time.Minute, "a replacement member", func() (bool, string) {
			running := 0
			for _, a := range c.allocs() {
				if a.ID == allocs[0].ID {
					return false, "the stopped allocation is still wanted"
				}
				if a.ClientStatus == "running" {
					running++
				}
			}
			var v, l int
			var err error
			v, l, ids, err = memberList(c.client())
			if err != nil || v != 3 || l != 0 || running != 3 {
				return false, fmt.Sprintf("%d running allocations, %d voters %d learners %v", running, v, l, err)
			}
			st, err := c.status()
			if err != nil {
				return false, err.Error()
			}
			for _, m := range st.Members {
				if !m.Healthy {
					return false, fmt.Sprintf("%s not healthy yet (%s)", m.Name, m.Reason)
				}
			}
			return len(st.Members) == 3, fmt.Sprintf("%d members in status", len(st.Members))
		})
		c.waitPassing(3, time.Minute)
		how := "joined as a new member"
		same := 0
		for id := range ids {
			if _, old := before[id]; old {
				same++
			}
		}
		if same == 3 {
			how = "took the stopped member's data and identity over"
		}
		t.Logf("alloc stop -> replacement %s, healthy in %s", how, time.Since(stopped).Round(100*time.Millisecond))
		if n := countPrefix(t, c, "deploy"); n != 50 {
			t.Fatalf("%d keys after the replacement, want 50", n)
		}
	})
}

// Group count 3 -> 5 -> 3 via `nomad job run`: membership follows one step
// at a time; a concurrent writer sees no long failure window.
func TestScaleWithNomadJobRun(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	c := newCluster(t, "e2e-scale", 3)
	c.nomadRun("")
	c.waitPassing(3, 3*time.Minute)
	cli := c.client()
	w := clustertest.StartWriter(cli, "scale")
	watch := clustertest.WatchMembership(cli)

	c.writeDefinition(5, "")
	// This step goes through `etcd-nomad job run`, which follows the
	// deployment until every new member passes its check.
	out, err := exec.Command(binary, "job", "run", "-binary", binary, "-timeout", "3m", c.file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "deployment successful") {
		t.Fatalf("etcd-nomad job run: %v\n%s", err, out)
	}
	t.Logf("etcd-nomad job run:\n%s", out)
	c.waitPassing(5, 3*time.Minute)
	waitVoters(t, c, 5, time.Minute)

	c.writeDefinition(3, "")
	c.nomadRun("")
	waitVoters(t, c, 3, 2*time.Minute)
	c.waitPassing(3, 2*time.Minute)

	acked, gap := w.Finish()
	maxLearners, minVoters, _ := watch()
	t.Logf("writer: %d acknowledged puts, longest failure window %s; membership: at most %d learners, at least %d voters", len(acked), gap.Round(time.Millisecond), maxLearners, minVoters)
	if maxLearners > 1 {
		t.Errorf("%d learners at once", maxLearners)
	}
	if minVoters < 3 {
		t.Errorf("membership fell to %d voters", minVoters)
	}
	if gap > 5*time.Second {
		t.Errorf("writes failed for %s in a row; want at most one leader election", gap)
	}
	clustertest.CheckAcked(t, c.client(), acked)
	w.CheckLeases(t, c.client())
}

// A job update (changed env var) rolls one allocation at a time and never
// drops below quorum.
func TestRollingUpdateKeepsQuorum(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	c := newCluster(t, "e2e-roll", 3)
	c.nomadRun("")
	c.waitPassing(3, 3*time.Minute)
	before := map[string]bool{}
	for _, a := range c.allocs() {
		before[a.ID] = true
	}
	cli := c.client()
	_, _, idsBefore, err := memberList(cli)
	if err != nil {
		t.Fatal(err)
	}
	w := clustertest.StartWriter(cli, "roll")
	watch := clustertest.WatchMembership(cli)
	c.nomadRun(`ROLL = "2"`)
	waitFor(t, 5*time.Minute, "every allocation replaced", func() (bool, string) {
		allocs := c.allocs()
		fresh := 0
		for _, a := range allocs {
			if !before[a.ID] && a.ClientStatus == "running" {
				fresh++
			}
		}
		p, total, _ := c.checks()
		return fresh == 3 && len(allocs) == 3 && p == 3 && total == 3, fmt.Sprintf("%d new of %d, checks %d/%d", fresh, len(allocs), p, total)
	})
	acked, gap := w.Finish()
	maxLearners, minVoters, _ := watch()
	t.Logf("rolling update: %d acknowledged puts, longest failure window %s; at most %d learners, at least %d voters", len(acked), gap.Round(time.Millisecond), maxLearners, minVoters)
	if gap > 5*time.Second {
		t.Errorf("writes failed for %s in a row during the update", gap)
	}
	if minVoters < 2 {
		t.Errorf("membership fell to %d voters", minVoters)
	}
	clustertest.CheckAcked(t, c.client(), acked)
	// The consumer's session outlives the update: a client that follows
	// the membership never goes a whole TTL without a keepalive answered.
	if rep := w.CheckLeases(t, c.client()); rep.SessionsLost > 0 || rep.LeasesExpired > 0 {
		t.Errorf("the consumer's session ended during the rolling update: %s; %d leases expired", rep, rep.LeasesExpired)
	}

	// Invariant 6: Nomad moved each old allocation's disk into its
	// replacement; the replacement adopts that data and runs as the same
	// member (no learner joins from empty), and no old directory is
	// carried along.
	waitFor(t, time.Minute, "the same three member ids, each at its new address", func() (bool, string) {
		v, l, ids, err := memberList(c.client())
		if err != nil || v != 3 || l != 0 {
			return false, fmt.Sprintf("%d voters %d learners %v", v, l, err)
		}
		for id := range idsBefore {
			if _, ok := ids[id]; !ok {
				return false, fmt.Sprintf("member ids %v, before the update %v", ids, idsBefore)
			}
		}
		return true, ""
	})
	st, err := c.status()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Members {
		dir := filepath.Dir(allocDataDir(t, m))
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("allocation of member %s carries %d member directories in %s: %v", m.Name, len(ents), dir, names)
		}
	}
}

// concurrentQuota is quota_backend_bytes for clusters that run at once on
// the one Nomad client: a 1.5 GiB sticky disk per member instead of 5 GiB,
// so nine members fit however little disk the dev agent saw free.
const concurrentQuota = "256MiB"

// All 3 allocations start from empty at the same moment: exactly one seeder
// and one cluster id, repeated. The rounds are independent clusters (their
// own job, Consul prefix and ports) and mostly wait on Nomad and Consul, so
// three run at a time.
func TestSimultaneousStartOneSeed(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	rounds := 10
	var names []string
	for r := 0; r < rounds; r++ {
		names = append(names, fmt.Sprintf("round%02d", r))
	}
	clustertest.Concurrently(t, 3, names, func(t *testing.T, r int) {
		c := newCluster(t, fmt.Sprintf("e2e-seed-%02d", r), 3)
		c.quota = concurrentQuota
		c.writeDefinition(3, "")
		c.nomadRun("")
		c.waitPassing(3, 3*time.Minute)
		st, err := c.status()
		if err != nil {
			t.Fatal(err)
		}
		ids := map[uint64]bool{}
		for _, m := range st.Members {
			ids[m.ClusterID] = true
		}
		if len(ids) != 1 {
			t.Fatalf("members report %d cluster ids: %v", len(ids), ids)
		}
		seeds := 0
		for _, a := range c.allocs() {
			seeds += strings.Count(allocLog(a.ID), "state=new")
		}
		if seeds != 1 {
			t.Fatalf("%d members started a new cluster, want 1", seeds)
		}
	})
}

// The rendered job of the shipped example is accepted by `nomad job validate`.
func TestRenderedExampleValidates(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	spec, err := exec.Command(binary, "job", "render", "-binary", binary, "../examples/nomad.hcl").Output()
	if err != nil {
		t.Fatalf("job render: %v", err)
	}
	path := t.TempDir() + "/etcd.nomad.hcl"
	if err := os.WriteFile(path, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(nomadBin, "job", "validate", "-address", nomad.Addr, path).CombinedOutput()
	if err != nil {
		t.Fatalf("nomad job validate: %v\n%s", err, out)
	}
}

// Allocations are mapped to EC2 instances through a node attribute; the
// dev agent has no EC2 attribute, so the resolver is shown the node's
// hostname attribute, and the default attribute's absence is explained.
func TestNodeResolverOnRealNomad(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	nodes, _, err := nomadClient(t).Nodes().List(nil)
	if err != nil || len(nodes) == 0 {
		t.Fatalf("nodes %v %v", nodes, err)
	}
	r := &asg.NomadNodes{Client: nomadClient(t), Attribute: "unique.hostname"}
	id, err := r.InstanceOfNode(context.Background(), nodes[0].ID)
	if err != nil || id == "" {
		t.Fatalf("resolve %s: %q %v", nodes[0].ID, id, err)
	}
	_, err = (&asg.NomadNodes{Client: nomadClient(t)}).InstanceOfNode(context.Background(), nodes[0].ID)
	if err == nil || !strings.Contains(err.Error(), "env_aws") {
		t.Fatalf("want an error explaining the missing EC2 attribute, got %v", err)
	}
}

// TestTwoAllocsStoppedTogetherKeepQuorum (safety issue, finding 13): two
// of three allocations stopped within a second of each other. Each leaving
// member hands leadership away and retries its own removal under the lock
// until etcd's strict reconfiguration accepts it, one after the other, so
// the survivor never sits in a stale three-voter membership without a
// quorum. A writer runs throughout: its longest run of failed writes must
// stay under a few seconds (before the fix: recovery_grace, 5 minutes).
func TestTwoAllocsStoppedTogetherKeepQuorum(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	c := newCluster(t, "e2e-leave", 3)
	c.nomadRun("")
	c.waitPassing(3, 3*time.Minute)
	cli := c.client()
	allocs := c.allocs()
	if len(allocs) != 3 {
		t.Fatalf("%d allocations", len(allocs))
	}
	before, _ := c.record()

	var (
		mu            sync.Mutex
		failingSince  time.Time
		longestOutage time.Duration
		puts, fails   int
		stop          = make(chan struct{})
		writerDone    = make(chan struct{})
	)
	go func() {
		defer close(writerDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := cli.Put(ctx, fmt.Sprintf("leave/%06d", i), "v")
			cancel()
			now := time.Now()
			mu.Lock()
			if err != nil {
				fails++
				if failingSince.IsZero() {
					failingSince = now
				}
			} else {
				puts++
				if !failingSince.IsZero() {
					longestOutage = max(longestOutage, now.Sub(failingSince))
					failingSince = time.Time{}
				}
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // pace the writer, not a wait for a state
		}
	}()
	// The writer must be writing before the fault.
	waitFor(t, 30*time.Second, "the writer's first acknowledged puts", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return puts >= 10, fmt.Sprintf("%d puts, %d failures", puts, fails)
	})

	stopped := time.Now()
	stopTogether(t, allocs[0].ID, allocs[1].ID)
	waitFor(t, 3*time.Minute, "two replacements joined and promoted", func() (bool, string) {
		v, l, ids, err := memberList(cli)
		if err != nil || v != 3 || l != 0 {
			return false, fmt.Sprintf("%d voters %d learners %v", v, l, err)
		}
		return true, fmt.Sprint(ids)
	})
	c.waitPassing(3, time.Minute)
	close(stop)
	<-writerDone
	mu.Lock()
	defer mu.Unlock()
	if !failingSince.IsZero() {
		longestOutage = max(longestOutage, time.Since(failingSince))
	}
	t.Logf("two allocations stopped together -> 3 healthy voters in %s; writer: %d puts, %d failed, longest run of failures %s",
		time.Since(stopped).Round(100*time.Millisecond), puts, fails, longestOutage.Round(10*time.Millisecond))
	if longestOutage > 3*time.Second {
		t.Fatalf("writes failed for %s in a row: the survivor lost its quorum (a leaving member gave up its removal)", longestOutage)
	}
	after, _ := c.record()
	if after.Epoch != before.Epoch || after.Token != before.Token {
		t.Fatalf("the record moved from epoch %d to %d: a recovery ran, quorum was lost", before.Epoch, after.Epoch)
	}
}

// stopTogether runs `nomad alloc stop` on the allocations ids at once.
func stopTogether(t *testing.T, ids ...string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := exec.Command(nomadBin, "alloc", "stop", "-detach", "-address", nomad.Addr, id).CombinedOutput(); err != nil {
				t.Errorf("nomad alloc stop %s: %v\n%s", id, err, out)
			}
		}()
	}
	wg.Wait()
}
