package integration_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/localmode"
)

func cli(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("etcd-nomad %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// snapshot save / list / verify on a running cluster, then restore on one
// stopped member: a new epoch whose data is the snapshot's, revisions
// bumped, and the other members setting their data aside and joining.
func TestSnapshotSaveAndRestore(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	t.Parallel() // its own directory and ports: see harness_test.go
	dir := t.TempDir()
	tc := newCluster(t, dir, 3, 5*time.Second)
	tc.opts.SnapshotDir = filepath.Join(dir, "snapshots")
	if err := tc.lay.WriteConfig(tc.opts, tc.ports); err != nil {
		t.Fatal(err)
	}
	tc.startAll()
	tc.waitHealthy(60 * time.Second)
	c := tc.client()
	putKeys(t, c, "before", 100)
	cfg := tc.lay.Config()

	out := cli(t, "snapshot", "save", "-config", cfg)
	// Members also snapshot on their own (scheduled, before a removal):
	// name ours explicitly.
	i := strings.Index(out, "saved ")
	if i < 0 {
		t.Fatalf("save: %s", out)
	}
	name := strings.TrimSuffix(strings.Fields(out[i+len("saved "):])[0], ":")
	if out := cli(t, "snapshot", "list", "-config", cfg); !strings.Contains(out, name) {
		t.Fatalf("list lacks %s: %s", name, out)
	}
	for _, n := range []string{name, "latest"} {
		if out := cli(t, "snapshot", "verify", "-config", cfg, n); !strings.Contains(out, ": OK") {
			t.Fatalf("verify %s: %s", n, out)
		}
	}
	putKeys(t, c, "after", 50)
	before := tc.record()

	if err := tc.sup.Stop("m0", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	out = cli(t, "snapshot", "restore", "-config", cfg, "-member", "m0", name)
	if !strings.Contains(out, "as epoch 2") {
		t.Fatalf("restore: %s", out)
	}
	if err := tc.sup.Start("m0"); err != nil {
		t.Fatal(err)
	}
	tc.waitHealthy(120 * time.Second)
	// The seeder confirms the new cluster id in the record shortly after.
	waitFor(t, 30*time.Second, "every member on the recorded epoch and cluster", func() (bool, string) {
		st, err := tc.status()
		if err != nil {
			return false, err.Error()
		}
		rec := tc.record()
		for _, m := range st.Members {
			if m.Epoch != rec.Epoch || m.ClusterID != rec.ClusterID || rec.ClusterID == 0 {
				return false, fmt.Sprintf("member %s on epoch %d cluster %x, record epoch %d cluster %x", m.Name, m.Epoch, m.ClusterID, rec.Epoch, rec.ClusterID)
			}
		}
		return true, ""
	})
	rec := tc.record()
	if rec.Epoch != before.Epoch+1 || rec.Token == before.Token {
		t.Fatalf("record after restore %+v, before %+v", rec, before)
	}
	c2 := tc.client()
	checkKeys(t, c2, "before", 100)
	checkKeys(t, c2, "after", 0)
	waitFor(t, 30*time.Second, "3 voters", func() (bool, string) {
		v, l, names, err := memberList(c2)
		return v == 3 && l == 0, strings.TrimSpace(strings.Join([]string{itoa(v), itoa(l)}, " ")) + " " + names2(names) + " " + errs(err)
	})
	for _, m := range []string{"m1", "m2"} {
		if aside, _ := filepath.Glob(filepath.Join(tc.lay.DataDir(), m, "aside", "*")); len(aside) != 1 {
			t.Fatalf("%s: old incarnation not set aside: %v", m, aside)
		}
	}
}

// Scheduled snapshots: one upload per interval for the whole cluster (each
// member runs the schedule; only one saves), retention keeps 5, and no
// joiner saves one before adding itself.
func TestScheduledSnapshots(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	dir := t.TempDir()
	tc := newCluster(t, dir, 3, 2*time.Second)
	tc.opts.SnapshotDir = filepath.Join(dir, "snapshots")
	tc.opts.SnapshotInterval = 3 * time.Second
	if err := tc.lay.WriteConfig(tc.opts, tc.ports); err != nil {
		t.Fatal(err)
	}
	tc.startAll()
	tc.waitHealthy(60 * time.Second)
	putKeys(t, tc.client(), "k", 20)
	var scheduled []time.Time
	waitFor(t, 60*time.Second, "5 scheduled snapshots", func() (bool, string) {
		scheduled = scheduled[:0]
		for _, l := range strings.Split(strings.Join(logs(t, tc), "\n"), "\n") {
			if strings.Contains(l, "snapshot saved") && strings.Contains(l, "why=scheduled") {
				if ts, err := time.Parse(time.RFC3339Nano, strings.Fields(l)[0]); err == nil {
					scheduled = append(scheduled, ts)
				}
			}
		}
		return len(scheduled) >= 5, fmt.Sprint(scheduled)
	})
	sort.Slice(scheduled, func(i, j int) bool { return scheduled[i].Before(scheduled[j]) })
	for i := 1; i < len(scheduled); i++ {
		if gap := scheduled[i].Sub(scheduled[i-1]); gap < 2500*time.Millisecond {
			t.Fatalf("two scheduled snapshots %s apart with a 3s interval: duplicates (%v)", gap, scheduled)
		}
	}
	out := cli(t, "snapshot", "list", "-config", tc.lay.Config())
	if n := strings.Count(out, ".snap.zst"); n != 5 {
		t.Fatalf("retention keeps %d snapshots, want 5:\n%s", n, out)
	}
	// A joiner takes no backup before it adds itself (it would spool a
	// third copy of the database beside the one it receives, and the lock
	// was held through the upload); the backup before a removal runs in
	// the background (task TestRemovalDoesNotWaitForItsBackup).
	if strings.Contains(strings.Join(logs(t, tc), ""), `why="before adding a learner"`) {
		t.Fatal("a joiner saved a snapshot before adding itself")
	}
}

func logs(t *testing.T, tc *testCluster) []string {
	var out []string
	for i := range tc.ports {
		out = append(out, logOf(t, tc.lay, localmode.MemberName(i)))
	}
	return out
}
