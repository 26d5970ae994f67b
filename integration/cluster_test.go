package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/localmode"
)

// (a) Three members started at the same moment bootstrap exactly one
// cluster with one seed, repeated. Each round is a cluster of its own
// (directory, local coordinator, ports), so four run at a time.
func TestSimultaneousStartSeedsOnce(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	rounds := 20
	var names []string
	for r := 0; r < rounds; r++ {
		names = append(names, fmt.Sprintf("round%02d", r))
	}
	clustertest.Concurrently(t, 4, names, func(t *testing.T, _ int) {
		tc := newCluster(t, t.TempDir(), 3, 5*time.Second)
		tc.startAll()
		tc.waitHealthy(60 * time.Second)
		st, rec := tc.waitConfirmed(30 * time.Second)
		// Members, not starts: a seeder retries its start (its port
		// taken a moment by another process: "bind: address already in
		// use", 17 retries in one CI run) and logs each try.
		seeds := 0
		for i := 0; i < 3; i++ {
			if strings.Contains(logOf(t, tc.lay, localmode.MemberName(i)), "state=new") {
				seeds++
			}
		}
		if seeds != 1 {
			t.Fatalf("%d members started a new cluster, want exactly 1", seeds)
		}
		for _, m := range st.Members {
			if m.ClusterID != rec.ClusterID || m.Epoch != rec.Epoch {
				t.Fatalf("member %s reports cluster %x epoch %d, record says %x epoch %d", m.Name, m.ClusterID, m.Epoch, rec.ClusterID, rec.Epoch)
			}
		}
		if rec.ClusterID == 0 || rec.Epoch != 1 {
			t.Fatalf("record not confirmed: %+v", rec)
		}
	})
}

// (b) kill -9 one member; it is restarted, rejoins with its data and keeps
// its member id.
func TestKilledMemberRejoinsWithItsData(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	t.Parallel() // its own directory and ports: see harness_test.go
	tc := newCluster(t, t.TempDir(), 3, 5*time.Second)
	tc.startAll()
	st := tc.waitHealthy(60 * time.Second)
	cli := tc.client()
	putKeys(t, cli, "before", 100)
	oldID := st.Members[1].MemberID
	if err := tc.sup.Kill("m1", syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "m1 restarted", func() (bool, string) {
		return tc.sup.Restarts("m1") == 1 && tc.sup.PID("m1") != 0, fmt.Sprintf("restarts %d", tc.sup.Restarts("m1"))
	})
	putKeys(t, cli, "during", 50)
	st = tc.waitHealthy(60 * time.Second)
	if st.Members[1].MemberID != oldID {
		t.Fatalf("m1 came back as %x, want its old id %x", st.Members[1].MemberID, oldID)
	}
	if !strings.Contains(logOf(t, tc.lay, "m1"), "kind=rejoin") {
		t.Fatal("m1 did not rejoin with its data")
	}
	checkKeys(t, cli, "before", 100)
	checkKeys(t, cli, "during", 50)
	voters, learners, _, err := memberList(cli)
	if err != nil || voters != 3 || learners != 0 {
		t.Fatalf("membership: %d voters %d learners (%v)", voters, learners, err)
	}
}

// (c) Wipe one member's data dir: the old member is removed, a learner is
// added and promoted, 3 voters again, no key lost.
func TestWipedMemberIsReplaced(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	t.Parallel() // its own directory and ports: see harness_test.go
	tc := newCluster(t, t.TempDir(), 3, 5*time.Second)
	tc.startAll()
	st := tc.waitHealthy(60 * time.Second)
	cli := tc.client()
	putKeys(t, cli, "k", 200)
	oldID := st.Members[2].MemberID
	if err := tc.sup.Stop("m2", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(tc.lay.DataDir(), "m2", "current")); err != nil {
		t.Fatal(err)
	}
	if err := tc.sup.Start("m2"); err != nil {
		t.Fatal(err)
	}
	st = tc.waitHealthy(90 * time.Second)
	newID := st.Members[2].MemberID
	if newID == oldID || newID == 0 {
		t.Fatalf("m2 id %x, want a new id (old %x)", newID, oldID)
	}
	voters, learners, names, err := memberList(cli)
	if err != nil || voters != 3 || learners != 0 || names["m2"] != newID {
		t.Fatalf("membership: %d voters %d learners %v (%v)", voters, learners, names, err)
	}
	log := logOf(t, tc.lay, "m2")
	for _, want := range []string{"kind=remove-member", "added as learner", "promoted to voter"} {
		if !strings.Contains(log, want) {
			t.Errorf("m2's log lacks %q", want)
		}
	}
	checkKeys(t, cli, "k", 200)
}

// (d) Size 3 → 5 → 3: one membership change at a time, never below
// quorum, no key lost.
func TestScaleUpAndDown(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	t.Parallel() // its own directory and ports: see harness_test.go
	tc := newCluster(t, t.TempDir(), 3, 2*time.Second)
	tc.startAll()
	tc.waitHealthy(60 * time.Second)
	cli := tc.client()
	putKeys(t, cli, "k", 100)

	// Watch the membership throughout.
	watch := clustertest.WatchMembership(cli)

	more, err := localmode.AllocatePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	tc.ports = append(tc.ports, more...)
	if err := tc.lay.WriteConfig(tc.opts, tc.ports); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"m3", "m4"} {
		if err := tc.sup.Start(n); err != nil {
			t.Fatal(err)
		}
	}
	tc.waitHealthy(90 * time.Second)
	waitFor(t, 30*time.Second, "5 voters", func() (bool, string) {
		v, l, _, err := memberList(cli)
		return v == 5 && l == 0, fmt.Sprintf("%d voters %d learners %v", v, l, err)
	})
	putKeys(t, cli, "k5", 50)

	tc.ports = tc.ports[:3]
	if err := tc.lay.WriteConfig(tc.opts, tc.ports); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "3 voters", func() (bool, string) {
		v, l, names, err := memberList(cli)
		_, has3 := names["m3"]
		_, has4 := names["m4"]
		return v == 3 && l == 0 && !has3 && !has4, fmt.Sprintf("%d voters %d learners %v %v", v, l, names, err)
	})
	for _, n := range []string{"m3", "m4"} {
		if err := tc.sup.Stop(n, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	tc.waitHealthy(30 * time.Second)
	maxLearners, minVoters, samples := watch()
	if samples < 20 {
		t.Fatalf("membership observed only %d times", samples)
	}
	if maxLearners > 1 {
		t.Errorf("%d learners at once", maxLearners)
	}
	if minVoters < 3 {
		t.Errorf("%d voters, below the smallest size 3", minVoters)
	}
	checkKeys(t, cli, "k", 100)
	checkKeys(t, cli, "k5", 50)
}

// (e) A data dir from another cluster is moved aside, not deleted, and
// never started: one from a cluster of another name at first boot, one from
// an earlier incarnation of the same name (other token) later.
func TestForeignDataIsSetAside(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	t.Parallel() // its own directory and ports: see harness_test.go
	foreign := func(name string) string {
		other := newCluster(t, filepath.Join(t.TempDir(), name), 1, 5*time.Second)
		other.opts.Name = name
		if err := other.lay.WriteConfig(other.opts, other.ports); err != nil {
			t.Fatal(err)
		}
		other.startAll()
		other.waitHealthy(60 * time.Second)
		putKeys(t, other.client(), "foreign", 10)
		if err := other.sup.StopAll(20 * time.Second); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(other.lay.DataDir(), "m0", "current")
	}
	otherName := foreign("other")
	sameName := foreign("test")

	tc := newCluster(t, filepath.Join(t.TempDir(), "main"), 3, 5*time.Second)
	plant := func(member, src string) []byte {
		dst := filepath.Join(tc.lay.DataDir(), member)
		if err := os.MkdirAll(dst, 0o700); err != nil {
			t.Fatal(err)
		}
		meta, err := os.ReadFile(filepath.Join(src, "etcd-nomad.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(src, filepath.Join(dst, "current")); err != nil {
			t.Fatal(err)
		}
		return meta
	}
	checkAside := func(member string, meta []byte, reason string) {
		t.Helper()
		dst := filepath.Join(tc.lay.DataDir(), member)
		aside, _ := filepath.Glob(filepath.Join(dst, "aside", "*-foreign"))
		if len(aside) != 1 {
			t.Fatalf("%s: want one set-aside dir, got %v", member, aside)
		}
		kept, err := os.ReadFile(filepath.Join(aside[0], "etcd-nomad.json"))
		if err != nil || string(kept) != string(meta) {
			t.Fatalf("%s: set-aside metadata changed or lost: %v", member, err)
		}
		if _, err := os.Stat(filepath.Join(aside[0], "etcd", "member", "snap", "db")); err != nil {
			t.Fatalf("%s: set-aside etcd data lost: %v", member, err)
		}
		log := logOf(t, tc.lay, member)
		setAside := strings.LastIndex(log, "data dir set aside")
		if setAside < 0 || !strings.Contains(log[setAside:], reason) {
			t.Fatalf("%s: no set-aside with reason %q", member, reason)
		}
		if strings.Contains(log, "kind=rejoin") {
			t.Fatalf("%s rejoined with foreign data", member)
		}
	}

	m1Meta := plant("m1", otherName)
	tc.startAll()
	tc.waitHealthy(90 * time.Second)
	st, rec := tc.waitConfirmed(30 * time.Second)
	if st.Members[1].ClusterID != rec.ClusterID {
		t.Fatalf("m1 runs cluster %x, want %x", st.Members[1].ClusterID, rec.ClusterID)
	}
	checkAside("m1", m1Meta, `belongs to cluster \"other\"`)
	log := logOf(t, tc.lay, "m1")
	if first := strings.Index(log, "starting etcd"); first < strings.Index(log, "data dir set aside") {
		t.Fatal("m1 started etcd before setting the foreign data aside")
	}

	cli := tc.client()
	putKeys(t, cli, "main", 20)
	if err := tc.sup.Stop("m2", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(tc.lay.DataDir(), "m2", "current"), filepath.Join(t.TempDir(), "m2-own")); err != nil {
		t.Fatal(err)
	}
	m2Meta := plant("m2", sameName)
	if err := tc.sup.Start("m2"); err != nil {
		t.Fatal(err)
	}
	tc.waitHealthy(90 * time.Second)
	checkAside("m2", m2Meta, "belongs to cluster token")
	checkKeys(t, cli, "main", 20)
	checkKeys(t, cli, "foreign", 0)
}

// A member's open file descriptors stay flat while it runs: its loop
// reuses its connections to peers. (It once made a new HTTP client every
// second and left two connections open each time, which would have run a
// long-lived member out of file descriptors.)
func TestMemberConnectionsDoNotGrow(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	tc := newCluster(t, t.TempDir(), 3, 5*time.Second)
	tc.startAll()
	st := tc.waitHealthy(60 * time.Second)
	m := st.Members[0]
	fds := func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", m.PID))
		if err != nil {
			t.Fatalf("open files of %s (pid %d): %v", m.Name, m.PID, err)
		}
		return len(ents)
	}
	before := fds()
	start, err := time.Parse(time.RFC3339Nano, m.Time)
	if err != nil {
		t.Fatalf("status time %q: %v", m.Time, err)
	}
	// At least 15 more loops (one a second) of the member.
	waitFor(t, time.Minute, "15 more loops of "+m.Name, func() (bool, string) {
		st, err := tc.status()
		if err != nil {
			return false, err.Error()
		}
		for _, s := range st.Members {
			if s.Name == m.Name {
				now, err := time.Parse(time.RFC3339Nano, s.Time)
				return err == nil && now.Sub(start) >= 15*time.Second, s.Time
			}
		}
		return false, "not listed"
	})
	if after := fds(); after-before > 8 {
		t.Fatalf("member %s went from %d to %d open files over 15 loops: connections leak", m.Name, before, after)
	}
}
