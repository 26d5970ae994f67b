package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Tunables of a run, from the environment (`make chaos ROUNDS=.. SEED=..`).
func envInt(t *testing.T, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: not an integer: %v", name, v, err)
	}
	return n
}

// A fault disturbs the cluster; the round then waits until it is healthy.
type fault struct {
	name  string
	apply func(e *env, rng *rand.Rand) string
}

var faults = []fault{
	{"kill -9 a member", func(e *env, rng *rand.Rand) string {
		in := pick(e, rng, 1)[0]
		pid := mustPID(e, in.Name)
		e.kill(pid)
		e.expectRestarted(in.Name, pid)
		return fmt.Sprintf("%s (pid %d)", in.Name, pid)
	}},
	{"SIGSTOP then SIGCONT a member", func(e *env, rng *rand.Rand) string {
		in := pick(e, rng, 1)[0]
		pid := mustPID(e, in.Name)
		hold := time.Duration(2000+rng.Intn(4000)) * time.Millisecond
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			e.t.Fatalf("SIGSTOP %d: %v", pid, err)
		}
		// The fault's length, chosen by the seed: the member is frozen
		// (longer than the election timeout) while the others carry on.
		time.Sleep(hold)
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			e.t.Fatalf("SIGCONT %d: %v", pid, err)
		}
		return fmt.Sprintf("%s (pid %d) for %s", in.Name, pid, hold)
	}},
	{"kill -9 a majority", func(e *env, rng *rand.Rand) string {
		ins := pick(e, rng, 2)
		p0, p1 := mustPID(e, ins[0].Name), mustPID(e, ins[1].Name)
		e.kill(p0, p1)
		e.expectRestarted(ins[0].Name, p0)
		e.expectRestarted(ins[1].Name, p1)
		return fmt.Sprintf("%s (pid %d), %s (pid %d)", ins[0].Name, p0, ins[1].Name, p1)
	}},
	{"wipe a member's data dir", func(e *env, rng *rand.Rand) string {
		in := pick(e, rng, 1)[0]
		dir, err := e.memberDir(in)
		if err != nil {
			e.t.Fatal(err)
		}
		pid := mustPID(e, in.Name)
		old, err := e.memberStatus(in)
		if err != nil {
			e.t.Fatal(err)
		}
		e.kill(pid)
		// It must come back as a new member: its data is gone.
		e.after = append(e.after, func() error {
			st, err := e.memberStatus(in)
			if err != nil || st.MemberID == old.MemberID || st.MemberID == 0 {
				return fmt.Errorf("wiped %s is member %x (%v), want a new member (was %x)", in.Name, st.MemberID, err, old.MemberID)
			}
			return nil
		})
		// Nomad restarts the task after 2s: move the data away in one
		// rename while the member is down, then delete it.
		aside := dir + ".wiped-by-chaos"
		if err := os.Rename(dir, aside); err != nil {
			e.t.Fatalf("wipe %s: %v", dir, err)
		}
		if err := os.RemoveAll(aside); err != nil {
			e.t.Fatalf("wipe %s: %v", aside, err)
		}
		return fmt.Sprintf("%s (pid %d, %s)", in.Name, pid, dir)
	}},
	{"restart the Consul agent", func(e *env, rng *rand.Rand) string {
		ctx, cancel := agentCtx()
		defer cancel()
		if err := e.consul.Restart(ctx, 15*time.Second); err != nil {
			e.t.Fatal(err)
		}
		return fmt.Sprintf("pid %d", e.consul.PID())
	}},
	{"restart the Nomad agent", func(e *env, rng *rand.Rand) string {
		ctx, cancel := agentCtx()
		defer cancel()
		if err := e.nomad.Restart(ctx, 30*time.Second); err != nil {
			e.t.Fatal(err)
		}
		return fmt.Sprintf("pid %d", e.nomad.PID())
	}},
}

// loseConsul runs once per run: Consul comes back empty, and the members
// must record their cluster again, never seed a second one.
var loseConsul = fault{"lose Consul's state", func(e *env, rng *rand.Rand) string {
	ctx, cancel := agentCtx()
	defer cancel()
	if err := e.consul.WipeRestart(ctx, 15*time.Second); err != nil {
		e.t.Fatal(err)
	}
	return fmt.Sprintf("pid %d, data wiped", e.consul.PID())
}}

func pick(e *env, rng *rand.Rand, n int) []provider.Instance {
	insts := e.instances()
	rng.Shuffle(len(insts), func(i, j int) { insts[i], insts[j] = insts[j], insts[i] })
	return insts[:n]
}

// expectRestarted checks, once the round's cluster is healthy, that the
// member runs as a new process. Its allocation may have been replaced
// meanwhile (a task killed a 4th time in 5 minutes fails its allocation,
// and Nomad reschedules it): the replacement adopts the data and runs as
// the same member under another instance name.
func (e *env) expectRestarted(name string, killed int) {
	e.after = append(e.after, func() error {
		pid, err := e.pidOf(name)
		if err != nil {
			return err
		}
		if pid == killed {
			return fmt.Errorf("%s still reports the killed pid %d", name, killed)
		}
		return nil
	})
}

func mustPID(e *env, name string) int {
	e.t.Helper()
	pid, err := e.pidOf(name)
	if err != nil {
		e.t.Fatal(err)
	}
	return pid
}

// pidOf is the pid of member name: the instance of that name, or else the
// instance whose member runs under that name (its persisted identity).
func (e *env) pidOf(name string) (int, error) {
	insts := e.instances()
	for _, in := range insts {
		if in.Name == name {
			return e.memberPID(in)
		}
	}
	for _, in := range insts {
		if st, err := e.memberStatus(in); err == nil && st.Name == name {
			return e.memberPID(in)
		}
	}
	return 0, fmt.Errorf("member %s not found among %d instances", name, len(insts))
}

// TestChaos runs randomized fault rounds against a 3-member cluster on real
// Consul and Nomad servers, under a concurrent put/get/txn load whose
// history must be linearizable; no acknowledged write may be lost and the
// members must never report two cluster ids.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos runs real agents and a cluster for minutes")
	}
	rounds, seed, rng := chaosRun(t, "chaos", 5)
	tlsMode := os.Getenv("CHAOS_TLS")
	if tlsMode == "" {
		tlsMode = "auto"
	}
	t.Logf("cluster tls mode %q (CHAOS_TLS)", tlsMode)
	e := newEnv(t, tlsMode)
	runChaos(t, e, rounds, seed, rng, faults, &loseConsul)
}

// chaosRun reads the run's rounds and seed from CHAOS_ROUNDS and
// CHAOS_SEED and says how to replay it (`make TARGET ...`) if it fails.
func chaosRun(t *testing.T, target string, defRounds int64) (int, int64, *rand.Rand) {
	rounds := int(envInt(t, "CHAOS_ROUNDS", defRounds))
	if rounds < 1 {
		t.Fatalf("CHAOS_ROUNDS=%d: at least 1 round", rounds)
	}
	seed := envInt(t, "CHAOS_SEED", time.Now().UnixNano()%1_000_000_000)
	replay := fmt.Sprintf("replay with: make %s SEED=%d ROUNDS=%d", target, seed, rounds)
	t.Logf("chaos seed %d, %d rounds (%s)", seed, rounds, replay)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(replay)
		}
	})
	return rounds, seed, rand.New(rand.NewSource(seed))
}

// runChaos waits for e's cluster, starts the load, applies one fault of
// fs per round (once, when not nil, in one round chosen by the seed) and
// waits until the cluster is healthy again after each; then it checks the
// history, the acknowledged writes and the cluster ids.
func runChaos(t *testing.T, e *env, rounds int, seed int64, rng *rand.Rand, fs []fault, once *fault) {
	start := time.Now()
	var cli *clientv3.Client
	clustertest.WaitFor(t, 4*time.Minute, "the cluster up and healthy", func() (bool, string) {
		if cli == nil {
			if eps := e.endpoints(); len(eps) == 3 {
				cli = e.client()
			} else {
				return false, fmt.Sprintf("%d instances", len(eps))
			}
		}
		return e.healthy(cli)
	})
	t.Logf("cluster healthy after %s", time.Since(start).Round(time.Millisecond))

	t.Cleanup(e.followEndpoints(cli))
	hist := NewHistory()
	ld := startLoad(cli, hist, 4, seed)
	ids := startSampler(e)
	writer := clustertest.StartWriter(cli, "chaos-acked")
	var acked []string
	var gap time.Duration
	stopped := false
	stopLoad := func() {
		if !stopped {
			stopped = true
			ld.stop()
			ids.stop()
			acked, gap = writer.Finish()
		}
	}
	t.Cleanup(stopLoad)

	onceRound := rng.Intn(rounds)
	var durations []time.Duration
	for r := 0; r < rounds; r++ {
		ld.round.Store(int64(r))
		f := fs[rng.Intn(len(fs))]
		if once != nil && r == onceRound {
			f = *once
		}
		t0 := time.Now()
		what := f.apply(e, rng)
		applied := time.Since(t0)
		clustertest.WaitFor(t, roundDeadline, fmt.Sprintf("round %d (%s: %s): the cluster healthy again", r, f.name, what), func() (bool, string) {
			return e.healthy(cli)
		})
		d := time.Since(t0)
		for _, check := range e.after {
			if err := check(); err != nil {
				t.Errorf("round %d (%s): %v", r, f.name, err)
			}
		}
		e.after = nil
		durations = append(durations, d)
		t.Logf("round %d: %s: %s; applied in %s, healthy again after %s", r, f.name, what, applied.Round(time.Millisecond), d.Round(time.Millisecond))
	}

	// Some load on the healthy cluster after the last round, then stop.
	ld.round.Store(int64(rounds))
	waitOps(t, ld, 50)
	stopLoad()
	// Every key of every round is read once more: a write of an early
	// round lost to a later fault shows up in the history as a stale read.
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	err := hist.ReadBack(rctx, readBackClient, allRoundKeys(rounds), 200*time.Millisecond, func(ctx context.Context, key string) (string, error) {
		opCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		out, hdr, err := do(opCtx, cli, Input{Kind: Get, Key: key})
		if err == nil {
			ld.header(hdr)
		}
		return out.Value, err
	})
	rcancel()
	if err != nil {
		t.Errorf("final read of every round's keys: %v", err)
	}
	gets, puts, cases, pending := hist.Stats()
	t.Logf("history: %d gets, %d puts, %d cas txns (%d writes with unknown outcome); %d acknowledged unique keys, longest write gap %s",
		gets, puts, cases, pending, len(acked), gap.Round(time.Millisecond))

	viz := filepath.Join(os.TempDir(), fmt.Sprintf("chaos-%d-%d.html", seed, time.Now().Unix()))
	t0 := time.Now()
	res, err := hist.Check(3*time.Minute, viz)
	if err != nil {
		t.Error(err)
	}
	t.Logf("porcupine: %s in %s", res, time.Since(t0).Round(time.Millisecond))
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		t.Errorf("history is not linearizable; visualization: %s", viz)
	default:
		t.Errorf("linearizability check inconclusive within its timeout; visualization: %s", viz)
	}

	clustertest.CheckAcked(t, cli, acked)
	writer.CheckLeases(t, cli)

	memberIDs, recordIDs, epochs, samples := ids.result()
	t.Logf("cluster ids: members %v, record %v, epochs %v (%d samples, %d failed reads, last: %v), etcd headers %v", memberIDs, recordIDs, epochs, samples, ids.errors, ids.lastErr, ld.headerIDs())
	if len(memberIDs) != 1 || len(ld.headerIDs()) != 1 {
		t.Errorf("two cluster ids: members reported %v, etcd responses carried %v", memberIDs, ld.headerIDs())
	}
	for id := range recordIDs {
		if _, ok := memberIDs[id]; !ok || len(recordIDs) != 1 {
			t.Errorf("the Consul record named cluster ids %v, the members %v", recordIDs, memberIDs)
		}
	}
	if len(epochs) != 1 {
		t.Errorf("epochs changed: %v (no fault here loses quorum's data)", epochs)
	}
	var total time.Duration
	for _, d := range durations {
		total += d
	}
	if rounds > 0 {
		t.Logf("%d rounds in %s, %s per round on average", rounds, total.Round(time.Millisecond), (total / time.Duration(rounds)).Round(time.Millisecond))
	}
}

// roundDeadline is how long the cluster may take to be healthy again once
// a round's fault is applied (a lost host's member, for one, is removed
// stale_after, 2m on the testbed, after the operator's gc, then replaced).
const roundDeadline = 5 * time.Minute

// load is the concurrent client load.
type load struct {
	round  atomic.Int64 // the keys rotate per round
	ops    atomic.Int64 // successful operations
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	hdrIDs map[uint64]int
}

const keysPerRound = 3

func roundKey(round, k int) string { return fmt.Sprintf("chaos/r%03d/k%d", round, k) }

// allRoundKeys lists the keys of rounds 0..last.
func allRoundKeys(last int) []string {
	var keys []string
	for r := 0; r <= last; r++ {
		for k := 0; k < keysPerRound; k++ {
			keys = append(keys, roundKey(r, k))
		}
	}
	return keys
}

// readBackClient is the client id of the final reads in the history.
const readBackClient = 1000

func startLoad(cli *clientv3.Client, h *History, clients int, seed int64) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel, hdrIDs: map[uint64]int{}}
	for c := 0; c < clients; c++ {
		l.wg.Add(1)
		go func(c int) {
			defer l.wg.Done()
			l.client(ctx, cli, h, c, rand.New(rand.NewSource(seed+int64(c)+1)))
		}(c)
	}
	return l
}

func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
}

func (l *load) headerIDs() map[uint64]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[uint64]int{}
	for k, v := range l.hdrIDs {
		out[k] = v
	}
	return out
}

func (l *load) header(id uint64) {
	l.mu.Lock()
	l.hdrIDs[id]++
	l.mu.Unlock()
}

// client runs one client: gets, puts of unique values and compare-and-set
// txns against the value it last saw, each with a short timeout.
func (l *load) client(ctx context.Context, cli *clientv3.Client, h *History, c int, rng *rand.Rand) {
	seen := map[string]string{}
	for n := 0; ctx.Err() == nil; n++ {
		key := roundKey(int(l.round.Load()), rng.Intn(keysPerRound))
		val := fmt.Sprintf("c%d-%d", c, n)
		var in Input
		switch x := rng.Intn(10); {
		case x < 4:
			in = Input{Kind: Get, Key: key}
		case x < 7:
			in = Input{Kind: Put, Key: key, Value: val}
		default:
			in = Input{Kind: CAS, Key: key, Value: val, Expect: seen[key]}
		}
		opCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		call := h.Now()
		out, hdr, err := do(opCtx, cli, in)
		ret := h.Now()
		cancel()
		if err != nil {
			out = Output{Unknown: true}
		} else {
			l.header(hdr)
			l.ops.Add(1)
			switch {
			case in.Kind == Put || (in.Kind == CAS && out.OK):
				seen[key] = in.Value
			default:
				seen[key] = out.Value
			}
		}
		h.Add(c, in, out, call, ret)
		pause := 20 * time.Millisecond
		if err != nil {
			pause = 200 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

func do(ctx context.Context, cli *clientv3.Client, in Input) (Output, uint64, error) {
	switch in.Kind {
	case Get:
		resp, err := cli.Get(ctx, in.Key)
		if err != nil {
			return Output{}, 0, err
		}
		out := Output{}
		if len(resp.Kvs) > 0 {
			out.Value = string(resp.Kvs[0].Value)
		}
		return out, resp.Header.ClusterId, nil
	case Put:
		resp, err := cli.Put(ctx, in.Key, in.Value)
		if err != nil {
			return Output{}, 0, err
		}
		return Output{}, resp.Header.ClusterId, nil
	}
	var cmp clientv3.Cmp
	if in.Expect == "" {
		cmp = clientv3.Compare(clientv3.CreateRevision(in.Key), "=", 0)
	} else {
		cmp = clientv3.Compare(clientv3.Value(in.Key), "=", in.Expect)
	}
	resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(in.Key, in.Value)).Else(clientv3.OpGet(in.Key)).Commit()
	if err != nil {
		return Output{}, 0, err
	}
	out := Output{OK: resp.Succeeded}
	if !resp.Succeeded {
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			out.Value = string(kvs[0].Value)
		}
	}
	return out, resp.Header.ClusterId, nil
}

// waitOps waits until n more operations succeeded.
func waitOps(t *testing.T, l *load, n int64) {
	t.Helper()
	target := l.ops.Load() + n
	clustertest.WaitFor(t, time.Minute, fmt.Sprintf("%d more successful client operations", n), func() (bool, string) {
		got := l.ops.Load()
		return got >= target, fmt.Sprintf("%d of %d", got, target)
	})
}

// sampler reads every current member's /status and the Consul record
// twice a second, and keeps the cluster ids and epochs seen, and how many
// reads failed. (The etcd responses' own cluster ids are kept by the load,
// from every response.)
type sampler struct {
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	// member and record cluster ids, member epochs, with sample counts
	members, record, epochs map[uint64]int
	samples                 int
	// failed reads (a member down during a fault, Consul restarting)
	// and the last error
	errors  int
	lastErr error
}

// sampleSource is what a sample reads: the member slots as they are now
// (a replaced allocation is a new instance), a member's status, the
// cluster record.
type sampleSource struct {
	instances func() []provider.Instance
	status    func(provider.Instance) (status.Member, error)
	record    func() (coord.Record, error)
}

func newSampler() *sampler {
	return &sampler{stopc: make(chan struct{}), done: make(chan struct{}), members: map[uint64]int{}, record: map[uint64]int{}, epochs: map[uint64]int{}}
}

func startSampler(e *env) *sampler {
	s := newSampler()
	src := sampleSource{
		instances: e.instances,
		status:    e.memberStatus,
		record: func() (coord.Record, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return e.co.Record(ctx)
		},
	}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stopc:
				return
			case <-time.After(500 * time.Millisecond):
			}
			s.sampleOnce(src)
		}
	}()
	return s
}

// sampleOnce reads the current instances' status and the record once.
func (s *sampler) sampleOnce(src sampleSource) {
	var got, eps []uint64
	var errs []error
	for _, in := range src.instances() {
		st, err := src.status(in)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("status of %s: %w", in.Name, err))
		case st.ClusterID != 0:
			got = append(got, st.ClusterID)
			eps = append(eps, st.Epoch)
		}
	}
	rec, err := src.record()
	if err != nil {
		errs = append(errs, fmt.Errorf("cluster record: %w", err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	for _, id := range got {
		s.members[id]++
	}
	for _, ep := range eps {
		s.epochs[ep]++
	}
	if err == nil && rec.ClusterID != 0 {
		s.record[rec.ClusterID]++
	}
	s.errors += len(errs)
	if len(errs) > 0 {
		s.lastErr = errs[len(errs)-1]
	}
}

func (s *sampler) stop() {
	close(s.stopc)
	<-s.done
}

func (s *sampler) result() (members, record, epochs map[uint64]int, samples int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.members, s.record, s.epochs, s.samples
}
