package task

import (
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// slowStore is a real file store whose writes are throttled to rate bytes
// per second, like a store behind a slow link. Like the file store it
// ignores ctx: only the save itself can stop an upload.
type slowStore struct {
	*file.Store
	rate int

	mu     sync.Mutex
	puts   int // Puts started
	active int // Puts running
}

func newSlowStore(t *testing.T, k *kit, rate int) *slowStore {
	t.Helper()
	fs, err := file.New(filepath.Join(k.dir, "snapshots"), k.cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	return &slowStore{Store: fs, rate: rate}
}

func (s *slowStore) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	s.mu.Lock()
	s.puts++
	s.active++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.active--
		s.mu.Unlock()
	}()
	return s.Store.Put(ctx, name, &throttledReader{r: r, chunk: s.rate / 10})
}

// state returns the Puts started and running.
func (s *slowStore) state() (puts, active int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts, s.active
}

// throttledReader hands out chunk bytes per 100 ms.
type throttledReader struct {
	r     io.Reader
	chunk int
}

func (t *throttledReader) Read(p []byte) (int, error) {
	time.Sleep(100 * time.Millisecond) // the throttle itself, not a wait for a state
	return t.r.Read(p[:min(len(p), t.chunk)])
}

// putRandom writes n bytes of incompressible values through cli.
func putRandom(t *testing.T, cli *clientv3.Client, n int) {
	t.Helper()
	const size = 32 << 10
	for i := 0; i*size < n; i++ {
		b := make([]byte, size)
		_, _ = rand.Read(b)
		put(t, cli, "bulk/"+strconv.Itoa(i), string(b))
	}
}

// lastDecisionAt reads m's etcd_nomad_last_decision_timestamp_seconds.
func (m *Member) lastDecisionAt(t *testing.T) float64 {
	t.Helper()
	mfs, err := m.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "etcd_nomad_last_decision_timestamp_seconds" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

// A scheduled snapshot uploading to a slow store neither
// stalls the leader's loop nor holds the coordination lock. While the
// leader's upload runs (about a minute at 64 KiB/s), two members join as
// learners and are promoted, the leader keeps deciding at its pace, and no
// second upload starts (neither the leader's next checks nor the new
// members'). Stopping the leader mid-upload cancels it promptly, leaves no
// object behind and frees the snapshot lease.
//
// ETCD_NOMAD_LOOP_SNAPSHOT_MIB sets the snapshot's size: 4 MiB by default,
// uploaded at 64 KiB/s; a larger one (the 1 GiB, run by hand:
// ETCD_NOMAD_LOOP_SNAPSHOT_MIB=1024) is uploaded over 4 minutes, and the
// joins get a second more per 16 MiB the learners must receive.
func TestSnapshotUploadDoesNotStallTheLoop(t *testing.T) {
	mib, rate, promoteWithin := 4, 64<<10, 45*time.Second
	if v := os.Getenv("ETCD_NOMAD_LOOP_SNAPSHOT_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 4 {
			t.Fatalf("ETCD_NOMAD_LOOP_SNAPSHOT_MIB=%q: want a whole number of MiB, at least 4", v)
		}
		mib, rate, promoteWithin = n, max(64<<10, n<<20/240), 45*time.Second+time.Duration(n/16)*time.Second
	}
	k := newKit(t, "m0", "m1", "m2")
	store := newSlowStore(t, k, rate)
	snaps := &backup.Snapshots{Store: store, Interval: 2 * time.Second, RetainCount: 5, RetainAge: time.Hour}
	all := k.cl.Provider.Static
	k.prov.Set(all[:1])
	m0 := k.memberWith("m0", nil, snaps)
	cli := k.seedForTest(m0)
	putRandom(t, cli, mib<<20)
	stop0 := runLoop(t, m0)

	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, active := store.state(); active == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scheduled upload never started; m0: %s", m0.reason())
		}
	}
	uploadStarted := time.Now()

	k.prov.Set(all)
	m1 := k.memberWith("m1", nil, snaps)
	m2 := k.memberWith("m2", nil, snaps)
	stop1 := runLoop(t, m1)
	stop2 := runLoop(t, m2)

	var maxGap time.Duration
	lastSeen, lastChange := m0.lastDecisionAt(t), time.Now()
	for deadline := time.Now().Add(promoteWithin); ; time.Sleep(50 * time.Millisecond) {
		if at := m0.lastDecisionAt(t); at != lastSeen {
			lastSeen, lastChange = at, time.Now()
		}
		maxGap = max(maxGap, time.Since(lastChange))
		puts, active := store.state()
		if puts != 1 {
			t.Fatalf("%d uploads started during the first one, want 1 (the lease and the in-flight guard keep it single)", puts)
		}
		ms := memberList(t, cli).Members
		voters := 0
		for _, mem := range ms {
			if !mem.IsLearner {
				voters++
			}
		}
		if voters == 3 {
			if active != 1 {
				t.Fatalf("the upload ended (after %v) before the members were promoted: the test's store is not slow enough to prove anything", time.Since(uploadStarted))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members not promoted while the snapshot uploads (%v since it started): %d voters of %d; m0 %s, m1 %s, m2 %s",
				time.Since(uploadStarted), voters, len(ms), m0.reason(), m1.reason(), m2.reason())
		}
	}
	// Observation bounds a loop at 2 x (LoopInterval + rpcTimeout) even
	// with a peer silent; an upload holding the loop stalls it a minute.
	if bound := 2 * (m0.opts.LoopInterval + rpcTimeout); maxGap > bound {
		t.Fatalf("the leader's loop paused %v during the upload, want under %v", maxGap, bound)
	}
	t.Logf("%d MiB snapshot at %d KiB/s: 3 voters %v after the upload started; the leader's longest pause between decisions %v", mib, rate>>10, time.Since(uploadStarted), maxGap)

	// The members stop first: with m0 gone, one of them would lead and
	// start the next scheduled upload.
	runLoopStops := []func(){stop2, stop1}
	for _, stop := range runLoopStops {
		stop()
	}
	stopAt := time.Now()
	stop0()
	if took := time.Since(stopAt); took > 10*time.Second {
		t.Fatalf("stopping the leader mid-upload took %v", took)
	}
	if _, active := store.state(); active != 0 {
		t.Fatal("the upload still runs after its member stopped")
	}
	ents, err := os.ReadDir(store.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left in the store after a cancelled upload: %s", e.Name())
	}
	if h, err := m0.backups.LeaseHolder(context.Background()); err != nil || h != "" {
		t.Fatalf("snapshot lease after the uploader stopped: held by %q %v, want free", h, err)
	}
}

// The backup before a removal starts in the background: the removal
// happens at once, under the lock, while the backup uploads to a slow
// store (it held the lock and the loop for the whole upload before).
func TestRemovalDoesNotWaitForItsBackup(t *testing.T) {
	k := newKit(t, "m0")
	store := newSlowStore(t, k, 64<<10)
	m0 := k.memberWith("m0", nil, &backup.Snapshots{Store: store, RetainCount: 5})
	cli := k.seedForTest(m0)
	putRandom(t, cli, 2<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	added, err := cli.MemberAddAsLearner(ctx, []string{"http://127.0.0.1:1"}) // never started
	if err != nil {
		t.Fatal(err)
	}
	m0.lockForTest(t)
	o, err := m0.observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d := planner.Decision{Kind: planner.RemoveMember, MemberID: added.Member.ID, Reason: "test"}
	if err := m0.act(context.Background(), o, d); err != nil {
		t.Fatalf("remove: %v", err)
	}
	took := time.Since(start)
	m0.releaseLock(context.Background())
	if len(memberList(t, cli).Members) != 1 {
		t.Fatal("the learner was not removed")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if puts, active := store.state(); puts == 1 && active == 1 {
			break
		}
		if time.Now().After(deadline) {
			puts, active := store.state()
			t.Fatalf("no backup uploading after the removal: %d uploads started, %d running", puts, active)
		}
	}
	if took > 5*time.Second {
		t.Fatalf("the removal took %v: it waited for its backup", took)
	}
}

// A save streams from this member's etcd while it uploads: stopping etcd
// (a set-aside, a recovery, a removal) cancels the save instead of waiting
// for etcd's close to give up on the stream.
func TestStoppingEtcdCancelsItsUpload(t *testing.T) {
	k := newKit(t, "m0")
	store := newSlowStore(t, k, 64<<10)
	m0 := k.memberWith("m0", nil, &backup.Snapshots{Store: store, RetainCount: 5})
	cli := k.seedForTest(m0)
	// The confirmed record, as a running member's loop reads it: a member
	// saves only data of the record's incarnation (snapshotSource).
	m0.readRecord(t)
	putRandom(t, cli, 2<<20)
	if !m0.backups.Start(m0.clientURL(m0.self), "test", false) {
		t.Fatal("no save started")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, active := store.state(); active == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upload never started")
		}
	}
	start := time.Now()
	m0.stopEtcd()
	took := time.Since(start)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, active := store.state(); active == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upload still runs after its etcd stopped")
		}
	}
	if took > 2*time.Second {
		t.Fatalf("stopping etcd took %v: it waited for the upload's stream", took)
	}
	t.Logf("etcd stopped in %v mid-upload", took)
}

// A voter that stops while the others keep a quorum (a rolling update of
// the job: how etcd-nomad and its embedded etcd are upgraded) saves a full
// snapshot first; the next member stopped finds it recent and saves none.
func TestRollingStopSnapshotsFirst(t *testing.T) {
	k := newKit(t, "m0", "m1", "m2")
	fs, err := file.New(filepath.Join(k.dir, "snapshots"), k.cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	snaps := &backup.Snapshots{Store: fs, RetainCount: 5}
	ms := map[string]*Member{}
	for _, n := range []string{"m0", "m1", "m2"} {
		ms[n] = k.memberWith(n, nil, snaps)
	}
	all := k.cl.Provider.Static
	k.prov.Set(all[:1])
	stops := map[string]func(){"m0": runLoop(t, ms["m0"])}
	cli := k.client(ms["m0"])
	voters := func() (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, mem := range resp.Members {
			if !mem.IsLearner {
				n++
			}
		}
		return n, nil
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if n, _ := voters(); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("m0 never seeded (%s)", ms["m0"].reason())
		}
	}
	k.prov.Set(all)
	for _, n := range []string{"m1", "m2"} {
		stops[n] = runLoop(t, ms[n])
	}
	for _, stop := range stops {
		defer stop()
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if n, _ := voters(); n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never 3 voters (m1 %s, m2 %s)", ms["m1"].reason(), ms["m2"].reason())
		}
	}
	put(t, cli, "before-update", "v")
	fulls := func() []string {
		list, err := fs.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range snapshot.Full(list) {
			names = append(names, m.Name)
		}
		return names
	}
	if got := fulls(); len(got) != 0 {
		t.Fatalf("snapshots before any stop: %v", got)
	}
	stops["m2"]()
	got := fulls()
	if len(got) != 1 {
		t.Fatalf("after the first voter stopped: %d full snapshots %v, want 1", len(got), got)
	}
	stops["m1"]()
	if again := fulls(); len(again) != 1 {
		t.Fatalf("after the second voter stopped: %v, want only %v (the first is recent)", again, got)
	}
}
