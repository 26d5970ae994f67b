package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// allocDataDir is where a running member keeps its data: the data_dir
// default ${NOMAD_ALLOC_DIR}/data, in the directory named after its
// allocation (data adopted from a previous allocation is moved there; the
// member's own name stays the one persisted in it), read from the
// process's own environment.
func allocDataDir(t *testing.T, m status.Member) string {
	t.Helper()
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", m.PID))
	if err != nil {
		t.Fatalf("environment of member %s (pid %d): %v", m.Name, m.PID, err)
	}
	vars := map[string]string{}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			vars[k] = v
		}
	}
	dir, alloc, group := vars["NOMAD_ALLOC_DIR"], vars["NOMAD_ALLOC_ID"], vars["NOMAD_GROUP_NAME"]
	if dir == "" || alloc == "" || group == "" {
		t.Fatalf("member %s (pid %d) lacks NOMAD_ALLOC_DIR, NOMAD_ALLOC_ID or NOMAD_GROUP_NAME", m.Name, m.PID)
	}
	return filepath.Join(dir, "data", nomadglue.MemberName(group, alloc))
}

// statusEveryPID polls the cluster's status until every member's /status
// answered (its PID is known: loseMembers stops and kills it by PID). A
// member healed a moment ago may not answer the first gather (CI run
// 20261127T125126Z, load 34: "no pid for member" in round 7).
func statusEveryPID(t *testing.T, c *cluster, within time.Duration) status.Cluster {
	t.Helper()
	var (
		st  status.Cluster
		err error
	)
	deadline := time.Now().Add(within)
	for {
		st, err = c.status()
		missing := ""
		for _, m := range st.Members {
			if m.PID == 0 {
				missing = m.Name
			}
		}
		if err == nil && missing == "" && len(st.Members) > 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: status error %v; member %q did not answer /status (no PID)", within, err, missing)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// loseMembers takes members away for good, as lost hosts: each process is
// frozen, its data dir is moved out of the allocation, then it is killed.
// Nomad restarts the tasks in place, with empty data dirs.
func loseMembers(t *testing.T, members ...status.Member) {
	t.Helper()
	dirs := make([]string, len(members))
	for i, m := range members {
		if m.PID == 0 {
			t.Fatalf("no pid for member %s", m.Name)
		}
		dirs[i] = allocDataDir(t, m)
		if err := syscall.Kill(m.PID, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range members {
		if err := os.Rename(dirs[i], filepath.Join(t.TempDir(), m.Name)); err != nil {
			t.Fatalf("move data of %s away: %v", m.Name, err)
		}
	}
	for _, m := range members {
		if err := syscall.Kill(m.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
}

// revision reads the cluster's current revision.
func revision(t *testing.T, c *cluster) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.client().Get(ctx, "revision-probe")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// Two of three allocations lose their members for good (process and data):
// after recovery_grace the survivor seeds the next epoch from its own data
// with ForceNewCluster, the empty members join as learners and are
// promoted, and no acknowledged write is lost.
func TestQuorumLossTwoMembersLost(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	t.Parallel() // disturbs only its own job: see harness_test.go
	c := newCluster(t, "e2e-qloss", 3)
	c.extra = `  recovery_grace = "3s"`
	c.writeDefinition(3, "")
	c.nomadRun("")
	c.waitPassing(3, 3*time.Minute)
	_, before := clustertest.WaitOnRecord(t, time.Minute, 0, true, c.recorded)
	putN(t, c, "acked", 200)
	w := clustertest.StartWriter(c.client(), "writer")

	st, err := c.status()
	if err != nil {
		t.Fatal(err)
	}
	survivor := st.Members[0]
	loseMembers(t, st.Members[1], st.Members[2])
	lost := time.Now()

	waitFor(t, 2*time.Minute, "writable again", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.client().Put(ctx, "probe", "x")
		return err == nil, fmt.Sprint(err)
	})
	writable := time.Since(lost)
	_, rec := clustertest.WaitOnRecord(t, 3*time.Minute, before.Epoch+1, true, c.recorded)
	waitVoters(t, c, 3, 2*time.Minute)
	healed := time.Since(lost)
	acked, gap := w.Finish()
	t.Logf("2 of 3 members lost -> writable in %s, 3 healthy voters in %s; writer's longest failure window %s",
		writable.Round(100*time.Millisecond), healed.Round(100*time.Millisecond), gap.Round(time.Millisecond))

	if rec.Epoch != before.Epoch+1 || rec.Source != "data" || rec.Seeder != survivor.Name {
		t.Fatalf("record after recovery %+v, want epoch %d from the data of %s", rec, before.Epoch+1, survivor.Name)
	}
	// ForceNewCluster rewrites the membership but keeps etcd's cluster id:
	// clients of the old incarnation carry on.
	if rec.ClusterID != before.ClusterID {
		t.Fatalf("recovery from data changed the cluster id from %x to %x", before.ClusterID, rec.ClusterID)
	}
	if n := countPrefix(t, c, "acked"); n != 200 {
		t.Fatalf("%d of 200 acknowledged keys after recovery", n)
	}
	clustertest.CheckAcked(t, c.client(), acked)
	w.CheckLeases(t, c.client())
}

// s3Cluster is a 3-member cluster (recovery_grace 3s) backed up to a real S3
// server (versitygw): one full snapshot at once (interval 1h), then delta
// segments every second, encrypted to an X25519 recipient (a passphrase
// would need scrypt's 256 MiB per snapshot).
type s3Cluster struct {
	*cluster
	// store reads the backups straight from the S3 server.
	store snapshot.Store
	// before is the record of the running incarnation, full its first full
	// snapshot.
	before coord.Record
	full   snapshot.Meta
}

// startS3Cluster starts the S3 server (stopped when the test ends) and the
// cluster, whose members reach the store at endpoint(the server's address):
// the address itself, or a proxy in front of it. It returns once the three
// members pass their checks and a full snapshot of the running incarnation
// is stored.
func startS3Cluster(t *testing.T, name string, endpoint func(s3Addr string) string) *s3Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s3, err := devagents.StartS3(ctx, t.TempDir(), "etcd-e2e-backups")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s3.Stop(10 * time.Second) })
	clustertest.AWSEnv(t, devagents.S3AccessKey, devagents.S3SecretKey)
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(t.TempDir(), "identity.txt")
	if err := os.WriteFile(idFile, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	c := newCluster(t, name, 3)
	c.extra = fmt.Sprintf(`  recovery_grace = "3s"
  snapshot {
    interval       = "1h" # one full snapshot, at once; everything after it comes from deltas
    delta_interval = "1s"
    retain_count   = 1000 # the snapshot recovered from must still be listed when the test reads it
    store "s3" {
      bucket     = "etcd-e2e-backups"
      endpoint   = %q
      region     = "us-east-1"
      path_style = true
    }
    encryption {
      recipients    = [%q]
      identity_file = %q
    }
  }`, endpoint(s3.Addr), id.Recipient().String(), idFile)
	c.writeDefinition(3, "")
	c.nomadRun(strings.Join([]string{
		`AWS_ACCESS_KEY_ID = "` + devagents.S3AccessKey + `"`,
		`AWS_SECRET_ACCESS_KEY = "` + devagents.S3SecretKey + `"`,
	}, "\n        "))
	c.waitPassing(3, 3*time.Minute)
	s := &s3Cluster{cluster: c}
	_, s.before = clustertest.WaitOnRecord(t, time.Minute, 0, true, c.recorded)
	direct := c.config()
	direct.Snapshot.Endpoint = s3.Addr
	if s.store, err = backends.Store(ctx, direct); err != nil {
		t.Fatal(err)
	}
	// A snapshot taken before the record named the cluster id is no base
	// for a chain: the leader takes one of the confirmed incarnation.
	waitFor(t, time.Minute, "a full snapshot of the running incarnation", func() (bool, string) {
		list, err := s.store.List(context.Background())
		var ok bool
		s.full, _, _, ok = snapshot.Newest(list)
		return ok && err == nil && s.full.ClusterID == fmt.Sprintf("%x", s.before.ClusterID), fmt.Sprint(len(list), s.full.Name, s.full.ClusterID, err)
	})
	return s
}

// waitDeltas waits until the delta segments after the first full snapshot
// reach revision rev.
func (s *s3Cluster) waitDeltas(t *testing.T, rev int64) {
	t.Helper()
	waitFor(t, time.Minute, fmt.Sprintf("deltas up to revision %d", rev), func() (bool, string) {
		list, err := s.store.List(context.Background())
		newest, chain, end, _ := snapshot.Newest(list)
		return newest.Name == s.full.Name && end >= rev, fmt.Sprintf("%d deltas after %s to revision %d (%v)", len(chain), newest.Name, end, err)
	})
}

// restoredFrom checks that rec, the record after a loss of every data dir,
// is the next epoch restored from the first full snapshot, older than the
// revision written after it (replayed from its deltas), and returns that
// snapshot's metadata.
func (s *s3Cluster) restoredFrom(t *testing.T, rec coord.Record, written int64) snapshot.Meta {
	t.Helper()
	name, ok := strings.CutPrefix(string(rec.Source), "snapshot:")
	if rec.Epoch != s.before.Epoch+1 || !ok {
		t.Fatalf("record after recovery %+v, want epoch %d from a snapshot", rec, s.before.Epoch+1)
	}
	list, err := s.store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list {
		if m.Name != name {
			continue
		}
		if m.Name != s.full.Name || m.Revision >= written {
			t.Fatalf("recovered from %s at revision %d; want the first full snapshot %s, older than the %d written after it", name, m.Revision, s.full.Name, written)
		}
		return m
	}
	t.Fatalf("snapshot %s named by the record is not in the store", name)
	return snapshot.Meta{}
}

// Every member loses its data at once: after recovery_grace one member
// restores the newest S3 snapshot (fetched, decrypted, verified) with a
// revision bump and replays the delta segments recorded after it
// (continuous backup); the others join. Every key acknowledged up to the
// last flushed delta is there, though the full snapshot is older than all
// of them, and the revision never goes backwards.
func TestAllDataLostRecoverFromS3(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	s := startS3Cluster(t, "e2e-s3dr", func(addr string) string { return addr })
	c := s.cluster
	w := clustertest.StartWriter(c.client(), "acked")
	putN(t, c, "snap", 100)
	acked, _ := w.Finish()
	written := revision(t, c)
	s.waitDeltas(t, written)

	st, err := c.status()
	if err != nil {
		t.Fatal(err)
	}
	loseMembers(t, st.Members...)
	lost := time.Now()
	_, rec := clustertest.WaitOnRecord(t, 3*time.Minute, s.before.Epoch+1, true, c.recorded)
	waitVoters(t, c, 3, 2*time.Minute)
	t.Logf("all data lost -> recovered from S3, 3 healthy voters in %s", time.Since(lost).Round(100*time.Millisecond))

	used := s.restoredFrom(t, rec, written)
	if n := countPrefix(t, c, "snap"); n != 100 {
		t.Fatalf("%d of the 100 keys written after snapshot %s (replayed from its deltas)", n, used.Name)
	}
	clustertest.CheckAcked(t, c.client(), acked)
	w.CheckLeases(t, c.client())
	if now := revision(t, c); now < used.Revision {
		t.Fatalf("revision went backwards: %d after restoring a snapshot at %d", now, used.Revision)
	}
}

// clusterIDs samples every member's (epoch, cluster id) until stop is
// called (at the latest when the test ends), which returns each epoch's
// cluster ids as seen by members.
func clusterIDs(t *testing.T, c *cluster) (stop func() map[uint64]map[uint64][]string) {
	bc, err := backends.OpenClient(c.config())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	seen := map[uint64]map[uint64][]string{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			st, err := status.Gather(ctx, bc)
			cancel()
			if err != nil {
				continue
			}
			for _, m := range st.Members {
				if m.ClusterID == 0 {
					continue
				}
				if seen[m.Epoch] == nil {
					seen[m.Epoch] = map[uint64][]string{}
				}
				if ids := seen[m.Epoch][m.ClusterID]; len(ids) == 0 || ids[len(ids)-1] != m.Name {
					seen[m.Epoch][m.ClusterID] = append(ids, m.Name)
				}
			}
		}
	}()
	var once sync.Once
	stop = func() map[uint64]map[uint64][]string {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
		return seen
	}
	t.Cleanup(func() { stop() })
	return stop
}

// The member carrying out a quorum-loss recovery (it holds the lock) is
// killed in the middle of it, round after round: before it records the
// next epoch, just after, or while it restarts etcd with ForceNewCluster.
// Each time Nomad restarts it, it resumes, exactly one new epoch is
// recorded, members never report two cluster ids for one epoch, and no
// acknowledged key is lost.
//
// A round mostly waits (the killed holder's Consul session must expire, up
// to twice its 15 s TTL, then recovery_grace), so the rounds are shared out
// over three clusters that run at once, each a run of consecutive rounds
// (every kill point, r%3, comes up on each) with every check of the
// sequential test on its own record, members and keys.
func TestRecoveryLockHolderKilled(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	t.Parallel() // disturbs only its own job: see harness_test.go
	rounds := 10
	if v := os.Getenv("E2E_RECOVERY_ROUNDS"); v != "" {
		fmt.Sscan(v, &rounds)
	}
	seed := time.Now().UnixNano()
	if v := os.Getenv("E2E_RECOVERY_SEED"); v != "" {
		fmt.Sscan(v, &seed)
	}
	clusters := min(3, rounds)
	t.Logf("%d rounds on %d clusters, seed %d (cluster k draws from seed+k; replay with E2E_RECOVERY_SEED=%d)", rounds, clusters, seed, seed)
	var names []string
	var from []int
	for k := 0; k < clusters; k++ {
		names = append(names, fmt.Sprintf("cluster%d", k))
		from = append(from, k*rounds/clusters)
	}
	from = append(from, rounds)
	clustertest.Concurrently(t, clusters, names, func(t *testing.T, k int) {
		killLockHolders(t, fmt.Sprintf("e2e-rkill-%d", k), from[k], from[k+1], rand.New(rand.NewSource(seed+int64(k))))
	})
}

// killLockHolders runs rounds first to end-1 of TestRecoveryLockHolderKilled
// on a cluster of its own.
func killLockHolders(t *testing.T, name string, first, end int, rng *rand.Rand) {
	c := newCluster(t, name, 3)
	c.extra = `  recovery_grace = "3s"`
	c.quota = concurrentQuota
	c.writeDefinition(3, "")
	c.nomadRun("")
	c.waitPassing(3, 3*time.Minute)
	_, rec := clustertest.WaitOnRecord(t, time.Minute, 0, true, c.recorded)
	stop := clusterIDs(t, c)
	for r := first; r < end; r++ {
		putN(t, c, fmt.Sprintf("round%02d", r), 20)
		st := statusEveryPID(t, c, time.Minute)
		i := rng.Intn(len(st.Members))
		survivor := st.Members[i]
		others := append(append([]status.Member{}, st.Members[:i]...), st.Members[i+1:]...)
		start := time.Now()
		loseMembers(t, others...)

		var point string
		switch r % 3 {
		case 0:
			delay := time.Duration(rng.Int63n(int64(4 * time.Second)))
			point = fmt.Sprintf("%s after it saw quorum lost", delay.Round(time.Millisecond))
			waitFor(t, time.Minute, "the survivor to see quorum lost", func() (bool, string) {
				st, err := c.status()
				if err != nil {
					return false, err.Error()
				}
				for _, m := range st.Members {
					if m.Name == survivor.Name {
						return strings.Contains(m.Reason, "quorum lost"), m.Reason
					}
				}
				return false, "survivor not listed"
			})
			time.Sleep(delay) // the kill point itself, not a wait for a state
		default:
			delay := time.Duration(0)
			if r%3 == 2 {
				delay = time.Duration(rng.Int63n(int64(1500 * time.Millisecond)))
			}
			point = fmt.Sprintf("%s after it recorded epoch %d", delay.Round(time.Millisecond), rec.Epoch+1)
			waitFor(t, time.Minute, fmt.Sprintf("epoch %d recorded", rec.Epoch+1), func() (bool, string) {
				r, err := c.record()
				return err == nil && r.Epoch > rec.Epoch, fmt.Sprintf("%+v %v", r, err)
			})
			time.Sleep(delay) // the kill point itself
		}
		if err := syscall.Kill(survivor.PID, syscall.SIGKILL); err != nil {
			t.Fatalf("round %d: kill %s: %v", r, survivor.Name, err)
		}
		_, next := clustertest.WaitOnRecord(t, 3*time.Minute, rec.Epoch+1, true, c.recorded)
		waitVoters(t, c, 3, 2*time.Minute)
		t.Logf("round %d: holder %s killed %s; healed at epoch %d (source %s) in %s", r, survivor.Name, point, next.Epoch, next.Source, time.Since(start).Round(100*time.Millisecond))
		if next.Epoch != rec.Epoch+1 {
			t.Fatalf("round %d: epoch went from %d to %d: more than one recovery was recorded", r, rec.Epoch, next.Epoch)
		}
		rec = next
	}
	seen := stop()
	for epoch, ids := range seen {
		if len(ids) > 1 {
			t.Errorf("epoch %d: members reported %d cluster ids: %v", epoch, len(ids), ids)
		}
	}
	for r := first; r < end; r++ {
		if n := countPrefix(t, c, fmt.Sprintf("round%02d", r)); n != 20 {
			t.Errorf("round %d: %d of 20 acknowledged keys", r, n)
		}
	}
}
