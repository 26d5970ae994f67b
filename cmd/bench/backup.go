package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"filippo.io/age"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/bench"
	"github.com/etcd-nomad/etcd-nomad/localmode"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// backupFigures measures (g), continuous backup: what it costs the
// writes (deltas on ÷ off) and what a loss of every data dir loses (RPO),
// when costRPO, and how long a restore of a full snapshot plus many delta
// events takes.
func (e *runEnv) backupFigures(ctx context.Context, costRPO bool) ([]bench.Result, []string, error) {
	var res []bench.Result
	var notes []string
	if costRPO {
		var err error
		if res, notes, err = e.deltaCostAndRPO(ctx); err != nil {
			return nil, nil, err
		}
	}
	r, n, err := e.replayFigure(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("replay figure: %w", err)
	}
	if n != "" {
		notes = append(notes, n)
	}
	return append(res, r), notes, nil
}

// deltaCostAndRPO runs two 3-member etcd-nomad clusters with the same
// snapshot block (file store), one with continuous backup on and one
// with it off: put throughput alternating between them, then the RPO on
// the first.
func (e *runEnv) deltaCostAndRPO(ctx context.Context) ([]bench.Result, []string, error) {
	ports, err := localmode.AllocatePorts(6)
	if err != nil {
		return nil, nil, err
	}
	storeOn, storeOff := filepath.Join(e.opts.work, "backup-store-on"), filepath.Join(e.opts.work, "backup-store-off")
	opts := func(name, store, deltas string) localmode.Options {
		return localmode.Options{Name: name, TLSMode: config.TLSOff, StaleAfter: time.Minute, SnapshotDir: store, SnapshotInterval: 30 * time.Minute, DeltaInterval: deltas}
	}
	on, err := e.managedClusterIn(ctx, ports[:3], "deltas on", "backup-on", opts("bench-on", storeOn, e.opts.deltaInterval.String()), false)
	if err != nil {
		return nil, nil, err
	}
	defer on.close()
	off, err := e.managedClusterIn(ctx, ports[3:], "deltas off", "backup-off", opts("bench-off", storeOff, "0s"), false)
	if err != nil {
		return nil, nil, err
	}
	defer off.close()
	for _, c := range []*cluster{on, off} {
		if err := c.connect(ctx); err != nil {
			return nil, nil, fmt.Errorf("%s not ready: %w", c.name, err)
		}
	}
	onStore, err := file.New(storeOn, "bench-on")
	if err != nil {
		return nil, nil, err
	}
	offStore, err := file.New(storeOff, "bench-off")
	if err != nil {
		return nil, nil, err
	}
	// Both take their first full snapshot at once; the chain starts after it.
	if err := waitStore(ctx, on, onStore, true); err != nil {
		return nil, nil, err
	}
	if err := waitStore(ctx, off, offStore, false); err != nil {
		return nil, nil, err
	}
	e.log.Info("both clusters ready, continuous backup recording on one", "on", on.eps, "off", off.eps)

	value := strings.Repeat("v", kvValueSize)
	var onRounds, offRounds []loadResult
	for r := 0; r < e.opts.kvRounds; r++ {
		order := []*cluster{on, off}
		if r%2 == 1 {
			order = []*cluster{off, on}
		}
		for _, c := range order {
			lr := runLoad(ctx, c.clis, e.opts.kvClients, e.opts.kvDuration, putOp(value))
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			if c == on {
				onRounds = append(onRounds, lr)
			} else {
				offRounds = append(offRounds, lr)
			}
			e.log.Info("KV put workload", "cluster", c.name, "round", r, "ops_per_sec", int(lr.opsPerSec), "errors", lr.errors)
		}
	}
	mOn, mOff := median(onRounds), median(offRounds)
	off.close() // the RPO run has the machine to itself
	list, err := onStore.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	_, chain, _, _ := snapshot.Newest(list)
	res := []bench.Result{{ID: "g.cost", Name: "KV put throughput, continuous backup on ÷ off", Unit: "ops/s",
		Value: mOn.opsPerSec, Baseline: mOff.opsPerSec, GoalKind: bench.RatioAtLeast, Goal: 0.95,
		Notes: fmt.Sprintf("Two 3-member etcd-nomad clusters up at once (as in a), the same snapshot block (file store, interval 30m), `delta_interval = %q` on one and `\"0s\"` on the other; the put workload of a alternates between them, %d rounds each, the median counts (failed requests: on %d, off %d). During the rounds the leader of the first flushed %d delta segments (unencrypted: a file store without a key; X25519 encryption of a few MiB every few seconds is well under 1%% of a core).",
			e.opts.deltaInterval, e.opts.kvRounds, mOn.errors, mOff.errors, len(chain))}}

	rpo, note, err := e.rpoFigure(ctx, on, onStore)
	if err != nil {
		return nil, nil, fmt.Errorf("RPO: %w", err)
	}
	return append(res, rpo), []string{note}, nil
}

// waitStore waits until the cluster's store holds a full snapshot and,
// with deltas, a delta segment after it (written by keys put meanwhile).
func waitStore(ctx context.Context, c *cluster, store snapshot.Store, deltas bool) error {
	deadline := time.Now().Add(3 * time.Minute)
	for i := 0; ; i++ {
		list, err := store.List(ctx)
		if err != nil {
			return err
		}
		full, chain, _, ok := snapshot.Newest(list)
		if ok && (!deltas || len(chain) > 0) {
			return nil
		}
		if ok {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = c.clis[0].Put(pctx, fmt.Sprintf("warm/%06d", i), "x")
			cancel()
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no full snapshot with a delta after it in the store after 3 minutes (full: %v %s)", c.name, ok, full.Name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// rpoFigure writes keys one after the other on cluster c, each
// acknowledgement timed, kills every member (SIGKILL: nothing flushed on
// the way out) and wipes their data dirs, restores the newest full
// snapshot and its delta chain from the store as a recovery does, and
// counts the acknowledged keys that did not come back.
func (e *runEnv) rpoFigure(ctx context.Context, c *cluster, store snapshot.Store) (bench.Result, string, error) {
	value := strings.Repeat("w", kvValueSize)
	var mu sync.Mutex
	var acked []time.Time // acked[i]: when rpo/i was acknowledged
	wctx, stopWriting := context.WithCancel(ctx)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for i := 0; wctx.Err() == nil; i++ {
			pctx, cancel := context.WithTimeout(wctx, 5*time.Second)
			_, err := c.clis[0].Put(pctx, fmt.Sprintf("rpo/%08d", i), value)
			cancel()
			if err != nil {
				return // the members are gone: nothing after is acknowledged
			}
			mu.Lock()
			acked = append(acked, time.Now())
			mu.Unlock()
		}
	}()
	select {
	case <-ctx.Done():
		stopWriting()
		return bench.Result{}, "", ctx.Err()
	case <-time.After(e.opts.rpoWrite):
	}
	names := []string{localmode.MemberName(0), localmode.MemberName(1), localmode.MemberName(2)}
	for _, n := range names {
		if err := c.sup.Kill(n, syscall.SIGKILL); err != nil {
			stopWriting()
			return bench.Result{}, "", err
		}
	}
	lostAt := time.Now()
	stopWriting()
	<-written
	for _, n := range names {
		if err := pollUntil(ctx, 30*time.Second, func() bool { return c.sup.PID(n) == 0 }); err != nil {
			return bench.Result{}, "", fmt.Errorf("member %s did not die: %w", n, err)
		}
	}
	if err := os.RemoveAll(c.lay.DataDir()); err != nil {
		return bench.Result{}, "", err
	}
	mu.Lock()
	acks := append([]time.Time(nil), acked...)
	mu.Unlock()
	e.log.Info("every member killed and its data wiped", "acknowledged_writes", len(acks))

	restoreStart := time.Now()
	cli, stop, chain, replay, err := e.restoreFromStore(ctx, store, snapshot.Encryption{}, "rpo")
	if err != nil {
		return bench.Result{}, "", err
	}
	defer stop()
	restoreTook := time.Since(restoreStart)
	resp, err := cli.Get(ctx, "rpo/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return bench.Result{}, "", err
	}
	back := map[string]bool{}
	for _, kv := range resp.Kvs {
		back[string(kv.Key)] = true
	}
	firstLost, lost := -1, 0
	for i := range acks {
		if !back[fmt.Sprintf("rpo/%08d", i)] {
			lost++
			if firstLost < 0 {
				firstLost = i
			}
		}
	}
	if firstLost >= 0 && lost != len(acks)-firstLost {
		return bench.Result{}, "", fmt.Errorf("the restore lost %d acknowledged writes that are not the last ones (first lost: %d of %d): a hole in the chain", lost, firstLost, len(acks))
	}
	seconds := 0.0
	if firstLost >= 0 {
		seconds = lostAt.Sub(acks[firstLost]).Seconds()
	}
	rate := 0.0
	if len(acks) > 1 {
		rate = float64(len(acks)-1) / acks[len(acks)-1].Sub(acks[0]).Seconds()
	}
	r := bench.Result{ID: "g.rpo", Name: "RPO: seconds of acknowledged writes lost when every data dir is wiped", Unit: "s",
		Value: seconds, GoalKind: bench.AtMost, Goal: 10,
		Notes: fmt.Sprintf("On the deltas-on cluster (`delta_interval = %q`), one client puts %d-byte values to new keys one after the other (%.0f acknowledged writes/s) for %s; then all 3 members are killed with SIGKILL (a recorder's last events die with its process) and their data dirs removed. The newest full snapshot and its delta chain (%d segments, %d events replayed, to revision %d) are restored from the file store as a recovery does (fetch and verify, etcd's restore, replay, read back) in %s. Of %d acknowledged writes %d did not come back, the last ones: the figure is the time from the first of them to the loss.",
			e.opts.deltaInterval, kvValueSize, rate, e.opts.rpoWrite, len(chain), replay.Events, replay.Last, restoreTook.Round(time.Millisecond), len(acks), lost)}
	note := "Continuous backup (g): deltas are recorded by the etcd leader of a local 3-member etcd-nomad cluster (member processes, file store). RPO's goal is the issue's (≤ 10 s of writes); with `delta_interval` 5s the expected loss is up to one interval plus a flush."
	return r, note, nil
}

// restoreFromStore restores the newest full snapshot of store and its
// chain into a new data dir (snapshot.Fetch, Restore, Replay: what a
// restore from the store does) and starts it as a plain etcd member.
func (e *runEnv) restoreFromStore(ctx context.Context, store snapshot.Store, enc snapshot.Encryption, tag string) (*clientv3.Client, func(), []snapshot.Meta, snapshot.ReplayResult, error) {
	var rr snapshot.ReplayResult
	list, err := store.List(ctx)
	if err != nil {
		return nil, nil, nil, rr, err
	}
	full, chain, _, ok := snapshot.Newest(list)
	if !ok {
		return nil, nil, nil, rr, errors.New("no full snapshot in the store")
	}
	dir := filepath.Join(e.opts.work, "restored-"+tag)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, nil, rr, err
	}
	dataDir := filepath.Join(dir, "data")
	if _, err := snapshot.FetchInto(ctx, store, full.Name, dataDir, enc, nil); err != nil {
		return nil, nil, nil, rr, err
	}
	ports, err := localmode.AllocatePorts(1)
	if err != nil {
		return nil, nil, nil, rr, err
	}
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[0].Peer)
	if err := snapshot.Restore(snapshot.RestoreOptions{DataDir: dataDir, Name: "m0", PeerURL: peer, Token: "bench-" + tag, RevisionBump: 1_000_000}); err != nil {
		return nil, nil, nil, rr, err
	}
	if rr, err = snapshot.Replay(ctx, store, chain, enc, dataDir); err != nil {
		return nil, nil, nil, rr, err
	}
	if rr.Stopped != "" {
		return nil, nil, nil, rr, fmt.Errorf("the replay stopped early: %s", rr.Stopped)
	}
	f := defaultEtcdFlags()
	f.Name, f.Dir, f.PeerURL, f.InitialCluster = "m0", dataDir, peer, "m0="+peer
	f.ClientURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0].Client)
	srv, err := e.startChild("restored-"+tag, f.args())
	if err != nil {
		return nil, nil, nil, rr, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{f.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		srv.stop(20 * time.Second)
		return nil, nil, nil, rr, err
	}
	stop := func() {
		cli.Close()
		srv.stop(20 * time.Second)
	}
	if err := waitReady(ctx, []*clientv3.Client{cli}, []string{f.ClientURL}, 1, time.Minute); err != nil {
		stop()
		return nil, nil, nil, rr, fmt.Errorf("restored member: %w", err)
	}
	return cli, stop, chain, rr, nil
}

// pollUntil polls cond every 100 ms until it holds or timeout passes.
func pollUntil(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// Replay figure shape: the events go to replayKeys keys (puts, one in
// replayDeleteEvery a delete), one event per revision as single-key
// writes make them, in segments of the recorder's default flush size.
const (
	replayKeys        = 100_000
	replayDeleteEvery = 20
	replayFullKeys    = 10_000
)

// replayFigure times a restore of a full snapshot followed by
// e.opts.replayEvents delta events, encrypted (X25519) in a file store:
// fetch and verify, etcd's restore, the replay and its read-back.
func (e *runEnv) replayFigure(ctx context.Context) (bench.Result, string, error) {
	dir := filepath.Join(e.opts.work, "replay")
	defer os.RemoveAll(dir)
	ports, err := localmode.AllocatePorts(1)
	if err != nil {
		return bench.Result{}, "", err
	}
	f := defaultEtcdFlags()
	f.Name, f.Dir = "m0", filepath.Join(dir, "source")
	f.ClientURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0].Client)
	f.PeerURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0].Peer)
	f.InitialCluster = "m0=" + f.PeerURL
	srv, err := e.startChild("replay-source", f.args())
	if err != nil {
		return bench.Result{}, "", err
	}
	defer srv.stop(20 * time.Second)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{f.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return bench.Result{}, "", err
	}
	defer cli.Close()
	if err := waitReady(ctx, []*clientv3.Client{cli}, []string{f.ClientURL}, 1, time.Minute); err != nil {
		return bench.Result{}, "", fmt.Errorf("replay source: %w", err)
	}
	value := strings.Repeat("f", kvValueSize)
	for i := 0; i < replayFullKeys; i += 100 {
		ops := make([]clientv3.Op, 0, 100)
		for j := i; j < i+100; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("full/%06d", j), value))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			return bench.Result{}, "", err
		}
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return bench.Result{}, "", err
	}
	enc := snapshot.Encryption{Recipients: []age.Recipient{id.Recipient()}, Identities: []age.Identity{id}}
	store, err := file.New(filepath.Join(dir, "store"), "bench")
	if err != nil {
		return bench.Result{}, "", err
	}
	src := snapshot.Source{Cluster: "bench", ClusterID: "1", Epoch: 1}
	full, err := snapshot.Save(ctx, snapshot.From{Endpoint: f.ClientURL, SpoolDir: dir}, store, src, enc, nil)
	if err != nil {
		return bench.Result{}, "", err
	}
	srv.stop(20 * time.Second)
	segments, stored, err := writeDeltas(ctx, store, src, full, enc, e.opts.replayEvents)
	if err != nil {
		return bench.Result{}, "", err
	}
	e.log.Info("delta chain written", "segments", segments, "events", e.opts.replayEvents, "stored_bytes", stored)

	start, cpu0 := time.Now(), cpuSelf()
	rcli, stop, _, rr, err := e.restoreFromStore(ctx, store, enc, "replay")
	if err != nil {
		return bench.Result{}, "", err
	}
	took, cpu := time.Since(start), cpuSelf()-cpu0
	defer stop()
	resp, err := rcli.Get(ctx, "delta/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return bench.Result{}, "", err
	}
	if rr.Events != e.opts.replayEvents {
		return bench.Result{}, "", fmt.Errorf("replayed %d events, want %d", rr.Events, e.opts.replayEvents)
	}
	r := bench.Result{ID: "g.replay", Name: fmt.Sprintf("restore of a full snapshot + %d delta events", e.opts.replayEvents), Unit: "s",
		Value: took.Seconds(), GoalKind: bench.AtMost, Goal: 60,
		Notes: fmt.Sprintf("A full snapshot of %d keys (X25519-encrypted, file store) and a chain of %d segments (%.0f MiB stored) holding %d events, one per revision (puts of %d-byte values over %d keys, one in %d a delete), written in the recorder's format and segment size (%d MiB of changes); restored as in g.rpo: fetch, etcd's restore, replay in %d transactions (%.0f events/s over the whole restore), every one of the %d keys read back (%d present after the deletes). The restore used %.1f CPU-s (this process: fetch, decode, etcd's restore, the embedded member of the replay and its client); on 2 shared cores the wall time is mostly that CPU at the share the machine's other load leaves. No baseline: etcd has no replay; the goal bounds a recovery's wait.",
			replayFullKeys, segments, float64(stored)/(1<<20), rr.Events, kvValueSize, replayKeys, replayDeleteEvery, snapshot.DefaultDeltaFlushBytes>>20, rr.Txns, float64(rr.Events)/took.Seconds(), rr.Keys, resp.Count, cpu)}
	return r, "", nil
}

// writeDeltas writes n events after full into store as a delta chain in
// the recorder's format, each segment up to the recorder's flush size.
func writeDeltas(ctx context.Context, store snapshot.Store, src snapshot.Source, full snapshot.Meta, enc snapshot.Encryption, n int) (segments int, stored int64, err error) {
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, kvValueSize)
	version := map[int]int64{}
	var seg snapshot.Segment
	size := 0
	rev := full.Revision
	created := time.Now().UTC()
	flush := func() error {
		if len(seg.Events) == 0 {
			return nil
		}
		plain, err := seg.Marshal()
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		psize, sum, err := snapshot.Encode(&buf, bytes.NewReader(plain), enc)
		if err != nil {
			return err
		}
		m := snapshot.Meta{Cluster: src.Cluster, ClusterID: src.ClusterID, Epoch: src.Epoch, Kind: snapshot.KindDelta, Base: full.Name,
			FirstRevision: seg.First(), Revision: seg.Last(), Events: len(seg.Events), Created: created.Add(time.Duration(segments) * time.Second),
			Encrypted: enc.Enabled(), Codec: snapshot.Codec, EtcdVersion: full.EtcdVersion, Size: psize, SHA256: sum}
		m.Name = snapshot.DeltaName(m.Cluster, m.Epoch, m.Revision, m.Created, m.Encrypted)
		if m.StoredSize, err = store.Put(ctx, m.Name, &buf); err != nil {
			return err
		}
		if err := store.PutMeta(ctx, m); err != nil {
			return err
		}
		segments++
		stored += m.StoredSize
		seg, size = snapshot.Segment{}, 0
		return nil
	}
	if full.Revision <= 0 {
		return 0, 0, errors.New("the full snapshot has no revision")
	}
	for i := 0; i < n; i++ {
		rev++
		k := rng.IntN(replayKeys)
		key := []byte(fmt.Sprintf("delta/%06d", k))
		ev := &mvccpb.Event{Kv: &mvccpb.KeyValue{Key: key, ModRevision: rev}}
		if i%replayDeleteEvery == replayDeleteEvery-1 {
			ev.Type = mvccpb.DELETE
			delete(version, k)
		} else {
			for j := range val {
				val[j] = 'a' + byte(rng.IntN(26))
			}
			if version[k] == 0 {
				ev.Kv.CreateRevision = rev
			}
			version[k]++
			ev.Kv.Version, ev.Kv.Value = version[k], append([]byte(nil), val...)
		}
		seg.Events = append(seg.Events, ev)
		size += len(key) + len(ev.Kv.Value) + 32
		if size >= snapshot.DefaultDeltaFlushBytes {
			if err := flush(); err != nil {
				return 0, 0, err
			}
		}
	}
	return segments, stored, flush()
}
