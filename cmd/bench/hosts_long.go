package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// A longFault is one of the long faults of (h): a fault held past Nomad's
// heartbeat (the allocation turns unknown and a replacement is placed), or
// past lost_after, then healed. The figure is the time from the heal until
// the cluster is whole again: 3 healthy voters of one cluster id on 3
// hosts, 3 passing Consul checks, and every write acknowledged during the
// fault present.
type longFault struct {
	id string
	// hold is how long the fault stays.
	hold time.Duration
	// apply cuts the host the fault is about off (h: its host, leader:
	// whether it is the leader's) and says what it did.
	apply func(b *hostsBed, h *devagents.Host) error
	// leader: the fault is about the etcd leader's host, else a
	// follower's.
	leader bool
}

// longFaults are h.isolate-long, h.oneway and h.servers-cut.
var longFaults = []longFault{
	{id: "h.isolate-long", hold: 150 * time.Second, leader: true,
		apply: func(b *hostsBed, h *devagents.Host) error { return b.tb.Isolate(h) }},
	{id: "h.oneway", hold: 30 * time.Second, leader: true,
		apply: func(b *hostsBed, h *devagents.Host) error { return b.tb.Mute(h) }},
	{id: "h.servers-cut", hold: 100 * time.Second,
		apply: func(b *hostsBed, h *devagents.Host) error { return b.tb.CutFromServers(h) }},
}

// longFault applies f, holds it, heals it and returns the seconds from
// the heal to a whole cluster, and a line for the note.
func (b *hostsBed) longFault(ctx context.Context, e *runEnv, f longFault) (float64, string, error) {
	before, err := b.members(ctx)
	if err != nil {
		return 0, "", err
	}
	clusterID := before.ClusterID
	var h *devagents.Host
	var name string
	if f.leader {
		if h, name, err = b.leaderHost(ctx); err != nil {
			return 0, "", err
		}
	} else {
		if h, err = b.followerHost(ctx); err != nil {
			return 0, "", err
		}
		for _, m := range before.Members {
			if b.hostOf(m.PeerURL) == h {
				name = m.Name
			}
		}
	}
	cli, err := b.clientOn(ctx, b.load)
	if err != nil {
		return 0, "", err
	}
	defer cli.Close()
	w := clustertest.StartWriter(cli, "bench/"+f.id)
	start := time.Now()
	tl := b.startTimeline(ctx, e, f.id, start)
	if err := f.apply(b, h); err != nil {
		w.Finish()
		tl.stop()
		return 0, "", err
	}
	select { // the fault's length, not a wait for a state
	case <-ctx.Done():
		w.Finish()
		tl.stop()
		return 0, "", ctx.Err()
	case <-time.After(f.hold):
	}
	healStart := time.Now()
	tl.mark("heal")
	if err := b.tb.Heal(); err != nil {
		w.Finish()
		tl.stop()
		return 0, "", err
	}
	_, err = b.waitHealthy(ctx, 5*time.Minute, nil)
	healed := time.Since(healStart)
	tl.mark("healthy")
	acked, gap := w.Finish()
	tl.stop()
	if err != nil {
		return 0, "", fmt.Errorf("%s: %w", f.id, err)
	}
	after, err := b.members(ctx)
	if err != nil {
		return 0, "", err
	}
	if after.ClusterID != clusterID {
		return 0, "", fmt.Errorf("%s: cluster id %s before, %s after", f.id, clusterID, after.ClusterID)
	}
	lost, err := b.missing(ctx, "bench/"+f.id+"/", acked)
	if err != nil {
		return 0, "", fmt.Errorf("%s: %w", f.id, err)
	}
	if len(lost) > 0 {
		return 0, "", fmt.Errorf("%s: %d acknowledged writes lost: %v", f.id, len(lost), lost)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	e.log.Info("hosts: "+f.id, "healed", healed.Round(10*time.Millisecond), "member", name+"@"+h.Name, "acked", len(acked), "failed_twice", w.Failed(), "longest_gap", gap.Round(time.Millisecond), "load", strings.TrimSpace(string(load)))
	line := fmt.Sprintf("%s: %s (%s) for %s, %d writes acknowledged during it all present (%d failed twice: the client's round robin also picks the cut-off member), longest write gap %s, one cluster id, load %s", f.id, name, h.Name, f.hold, len(acked), w.Failed(), gap.Round(time.Millisecond), strings.Join(strings.Fields(string(load))[:3], " "))
	return healed.Seconds(), line, nil
}

// missing returns the keys of acked that a read of prefix does not find.
func (b *hostsBed) missing(ctx context.Context, prefix string, acked []string) ([]string, error) {
	cli, err := b.clientOn(ctx, b.load)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	var resp *clientv3.GetResponse
	err = poll(ctx, time.Minute, "a read of "+prefix, func() (bool, string) {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var gerr error
		resp, gerr = cli.Get(gctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		return gerr == nil, fmt.Sprint(gerr)
	})
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = true
	}
	var lost []string
	for _, k := range acked {
		if !have[k] {
			lost = append(lost, k)
		}
	}
	return lost, nil
}

// timeline records, once a second, what Nomad, the members and Consul
// show during a long fault, one line per change, in
// <work>/hosts/timeline-<id>.txt and the log: where the time goes.
type timeline struct {
	mu     sync.Mutex
	start  time.Time
	lines  []string
	cancel context.CancelFunc
	done   chan struct{}
	path   string
}

func (b *hostsBed) startTimeline(ctx context.Context, e *runEnv, id string, start time.Time) *timeline {
	tctx, cancel := context.WithCancel(ctx)
	tl := &timeline{start: start, cancel: cancel, done: make(chan struct{}), path: filepath.Join(e.opts.work, "hosts", "timeline-"+id+".txt")}
	go func() {
		defer close(tl.done)
		last := ""
		for {
			now := b.snapshotState(tctx)
			if now != last {
				tl.add(now)
				last = now
			}
			select {
			case <-tctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return tl
}

func (tl *timeline) add(s string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.lines = append(tl.lines, fmt.Sprintf("%s t=%6.1fs %s", time.Now().UTC().Format("15:04:05.0"), time.Since(tl.start).Seconds(), s))
}

func (tl *timeline) mark(what string) { tl.add("=== " + what) }

func (tl *timeline) stop() {
	tl.cancel()
	<-tl.done
	tl.mu.Lock()
	defer tl.mu.Unlock()
	_ = os.WriteFile(tl.path, []byte(strings.Join(tl.lines, "\n")+"\n"), 0o600)
}

// snapshotState is one line: the job's allocations, each member's
// /status and the Consul checks.
func (b *hostsBed) snapshotState(ctx context.Context) string {
	var parts []string
	if allocs, _, err := b.nomad.Jobs().Allocations(hostsJob, true, nil); err == nil {
		var as []string
		for _, a := range allocs {
			if (a.ClientStatus == "complete" || a.ClientStatus == "failed") && a.ModifyTime < time.Now().Add(-10*time.Minute).UnixNano() {
				continue
			}
			as = append(as, fmt.Sprintf("%s@%s:%s/%s", a.ID[:8], a.NodeName, a.ClientStatus, a.DesiredStatus))
		}
		sort.Strings(as)
		parts = append(parts, "allocs["+strings.Join(as, " ")+"]")
	} else {
		parts = append(parts, "allocs: "+err.Error())
	}
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	st, err := b.members(gctx)
	cancel()
	if err == nil {
		var ms []string
		for _, m := range st.Members {
			role := "voter"
			switch {
			case m.Unreachable:
				role = "unreachable"
			case !m.Running:
				role = "stopped"
			case m.Learner:
				role = "learner"
			case m.Leader:
				role = "leader"
			}
			h := "?"
			if host := b.hostOf(m.PeerURL); host != nil {
				h = host.Name
			}
			health := "unhealthy"
			if m.Healthy {
				health = "healthy"
			}
			d := m.Decision
			if len(d) > 140 {
				d = d[:140]
			}
			ms = append(ms, fmt.Sprintf("{%s@%s %s %s %x: %s}", m.Name, h, role, health, m.MemberID, d))
		}
		parts = append(parts, "members"+strings.Join(ms, " "))
	} else {
		parts = append(parts, "members: "+err.Error())
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	ch, err := status.ConsulChecks(cctx, b.consul, hostsJob)
	cancel()
	if err == nil {
		parts = append(parts, fmt.Sprintf("checks %d/%d", ch.Passing, ch.Total))
	} else {
		parts = append(parts, "checks: "+err.Error())
	}
	return strings.Join(parts, " ")
}

// keepLogs copies the members' logs (every allocation's alloc/logs) and
// the agents' logs of every host to <work>/hosts/logs before the testbed
// goes, for the timelines of the long faults.
func (b *hostsBed) keepLogs(e *runEnv) {
	dst := filepath.Join(e.opts.work, "hosts", "logs")
	for _, h := range b.tb.Hosts() {
		_ = filepath.Walk(h.Dir, func(path string, info os.FileInfo, err error) error {
			if err != nil || !info.Mode().IsRegular() {
				return nil
			}
			rel, rerr := filepath.Rel(h.Dir, path)
			if rerr != nil {
				return nil
			}
			if !strings.HasSuffix(path, ".log") && !strings.Contains(rel, "/alloc/logs/") {
				return nil
			}
			if strings.Contains(rel, ".fifo") {
				return nil
			}
			data, rerr := os.ReadFile(path)
			if rerr != nil {
				return nil
			}
			out := filepath.Join(dst, h.Name, rel)
			if os.MkdirAll(filepath.Dir(out), 0o700) == nil {
				_ = os.WriteFile(out, data, 0o600)
			}
			return nil
		})
	}
}

// wantLong: BENCH_HOSTS_LONG, when set, names the long faults to run
// (comma-separated ids, e.g. h.isolate-long); all of them otherwise.
func wantLong(id string) bool {
	only := os.Getenv("BENCH_HOSTS_LONG")
	return only == "" || strings.Contains(","+only+",", ","+id+",")
}
