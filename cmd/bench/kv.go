package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/bench"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/procstat"
	"github.com/etcd-nomad/etcd-nomad/localmode"
)

// KV workload shape.
const (
	kvKeys      = 10_000 // keys written and read at random
	kvValueSize = 256
	kvConns     = 4 // gRPC connections shared by the clients
	kvWarmup    = time.Second
)

// cluster is one side of the comparison: 3 members and clients to them.
type cluster struct {
	name string
	eps  []string
	clis []*clientv3.Client
	pids func() []int
	stop func()
	// sup and lay, for an etcd-nomad cluster: its members and files.
	sup *localmode.Supervisor
	lay localmode.Layout
}

// plainCluster starts 3 plain embedded etcd member processes.
func (e *runEnv) plainCluster(ctx context.Context, ports []localmode.MemberPorts) (*cluster, error) {
	var peers []string
	for i, p := range ports {
		peers = append(peers, fmt.Sprintf("%s=http://127.0.0.1:%d", localmode.MemberName(i), p.Peer))
	}
	var children []*child
	c := &cluster{name: "plain etcd"}
	c.stop = func() {
		for _, ch := range children {
			ch.stop(20 * time.Second)
		}
	}
	c.pids = func() []int {
		var out []int
		for _, ch := range children {
			out = append(out, ch.pid())
		}
		return out
	}
	for i, p := range ports {
		f := defaultEtcdFlags()
		f.Name = localmode.MemberName(i)
		f.Dir = filepath.Join(e.opts.work, "kv-plain", f.Name)
		f.ClientURL = fmt.Sprintf("http://127.0.0.1:%d", p.Client)
		f.PeerURL = fmt.Sprintf("http://127.0.0.1:%d", p.Peer)
		f.InitialCluster = strings.Join(peers, ",")
		ch, err := e.startChild("plain-"+f.Name, f.args())
		if err != nil {
			c.stop()
			return nil, err
		}
		children = append(children, ch)
		c.eps = append(c.eps, f.ClientURL)
	}
	return c, nil
}

// managedCluster starts 3 etcd-nomad member processes (local package:
// static provider, file-lock coordinator), TLS off like the plain side.
func (e *runEnv) managedCluster(ctx context.Context, ports []localmode.MemberPorts) (*cluster, error) {
	return e.managedClusterIn(ctx, ports, "etcd-nomad", "kv-managed", localmode.Options{Name: "bench", TLSMode: config.TLSOff, StaleAfter: time.Minute}, false)
}

// managedClusterIn is managedCluster with its own name, directory (under
// the scratch directory) and cluster options; restart restarts a member
// that dies, as Nomad would.
func (e *runEnv) managedClusterIn(ctx context.Context, ports []localmode.MemberPorts, name, dir string, o localmode.Options, restart bool) (*cluster, error) {
	bin, err := e.etcdNomad(ctx)
	if err != nil {
		return nil, err
	}
	lay := localmode.Layout{Dir: filepath.Join(e.opts.work, dir)}
	if err := lay.WriteConfig(o, ports); err != nil {
		return nil, err
	}
	sup := &localmode.Supervisor{Bin: bin, Layout: lay, Restart: restart, Log: e.log.Named("supervisor")}
	c := &cluster{name: name, sup: sup, lay: lay}
	c.stop = func() {
		if err := sup.StopAll(20 * time.Second); err != nil {
			e.log.Warn("stop etcd-nomad members", "error", err)
		}
	}
	c.pids = func() []int {
		var out []int
		for i := range ports {
			out = append(out, sup.PID(localmode.MemberName(i)))
		}
		return out
	}
	for i, p := range ports {
		if err := sup.Start(localmode.MemberName(i)); err != nil {
			c.stop()
			return nil, err
		}
		c.eps = append(c.eps, fmt.Sprintf("http://127.0.0.1:%d", p.Client))
	}
	return c, nil
}

func (c *cluster) connect(ctx context.Context) error {
	for i := 0; i < kvConns; i++ {
		cli, err := clientv3.New(clientv3.Config{Endpoints: c.eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		c.clis = append(c.clis, cli)
	}
	return waitReady(ctx, c.clis, c.eps, len(c.eps), 2*time.Minute)
}

func (c *cluster) close() {
	for _, cli := range c.clis {
		cli.Close()
	}
	c.stop()
}

// loadResult is one workload run.
type loadResult struct {
	opsPerSec float64
	p99       time.Duration
	errors    int
}

// op is one client request.
type op func(ctx context.Context, cli *clientv3.Client, rng *rand.Rand) error

func putOp(value string) op {
	return func(ctx context.Context, cli *clientv3.Client, rng *rand.Rand) error {
		_, err := cli.Put(ctx, fmt.Sprintf("kv/%06d", rng.IntN(kvKeys)), value)
		return err
	}
}

// rangeOp is a linearizable single-key range (etcd's default Get).
func rangeOp(ctx context.Context, cli *clientv3.Client, rng *rand.Rand) error {
	_, err := cli.Get(ctx, fmt.Sprintf("kv/%06d", rng.IntN(kvKeys)))
	return err
}

// runLoad runs clients closed-loop workers for warmup+dur and measures the
// last dur: completed requests per second and the p99 latency.
func runLoad(ctx context.Context, clis []*clientv3.Client, clients int, dur time.Duration, o op) loadResult {
	start := time.Now()
	measureFrom, end := start.Add(kvWarmup), start.Add(kvWarmup+dur)
	lats := make([][]time.Duration, clients)
	errs := make([]int, clients)
	var wg sync.WaitGroup
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			cli := clis[w%len(clis)]
			for {
				t0 := time.Now()
				if t0.After(end) || ctx.Err() != nil {
					return
				}
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := o(rctx, cli, rng)
				cancel()
				if t0.Before(measureFrom) {
					continue
				}
				if err != nil {
					errs[w]++
					continue
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}(w)
	}
	wg.Wait()
	var all []time.Duration
	n := 0
	for w := range lats {
		all = append(all, lats[w]...)
		n += errs[w]
	}
	return loadResult{opsPerSec: float64(len(all)) / dur.Seconds(), p99: percentile(all, 0.99), errors: n}
}

// percentile returns the q-th quantile (nearest rank) of ds.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(float64(len(ds))*q+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// sideStats collects one cluster's rounds of each workload.
type sideStats struct {
	put, rng []loadResult
}

// median returns the median of the rounds' throughput and of their p99
// latencies, and the failed requests of all rounds: on a shared machine a
// median of alternating short rounds resists bursts of load that a single
// long run or a best-of would absorb on one side only.
func median(rounds []loadResult) loadResult {
	var ops []float64
	var p99s []time.Duration
	var out loadResult
	for _, r := range rounds {
		ops = append(ops, r.opsPerSec)
		p99s = append(p99s, r.p99)
		out.errors += r.errors
	}
	out.opsPerSec, out.p99 = middle(ops), middle(p99s)
	return out
}

// middle is the median of vs (the mean of the two middle ones when their
// number is even; 0 for none). It sorts vs.
func middle[T ~float64 | ~int64](vs []T) T {
	n := len(vs)
	if n == 0 {
		return 0
	}
	slices.Sort(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// kvFigures measures (a) KV throughput and p99 latency and (f) operator
// overhead (RSS, idle CPU) on a plain 3-member cluster and an etcd-nomad
// one, both up at the same time, with the workloads alternating between
// them so that the machine's other load falls on both alike.
func (e *runEnv) kvFigures(ctx context.Context, kv, overhead bool) ([]bench.Result, []string, error) {
	ports, err := localmode.AllocatePorts(6)
	if err != nil {
		return nil, nil, err
	}
	plain, err := e.plainCluster(ctx, ports[:3])
	if err != nil {
		return nil, nil, err
	}
	defer plain.close()
	managed, err := e.managedCluster(ctx, ports[3:])
	if err != nil {
		return nil, nil, err
	}
	defer managed.close()
	for _, c := range []*cluster{plain, managed} {
		if err := c.connect(ctx); err != nil {
			return nil, nil, fmt.Errorf("%s not ready: %w", c.name, err)
		}
	}
	e.log.Info("both clusters ready", "plain", plain.eps, "etcd-nomad", managed.eps)
	var res []bench.Result
	var notes []string
	if kv {
		// Both sides also carry what real consumers do beside the load
		// (a kept-alive session with leased keys, a lock, an election, a
		// watch), as every test workload does: the same on each side.
		consumers := map[*cluster]*clustertest.Consumer{}
		for _, c := range []*cluster{plain, managed} {
			consumers[c] = clustertest.StartConsumer(c.clis[0], "bench/consumer")
		}
		defer func() {
			for _, cons := range consumers {
				cons.Finish() // at most once: Finish is idempotent
			}
		}()
		value := strings.Repeat("v", kvValueSize)
		stats := map[*cluster]*sideStats{plain: {}, managed: {}}
		for r := 0; r < e.opts.kvRounds; r++ {
			for _, w := range []struct {
				name string
				op   op
				get  func(*sideStats) *[]loadResult
			}{{"put", putOp(value), func(s *sideStats) *[]loadResult { return &s.put }}, {"range", rangeOp, func(s *sideStats) *[]loadResult { return &s.rng }}} {
				order := []*cluster{plain, managed}
				if r%2 == 1 {
					order = []*cluster{managed, plain} // neither side always goes first
				}
				for _, c := range order {
					lr := runLoad(ctx, c.clis, e.opts.kvClients, e.opts.kvDuration, w.op)
					if ctx.Err() != nil {
						return nil, nil, ctx.Err()
					}
					rounds := w.get(stats[c])
					*rounds = append(*rounds, lr)
					e.log.Info("KV workload", "cluster", c.name, "round", r, "op", w.name, "ops_per_sec", int(lr.opsPerSec), "p99", lr.p99, "errors", lr.errors)
				}
			}
		}
		for _, c := range []*cluster{plain, managed} {
			consumers[c].Finish()
			notes = append(notes, fmt.Sprintf("Consumer on %s during the KV rounds: %s.", c.name, consumers[c].Report()))
		}
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		p := sideStats{put: []loadResult{median(stats[plain].put)}, rng: []loadResult{median(stats[plain].rng)}}
		m := sideStats{put: []loadResult{median(stats[managed].put)}, rng: []loadResult{median(stats[managed].rng)}}
		res = append(res,
			bench.Result{ID: "a.put", Name: "KV put throughput", Unit: "ops/s", Value: m.put[0].opsPerSec, Baseline: p.put[0].opsPerSec, GoalKind: bench.RatioAtLeast, Goal: 0.97},
			bench.Result{ID: "a.put.p99", Name: "KV put p99 latency", Unit: "ms", Value: ms(m.put[0].p99), Baseline: ms(p.put[0].p99), GoalKind: bench.RatioAtLeastInverse, Goal: 0.97},
			bench.Result{ID: "a.range", Name: "KV range throughput (linearizable, 1 key)", Unit: "ops/s", Value: m.rng[0].opsPerSec, Baseline: p.rng[0].opsPerSec, GoalKind: bench.RatioAtLeast, Goal: 0.97},
			bench.Result{ID: "a.range.p99", Name: "KV range p99 latency", Unit: "ms", Value: ms(m.rng[0].p99), Baseline: ms(p.rng[0].p99), GoalKind: bench.RatioAtLeastInverse, Goal: 0.97},
		)
		if errs := p.put[0].errors + p.rng[0].errors + m.put[0].errors + m.rng[0].errors; errs > 0 {
			notes = append(notes, fmt.Sprintf("KV: %d requests failed (plain %d, etcd-nomad %d); failed requests are not counted.", errs, p.put[0].errors+p.rng[0].errors, m.put[0].errors+m.rng[0].errors))
		}
		notes = append(notes, fmt.Sprintf("KV (a): two 3-member clusters on 127.0.0.1, both TLS off, heartbeat %s, election %s, snapshot count %d, quota %d GiB, periodic compaction %s: "+
			"3 `etcd-nomad member` processes (local package: static provider, file-lock coordinator) vs 3 plain embedded etcd processes (embed.StartEtcd, same settings). "+
			"Both clusters run at once and the workloads alternate between them (%d rounds each, the first side swapped every round; the median of the rounds' throughputs and of their p99s counts). "+
			"Load: %d closed-loop clients over %d gRPC connections to all 3 endpoints, %s warm-up then %s measured; put = %d-byte values over %d keys, range = linearizable Get of one of them. "+
			"The load generator runs on the same machine as the members.",
			config.DefaultHeartbeat, config.DefaultElection, config.DefaultSnapshotCount, config.DefaultQuotaBackendBytes>>30, config.DefaultCompactionRetain,
			e.opts.kvRounds, e.opts.kvClients, kvConns, kvWarmup, e.opts.kvDuration, kvValueSize, kvKeys))
	}
	if overhead {
		r, n, err := e.overheadFigures(ctx, plain, managed)
		if err != nil {
			return nil, nil, err
		}
		res = append(res, r...)
		notes = append(notes, n)
	}
	return res, notes, nil
}

// overheadFigures measures (f): mean RSS per member, and CPU per member
// over an idle window common to both clusters.
func (e *runEnv) overheadFigures(ctx context.Context, plain, managed *cluster) ([]bench.Result, string, error) {
	cpu := func(pids []int) (time.Duration, error) {
		var sum time.Duration
		for _, p := range pids {
			if p == 0 {
				return 0, errors.New("a member is not running")
			}
			t, err := procstat.CPUTime(p)
			if err != nil {
				return 0, err
			}
			sum += t
		}
		return sum, nil
	}
	e.log.Info("measuring idle CPU", "window", e.opts.idle)
	p0, err := cpu(plain.pids())
	if err != nil {
		return nil, "", fmt.Errorf("plain etcd: %w", err)
	}
	m0, err := cpu(managed.pids())
	if err != nil {
		return nil, "", fmt.Errorf("etcd-nomad: %w", err)
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return nil, "", ctx.Err()
	case <-time.After(e.opts.idle):
	}
	window := time.Since(start)
	p1, err := cpu(plain.pids())
	if err != nil {
		return nil, "", fmt.Errorf("plain etcd: %w", err)
	}
	m1, err := cpu(managed.pids())
	if err != nil {
		return nil, "", fmt.Errorf("etcd-nomad: %w", err)
	}
	pct := func(d time.Duration, n int) float64 { return 100 * d.Seconds() / window.Seconds() / float64(n) }
	rss := func(pids []int) (float64, error) {
		var sum int64
		for _, p := range pids {
			b, err := procstat.RSS(p)
			if err != nil {
				return 0, err
			}
			sum += b
		}
		return float64(sum) / float64(len(pids)) / (1 << 20), nil
	}
	pr, err := rss(plain.pids())
	if err != nil {
		return nil, "", err
	}
	mr, err := rss(managed.pids())
	if err != nil {
		return nil, "", err
	}
	heap := func(c *cluster) string {
		var sum float64
		for _, ep := range c.eps {
			v, err := metric(ctx, ep+"/metrics", "go_memstats_heap_inuse_bytes")
			if err != nil {
				return "unknown (" + err.Error() + ")"
			}
			sum += v
		}
		return fmt.Sprintf("%.1f MiB", sum/float64(len(c.eps))/(1<<20))
	}
	ph, mh := heap(plain), heap(managed)
	res := []bench.Result{
		{ID: "f.rss", Name: "RSS per member", Unit: "MiB", Value: mr, Baseline: pr, GoalKind: bench.DeltaAtMost, Goal: 30},
		{ID: "f.idle-cpu", Name: "idle CPU per member (% of one core)", Unit: "%", Value: pct(m1-m0, 3), Baseline: pct(p1-p0, 3), GoalKind: bench.DeltaAtMost, Goal: 1},
	}
	note := fmt.Sprintf("Overhead (f): VmRSS (/proc/PID/status) averaged over the 3 member processes of each cluster after the KV workloads (same workload, same keys), "+
		"and utime+stime (/proc/PID/stat) per member over the same %s idle window with both clusters up and no client load. "+
		"An etcd-nomad member is one process: embedded etcd plus the supervisor (1 s loop, status server on its own port); the plain member is embedded etcd alone. "+
		"Go heap in use per member at the same moment (go_memstats_heap_inuse_bytes from etcd's /metrics): etcd-nomad %s, plain %s.",
		window.Round(time.Second), mh, ph)
	return res, note, nil
}

// metric reads one unlabelled sample from a Prometheus text endpoint.
func metric(ctx context.Context, url, name string) (float64, error) {
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(mctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no %s", url, name)
}
