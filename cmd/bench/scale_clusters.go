package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/procstat"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	nomadglue "github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// clustersQuota is the clusters family's quota_backend_bytes: a small
// sticky disk per member (jobs.EphemeralDiskMB), as the e2e's concurrent
// clusters use.
const clustersQuota = "64MiB"

// clustersDiskFreeMB is the free disk the family's Nomad client
// advertises: 30 idle members' sticky disks (about 1.1 GiB each at
// clustersQuota) exceed this machine's free disk, though they write a
// few MiB each.
const clustersDiskFreeMB = 64 << 10

// idleCost is what the agents did over an idle window.
type idleCost struct {
	window time.Duration
	// requests per minute by class (requestClass).
	perMin map[string]float64
	// CPU in % of one core and RSS in MiB: the Consul agent, the Nomad
	// agent, Nomad's per-task helpers (executor, logmon), the members.
	consulCPU, nomadCPU, helpersCPU, membersCPU float64
	consulRSS, nomadRSS, helpersRSS, membersRSS float64
	helpers                                     int
	sessions                                    int
}

// requestClass names what a request the agents served is, for the idle
// table: Consul KV writes and session renewals are Raft writes on the
// servers; blocking queries hold a connection and a goroutine each.
func requestClass(r devagents.Request) string {
	switch {
	case r.Agent == "consul" && (r.Method == "PUT" || r.Method == "DELETE") && (strings.HasPrefix(r.Path, "/v1/kv/") || r.Path == "/v1/txn"):
		return "consul KV writes"
	case r.Agent == "consul" && strings.HasPrefix(r.Path, "/v1/session/renew/"):
		return "consul session renewals"
	case r.Agent == "consul" && strings.HasPrefix(r.Path, "/v1/session/"):
		return "consul other session calls"
	case r.Agent == "consul" && strings.HasPrefix(r.Path, "/v1/agent/"):
		return "consul /v1/agent (local: checks, services)"
	case r.Blocking:
		return r.Agent + " blocking queries"
	}
	return r.Agent + " other requests"
}

// requestClasses are requestClass's values in the table's order.
var requestClasses = []string{"consul KV writes", "consul session renewals", "consul other session calls", "consul blocking queries", "consul other requests",
	"consul /v1/agent (local: checks, services)", "nomad blocking queries", "nomad other requests"}

// clustersRow is one number of clusters.
type clustersRow struct {
	clusters  int
	coldStart float64 // all jobs run at once -> the last healthy
	firstUp   float64 // -> the first healthy
	idle      idleCost
}

// clustersFamily runs 1, 5, 10 (-scale-clusters) 3-member clusters on
// real Consul and Nomad dev agents: a cold start of all at once, then an
// idle window with the agents' API requests, CPU and memory; the agents
// with no cluster are the baseline, measured first in the same run.
func (e *runEnv) clustersFamily(ctx context.Context, fam *scaleFamily) (err error) {
	so := e.opts.scale
	fam.Title = "Clusters per Nomad: " + sizesText(so.clusters) + " clusters of 3 members"
	var rows []clustersRow
	defer func() { fam.Table, fam.Plots, fam.Notes = clustersCurves(rows, so) }()

	nomadBin, err := devagents.Bin("nomad", devagents.NomadVersion)
	if err != nil {
		return err
	}
	if _, err := devagents.Bin("consul", devagents.ConsulVersion); err != nil {
		return err
	}
	bin, err := e.etcdNomad(ctx)
	if err != nil {
		return err
	}
	dir := filepath.Join(e.opts.work, "clusters")
	defer os.RemoveAll(dir)
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	consul, err := devagents.StartConsul(actx, filepath.Join(dir, "consul"))
	if err != nil {
		return err
	}
	defer consul.Stop(15 * time.Second)
	nomad, err := devagents.StartNomadWith(actx, filepath.Join(dir, "nomad"), consul.Addr, devagents.Options{DiskFreeMB: clustersDiskFreeMB})
	if err != nil {
		return err
	}
	defer nomad.Stop(60 * time.Second)
	k, err := newNomadKit(dir, bin, nomadBin, consul, nomad)
	if err != nil {
		return err
	}

	base, err := e.idleWindow(ctx, k, consul, nomad, nomadBin, nil)
	if err != nil {
		return fmt.Errorf("idle agents: %w", err)
	}
	rows = append(rows, clustersRow{clusters: 0, idle: base})
	for _, n := range so.clusters {
		r, err := e.clustersAt(ctx, k, consul, nomad, nomadBin, n)
		if err != nil {
			return fmt.Errorf("%d clusters: %w", n, err)
		}
		rows = append(rows, r)
	}
	return nil
}

// clustersAt starts n clusters at once, measures them idle and stops them.
func (e *runEnv) clustersAt(ctx context.Context, k *nomadKit, consul, nomad *devagents.Agent, nomadBin string, n int) (r clustersRow, err error) {
	r.clusters = n
	var names []string
	clients := map[string]*backends.Client{}
	for i := 0; i < n; i++ {
		job := fmt.Sprintf("scale-%d-%d", n, i)
		jdir := filepath.Join(k.dir, job)
		if err := os.MkdirAll(jdir, 0o700); err != nil {
			return r, err
		}
		def, spec := filepath.Join(jdir, "cluster.hcl"), filepath.Join(jdir, "etcd.nomad.hcl")
		if err := renderNomadJob(ctx, k, job, clustersQuota, "", []string{"-binary", k.bin}, def, spec); err != nil {
			return r, err
		}
		cl, _, diags := config.LoadFile(def)
		if diags.HasErrors() {
			return r, fmt.Errorf("%s: %s", job, diags.Error())
		}
		bc, err := backends.OpenClient(cl)
		if err != nil {
			return r, err
		}
		clients[job] = bc
		if _, err := jobs.EnsureCAKEK(ctx, k.ncli, job, ""); err != nil {
			return r, err
		}
		names = append(names, job)
	}
	defer func() {
		// Stop every job, wait for its members, purge it.
		for _, job := range names {
			_ = exec.Command(nomadBin, "job", "stop", "-detach", "-yes", "-address", k.nomadAddr, job).Run()
		}
		for _, job := range names {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			if werr := nomadglue.WaitStopped(sctx, k.ncli, job, ""); werr != nil {
				err = errors.Join(err, fmt.Errorf("job %s did not stop: %w", job, werr))
			}
			cancel()
			_ = exec.Command(nomadBin, "job", "stop", "-detach", "-purge", "-yes", "-address", k.nomadAddr, job).Run()
		}
		_ = exec.Command(nomadBin, "system", "gc", "-address", k.nomadAddr).Run()
	}()

	// Cold start: every job submitted at once.
	start := time.Now()
	var wg sync.WaitGroup
	runErrs := make([]error, n)
	for i, job := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := filepath.Join(k.dir, job, "etcd.nomad.hcl")
			if out, err := exec.CommandContext(ctx, nomadBin, "job", "run", "-detach", "-address", k.nomadAddr, spec).CombinedOutput(); err != nil {
				runErrs[i] = fmt.Errorf("nomad job run %s: %w\n%s", job, err, out)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(runErrs...); err != nil {
		return r, err
	}
	up := map[string]time.Duration{}
	timeout := 3*time.Minute + time.Duration(n)*20*time.Second
	deadline := time.Now().Add(timeout)
	last := map[string]string{}
	for len(up) < n {
		for _, job := range names {
			if _, ok := up[job]; ok {
				continue
			}
			ok, why := clusterUp(ctx, k, clients[job], job)
			if ok {
				up[job] = time.Since(start)
				e.log.Info("cluster healthy", "clusters", n, "job", job, "after", up[job].Round(100*time.Millisecond))
			}
			last[job] = why
		}
		if len(up) == n {
			break
		}
		if time.Now().After(deadline) {
			var missing []string
			for _, job := range names {
				if _, ok := up[job]; !ok {
					missing = append(missing, job+": "+last[job])
				}
			}
			return r, fmt.Errorf("cold start of %d clusters: %d healthy after %s; not: %s", n, len(up), timeout, strings.Join(missing, "; "))
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	var ds []time.Duration
	for _, d := range up {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	r.firstUp, r.coldStart = ds[0].Seconds(), ds[len(ds)-1].Seconds()
	e.log.Info("cold start", "clusters", n, "first", r.firstUp, "last", r.coldStart)

	// Let the start's own traffic (registrations, the first snapshots,
	// deployments) settle before the idle window.
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(15 * time.Second):
	}
	var memberPIDs []int
	for _, job := range names {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := status.Gather(sctx, clients[job])
		cancel()
		if err != nil {
			return r, fmt.Errorf("%s: %w", job, err)
		}
		for _, m := range st.Members {
			memberPIDs = append(memberPIDs, m.PID)
		}
	}
	if r.idle, err = e.idleWindow(ctx, k, consul, nomad, nomadBin, memberPIDs); err != nil {
		return r, err
	}
	// Still one healthy cluster each after the window.
	for _, job := range names {
		if ok, why := clusterUp(ctx, k, clients[job], job); !ok {
			return r, fmt.Errorf("%s after the idle window: %s", job, why)
		}
	}
	return r, nil
}

// clusterUp holds when the job's 3 members are healthy voters of one
// cluster id and Consul shows their 3 checks passing.
func clusterUp(ctx context.Context, k *nomadKit, bc *backends.Client, job string) (bool, string) {
	ch, err := status.ConsulChecks(ctx, k.ccli, job)
	if err != nil {
		return false, err.Error()
	}
	if ch.Passing != 3 || ch.Total != 3 {
		return false, fmt.Sprintf("%d/%d checks passing", ch.Passing, ch.Total)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := status.Gather(sctx, bc)
	if err != nil {
		return false, err.Error()
	}
	ids := map[uint64]bool{}
	healthy := 0
	for _, m := range st.Members {
		if m.Healthy && !m.Learner {
			healthy++
		}
		ids[m.ClusterID] = true
	}
	if healthy != 3 || len(ids) != 1 {
		return false, fmt.Sprintf("%d healthy voters, %d cluster ids", healthy, len(ids))
	}
	return true, ""
}

// nomadHelpers are the Nomad client's per-task helper processes (`nomad
// executor`, `nomad logmon`): the agent's children running the Nomad
// binary (other sessions' agents run the same binary).
func nomadHelpers(nomadBin string, agent int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, de := range ents {
		pid, err := strconv.Atoi(de.Name())
		if err != nil || pid == agent {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", de.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if argv0, _, _ := strings.Cut(string(b), "\x00"); argv0 != nomadBin {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", de.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		if i := strings.LastIndexByte(string(st), ')'); i > 0 {
			if f := strings.Fields(string(st[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(agent) {
				out = append(out, pid)
			}
		}
	}
	return out
}

// idleWindow measures the agents (and members, when given) over the
// -scale-idle window with nothing else asked of them.
func (e *runEnv) idleWindow(ctx context.Context, k *nomadKit, consul, nomad *devagents.Agent, nomadBin string, members []int) (idleCost, error) {
	c := idleCost{perMin: map[string]float64{}}
	helpers := nomadHelpers(nomadBin, nomad.PID())
	c.helpers = len(helpers)
	sumCPU := func(pids []int) time.Duration {
		var t time.Duration
		for _, p := range pids {
			if d, err := procstat.CPUTime(p); err == nil {
				t += d
			}
		}
		return t
	}
	sumRSS := func(pids []int) float64 {
		var b int64
		for _, p := range pids {
			if v, err := procstat.RSS(p); err == nil {
				b += v
			}
		}
		return float64(b) / (1 << 20)
	}
	cOff, err := consul.LogSize()
	if err != nil {
		return c, err
	}
	nOff, err := nomad.LogSize()
	if err != nil {
		return c, err
	}
	cpu0 := []time.Duration{sumCPU([]int{consul.PID()}), sumCPU([]int{nomad.PID()}), sumCPU(helpers), sumCPU(members)}
	start := time.Now()
	e.log.Info("idle window", "window", e.opts.scale.idle, "members", len(members), "nomad_helpers", len(helpers))
	select {
	case <-ctx.Done():
		return c, ctx.Err()
	case <-time.After(e.opts.scale.idle):
	}
	c.window = time.Since(start)
	cpu1 := []time.Duration{sumCPU([]int{consul.PID()}), sumCPU([]int{nomad.PID()}), sumCPU(helpers), sumCPU(members)}
	pct := func(i int) float64 { return 100 * (cpu1[i] - cpu0[i]).Seconds() / c.window.Seconds() }
	c.consulCPU, c.nomadCPU, c.helpersCPU, c.membersCPU = pct(0), pct(1), pct(2), pct(3)
	c.consulRSS, c.nomadRSS, c.helpersRSS, c.membersRSS = sumRSS([]int{consul.PID()}), sumRSS([]int{nomad.PID()}), sumRSS(helpers), sumRSS(members)
	var reqs []devagents.Request
	for _, x := range []struct {
		a   *devagents.Agent
		off int64
	}{{consul, cOff}, {nomad, nOff}} {
		rs, err := x.a.RequestsSince(x.off)
		if err != nil {
			return c, err
		}
		reqs = append(reqs, rs...)
	}
	for _, r := range reqs {
		c.perMin[requestClass(r)] += 1 / c.window.Minutes()
	}
	sessions, _, err := k.ccli.Session().List(nil)
	if err != nil {
		return c, fmt.Errorf("consul sessions: %w", err)
	}
	c.sessions = len(sessions)
	return c, nil
}

// clustersCurves renders the family's table, plots and notes, with the
// paper estimate for 100 and 1,000 clusters from the least-squares slope.
func clustersCurves(rows []clustersRow, so scaleOptions) (scaleTable, []scalePlot, []string) {
	t := scaleTable{Head: []string{"clusters", "members", "cold start: first / last healthy (s)", "Consul requests/min", "of them KV writes/min", "session renewals/min", "Consul sessions",
		"Nomad requests/min", "of them blocking", "Consul CPU %", "Nomad agent CPU %", "Nomad helpers CPU % (n)", "members CPU %", "Consul RSS MiB", "Nomad RSS MiB", "helpers RSS MiB", "members RSS MiB"}}
	var x, consulReq, nomadReq, kvw, renew, sess, cCPU, nCPU, hCPU, mCPU, cRSS, nRSS, cold []float64
	var coldX []float64
	var detail []string
	for _, r := range rows {
		i := r.idle
		consulTotal, nomadTotal := 0.0, 0.0
		for cl, v := range i.perMin {
			if strings.HasPrefix(cl, "consul") {
				consulTotal += v
			} else {
				nomadTotal += v
			}
		}
		cs := "– (baseline: the agents alone)"
		if r.clusters > 0 {
			cs = fmt.Sprintf("%s / %s", fmtNum(r.firstUp), fmtNum(r.coldStart))
			coldX, cold = append(coldX, float64(r.clusters)), append(cold, r.coldStart)
		}
		t.Rows = append(t.Rows, []string{fmt.Sprint(r.clusters), fmt.Sprint(3 * r.clusters), cs, fmtNum(consulTotal), fmtNum(i.perMin["consul KV writes"]), fmtNum(i.perMin["consul session renewals"]), fmt.Sprint(i.sessions),
			fmtNum(nomadTotal), fmtNum(i.perMin["nomad blocking queries"]), fmtNum(i.consulCPU), fmtNum(i.nomadCPU), fmt.Sprintf("%s (%d)", fmtNum(i.helpersCPU), i.helpers), fmtNum(i.membersCPU),
			fmtNum(i.consulRSS), fmtNum(i.nomadRSS), fmtNum(i.helpersRSS), fmtNum(i.membersRSS)})
		x = append(x, float64(r.clusters))
		consulReq, nomadReq = append(consulReq, consulTotal), append(nomadReq, nomadTotal)
		kvw, renew, sess = append(kvw, i.perMin["consul KV writes"]), append(renew, i.perMin["consul session renewals"]), append(sess, float64(i.sessions))
		cCPU, nCPU, hCPU, mCPU = append(cCPU, i.consulCPU), append(nCPU, i.nomadCPU), append(hCPU, i.helpersCPU), append(mCPU, i.membersCPU)
		cRSS, nRSS = append(cRSS, i.consulRSS), append(nRSS, i.nomadRSS)
		var parts []string
		for _, cl := range requestClasses {
			if v := i.perMin[cl]; v > 0 {
				parts = append(parts, fmt.Sprintf("%s %s", cl, fmtNum(v)))
			}
		}
		detail = append(detail, fmt.Sprintf("%d clusters (window %s): %s", r.clusters, i.window.Round(time.Second), strings.Join(parts, ", ")))
	}
	plots := []scalePlot{
		{File: "clusters-requests.png", Title: "Idle API requests per minute by clusters on one Nomad", XLabel: "clusters of 3 members", YLabel: "requests/min", Series: []scaleSeries{
			{"Consul, all", x, consulReq}, {"Nomad, all", x, nomadReq}, {"Consul KV writes", x, kvw}, {"Consul session renewals", x, renew}}},
		{File: "clusters-cpu.png", Title: "Idle CPU by clusters on one Nomad", XLabel: "clusters of 3 members", YLabel: "% of one core", Series: []scaleSeries{
			{"Consul agent", x, cCPU}, {"Nomad agent", x, nCPU}, {"Nomad executors + logmons", x, hCPU}, {"members", x, mCPU}}},
		{File: "clusters-coldstart.png", Title: "Cold start of all clusters at once", XLabel: "clusters of 3 members", YLabel: "seconds to the last healthy", Series: []scaleSeries{
			{"last cluster healthy", coldX, cold}}},
	}
	notes := []string{
		fmt.Sprintf("How: real `consul agent -dev` and `nomad agent -dev` (devagents: one server and client each, raw_exec), measured first with no cluster (the row 0: the baseline of every column, in the same run), then at each size: N jobs rendered by `etcd-nomad job render` (3 members each, Consul coordination, stale_after 5s, session_ttl the default, quota_backend_bytes %s; the Nomad client advertises %d GiB of free disk (client.disk_free_mb) so that the sticky disks fit the scheduler, though idle members write a few MiB each) submitted with `nomad job run` all at once (cold start: until each cluster's 3 members are healthy voters of one cluster id on their /status and Consul shows 3 passing checks, polled every second), then 15 s to settle and an idle window of %s: requests counted from the agents' DEBUG logs (every HTTP request is logged; one with an index is a blocking query), CPU (utime+stime) and RSS from /proc of the agents' PIDs, of the Nomad client's per-task helpers (`nomad executor`, `nomad logmon`) and of the members; the jobs are then stopped and purged before the next size. The dev agent is a Nomad server and client in one process: its CPU is both roles'.",
			clustersQuota, clustersDiskFreeMB>>10, so.idle),
		"Requests per minute by class: " + strings.Join(detail, "; ") + ".",
	}
	notes = append(notes, paperEstimate(x, consulReq, nomadReq, kvw, renew, sess, cCPU, nCPU, hCPU, mCPU, cRSS, nRSS)...)
	return t, plots, notes
}

// addSeries is a + b point by point.
func addSeries(a, b []float64) []float64 {
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] + b[i]
	}
	return out
}

// paperEstimate extrapolates the idle cost to 100 and 1,000 clusters with
// the least-squares line over the measured sizes, and says which limit
// comes first.
func paperEstimate(x, consulReq, nomadReq, kvw, renew, sess, cCPU, nCPU, hCPU, mCPU, cRSS, nRSS []float64) []string {
	if len(x) < 2 {
		return []string{"Paper estimate: needs at least two sizes (the baseline and one)."}
	}
	type est struct {
		name, unit string
		y          []float64
	}
	ests := []est{{"Consul requests", "/min", consulReq}, {"Consul KV writes", "/min", kvw}, {"Consul session renewals", "/min", renew}, {"Consul sessions", "", sess},
		{"Nomad requests", "/min", nomadReq}, {"Consul agent CPU", "% of a core", cCPU}, {"Nomad agent CPU", "% of a core", nCPU},
		{"Nomad helpers CPU", "% of a core", hCPU}, {"members CPU", "% of a core", mCPU}, {"Consul RSS", " MiB", cRSS}, {"Nomad RSS", " MiB", nRSS}}
	t := scaleTable{Head: []string{"what", "at 0 (fit)", "per cluster (slope)", "100 clusters", "1,000 clusters"}}
	at := map[string][2]float64{}
	for _, e := range ests {
		a, b := fitLine(x, e.y)
		v100, v1000 := a+100*b, a+1000*b
		at[e.name] = [2]float64{v100, v1000}
		name := e.name
		if u := strings.TrimSpace(e.unit); u != "" {
			name += " (" + u + ")"
		}
		t.Rows = append(t.Rows, []string{name, fmtNum(a), fmtNum(b), fmtNum(v100), fmtNum(v1000)})
	}
	raft := func(i int) float64 { return (at["Consul KV writes"][i] + at["Consul session renewals"][i]) / 60 }
	serverCPU := func(i int) float64 { return at["Consul agent CPU"][i] + at["Nomad agent CPU"][i] }
	limit := fmt.Sprintf("Reading it: at 1,000 clusters the servers would see about %s Consul requests/s and %s Nomad requests/s, of which about %s/s are Raft writes on the Consul servers (KV writes and session renewals; a Consul cluster on SSDs commits a few thousand a second), hold %s sessions, and spend about %s%% of a core in the Consul and Nomad agents as measured here (server and client in one process each). ",
		fmtNum(at["Consul requests"][1]/60), fmtNum(at["Nomad requests"][1]/60), fmtNum(raft(1)), fmtNum(at["Consul sessions"][1]), fmtNum(serverCPU(1)))
	// Where each grows into a whole core, or the KV writes into a
	// budget of 1,000 Raft writes a second.
	until := func(name string, cap float64) string {
		a, b := fitLine(x, map[string][]float64{"consul": cCPU, "nomad": nCPU, "raft": addSeries(kvw, renew)}[name])
		if name == "raft" {
			a, b = a/60, b/60
		}
		if b <= 0 {
			return "never (no growth measured)"
		}
		return fmt.Sprintf("about %s clusters", fmtNum((cap-a)/b))
	}
	limit += fmt.Sprintf("Where it bends: the Consul agent would use a whole core at %s, the Nomad agent at %s, and the KV writes would reach 1,000 Raft writes a second at %s. ",
		until("consul", 100), until("nomad", 100), until("raft", 1000))
	limit += "What drives it while idle: the KV writes are mostly each cluster leader's summary, rewritten unchanged as its heartbeat in the coordinator every quarter of the recovery grace (task/summary.go summaryBeat, 5 s to 30 s: 30 s here, with the default grace of 5 min), and each such write wakes the blocking queries the cluster's members hold on its keys, so the blocking queries returned per minute are about the members times the summary writes; no member holds a Consul session while idle (sessions are taken around decisions: seeding, membership changes, recovery), and the members make no Nomad API call while idle. " +
		"So the first limit is the Consul servers' work for the summary heartbeat and its fan-out to the watchers: a summary beat longer than its cap of 30 s, or watching the summary from one member only, divides it; the Nomad servers see almost nothing from idle clusters. On this single machine the members themselves (their CPU row: about a tenth of a core per idle cluster) run out long before the agents, a cost that spreads over the Nomad clients in production, not the servers'. " +
		"A caveat of the counting: a request is logged when it completes, so a blocking query held across the whole window (Consul's default wait is 5 minutes) is not counted; the ones counted are those a change woke."
	return []string{"Paper estimate from the measured slope (least squares over 0 and the measured sizes; linear by assumption, idle only: a deployment or a failure adds bursts the idle figures do not show):\n\n" + t.markdown(), limit}
}
