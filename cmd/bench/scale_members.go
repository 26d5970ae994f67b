package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/localmode"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// scaleStaleAfter and scaleRecoveryGrace are the members family's
// stale_after and recovery_grace (localmode's default, the d figure's
// grace).
const (
	scaleStaleAfter    = 5 * time.Second
	scaleRecoveryGrace = recoveryGrace
)

// subEnv is e with its scratch directory under e's: each size of a family
// has its own files, removed with it.
func (e *runEnv) subEnv(name string) *runEnv {
	s := *e
	s.opts.work = filepath.Join(e.opts.work, name)
	return &s
}

// statusURLs are the members' /status bases (TLS off).
func statusURLs(ps []localmode.MemberPorts) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("http://127.0.0.1:%d", p.Status))
	}
	return out
}

// waitMembersHealthy polls the members' /status until each answers
// healthy, none a learner, all of one cluster id, and ok (if not nil)
// holds of them.
func waitMembersHealthy(ctx context.Context, urls []string, timeout time.Duration, ok func([]status.Member) bool) ([]status.Member, error) {
	hc := &http.Client{Timeout: 2 * time.Second}
	var got []status.Member
	err := poll(ctx, timeout, fmt.Sprintf("%d healthy voters of one cluster", len(urls)), func() (bool, string) {
		got = got[:0]
		var ids []string
		for _, u := range urls {
			m, err := status.Fetch(ctx, hc, u)
			if err != nil {
				return false, err.Error()
			}
			if !m.Healthy || m.Learner {
				return false, fmt.Sprintf("%s: healthy %v learner %v (%s)", m.Name, m.Healthy, m.Learner, m.Decision)
			}
			if len(got) > 0 && m.ClusterID != got[0].ClusterID {
				return false, fmt.Sprintf("cluster ids %x and %x", got[0].ClusterID, m.ClusterID)
			}
			got = append(got, m)
			ids = append(ids, fmt.Sprintf("%s=%x", m.Name, m.MemberID))
		}
		if ok != nil && !ok(got) {
			return false, "not yet: " + strings.Join(ids, " ")
		}
		return true, ""
	})
	return got, err
}

// leaderIndex is the index in eps of the endpoint that leads.
func leaderIndex(ctx context.Context, cli *clientv3.Client, eps []string) (int, error) {
	var idx int
	err := poll(ctx, time.Minute, "a leader", func() (bool, string) {
		for i, ep := range eps {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := cli.Status(sctx, ep)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				idx = i
				return true, ""
			}
		}
		return false, "no endpoint leads"
	})
	return idx, err
}

// untilWritable polls puts (1 s each) until one is acknowledged and
// returns the time since from.
func untilWritable(ctx context.Context, cli *clientv3.Client, from time.Time, key string) (time.Duration, error) {
	err := poll(ctx, 2*time.Minute, "an acknowledged put", func() (bool, string) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := cli.Put(pctx, key, "v")
		return err == nil, fmt.Sprint(err)
	})
	return time.Since(from), err
}

// loseData stops member name of an etcd-nomad cluster, removes its
// data dir's current data and starts it again: a member replaced with
// its data lost (the old member is removed, a new one joins as a
// learner and is promoted).
func (c *cluster) loseData(name string) error {
	if err := c.sup.Stop(name, 20*time.Second); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(c.lay.DataDir(), name, "current")); err != nil {
		return err
	}
	return c.sup.Start(name)
}

// membersRow is one cluster size's figures, in seconds and ops/s.
type membersRow struct {
	n                              int
	bootOurs, bootPlain            float64
	killOurs, killPlain            float64
	killHealthy, replace, quorum   float64
	putOurs, putPlain              float64
	putErrOurs, putErrPlain, quoLo int
}

// membersFamily measures, at each cluster size, bootstrap, kill -9 of the
// leader, the replacement of a member whose data is lost and a quorum
// loss on a local etcd-nomad cluster, and put throughput, next to a plain
// embedded etcd cluster of the same size in the same run.
func (e *runEnv) membersFamily(ctx context.Context, fam *scaleFamily) error {
	so := e.opts.scale
	fam.Title = "Members: " + sizesText(so.members)
	fam.Table.Head = []string{"members", "bootstrap → all healthy (s)", "plain etcd bootstrap (s)", "kill -9 leader → writable (s)", "plain etcd (s)", "killed leader healthy again (s)", "replacement, data lost → healthy (s)", "quorum loss → writable (s)", "put ops/s", "plain etcd put ops/s", "put ratio", "load (1 min) at the size's end"}
	var rows []membersRow
	defer func() { fam.Plots, fam.Notes = membersCurves(rows, so) }()
	for _, n := range so.members {
		r, err := e.membersAt(ctx, n)
		if err != nil {
			return fmt.Errorf("%d members: %w", n, err)
		}
		rows = append(rows, r)
		fam.Table.Rows = append(fam.Table.Rows, []string{fmt.Sprint(n), fmtNum(r.bootOurs), fmtNum(r.bootPlain), fmtNum(r.killOurs), fmtNum(r.killPlain), fmtNum(r.killHealthy), fmtNum(r.replace),
			fmt.Sprintf("%s (%d lost)", fmtNum(r.quorum), r.quoLo), fmtNum(r.putOurs), fmtNum(r.putPlain), ratioText(r.putOurs, r.putPlain), loadNow()})
	}
	return nil
}

func membersCurves(rows []membersRow, so scaleOptions) ([]scalePlot, []string) {
	var x, bo, bp, ko, kp, kh, rp, ql, po, pp []float64
	for _, r := range rows {
		x = append(x, float64(r.n))
		bo, bp, ko, kp = append(bo, r.bootOurs), append(bp, r.bootPlain), append(ko, r.killOurs), append(kp, r.killPlain)
		kh, rp, ql = append(kh, r.killHealthy), append(rp, r.replace), append(ql, r.quorum)
		po, pp = append(po, r.putOurs), append(pp, r.putPlain)
	}
	plots := []scalePlot{
		{File: "members-recovery.png", Title: "Recovery times by cluster size (local members)", XLabel: "members", YLabel: "seconds", Series: []scaleSeries{
			{"bootstrap (etcd-nomad)", x, bo}, {"bootstrap (plain etcd)", x, bp}, {"kill -9 leader -> writable (etcd-nomad)", x, ko}, {"kill -9 leader -> writable (plain etcd)", x, kp},
			{"replacement, data lost -> healthy", x, rp}, {"quorum loss -> writable", x, ql}}},
		{File: "members-put.png", Title: "Put throughput by cluster size", XLabel: "members", YLabel: "ops/s", Series: []scaleSeries{
			{"etcd-nomad", x, po}, {"plain etcd", x, pp}}},
	}
	var errNote []string
	for _, r := range rows {
		if r.putErrOurs+r.putErrPlain > 0 {
			errNote = append(errNote, fmt.Sprintf("%d members: %d failed puts on etcd-nomad, %d on plain etcd", r.n, r.putErrOurs, r.putErrPlain))
		}
	}
	var slopes []string
	for _, s := range []struct {
		name string
		y    []float64
	}{{"bootstrap", bo}, {"plain bootstrap", bp}, {"kill -9 leader → writable", ko}, {"replacement", rp}, {"quorum loss", ql}, {"put ops/s", po}, {"plain put ops/s", pp}} {
		if len(x) < 2 {
			break
		}
		_, b := fitLine(x, s.y)
		slopes = append(slopes, fmt.Sprintf("%s %s per member", s.name, fmtNum(b)))
	}
	notes := []string{
		fmt.Sprintf("How: at each size a local etcd-nomad cluster (`localmode`: one `etcd-nomad member` process per member, static provider, file-lock coordinator, TLS off, heartbeat 100ms, election 1s, stale_after %s, recovery_grace %s; a member that dies is restarted after 0.5 s, as Nomad would) and a plain embedded etcd cluster of the same size (`bench etcd` processes, the same etcd settings) on 127.0.0.1. "+
			"Bootstrap: from starting the processes until every member's /status says healthy voter of one cluster id (plain: every endpoint answers and the member list has n voters); the plain cluster is started and measured first, then ours, one at a time. "+
			"Put: the a figure's workload (%d clients, 256-byte values over 10000 keys), %d rounds of %s per side, alternating which side goes first, the median counts; both clusters up. "+
			"Kill -9 of the leader: SIGKILL to the leading member's process, then puts (1 s timeout each) until one is acknowledged; plain etcd the same (its killed member stays down). "+
			"Killed leader healthy again: from the kill until every /status is a healthy voter again (the restart 0.5 s later, etcd's restart and catch-up). "+
			"Replacement: a follower is stopped, its data dir's `current` removed and the member started again: the old member is removed, a new one added as a learner, caught up and promoted; until every /status is a healthy voter with a new member id. Plain etcd has no automatic replacement: no baseline. "+
			"Quorum loss: the smallest majority (n/2+1 members) stopped for good, coming back as new empty members on new ports, as the d figure does for 3; until a put is acknowledged through the new endpoints, the record at the next epoch from a survivor's data, a key written before read back; it includes the %s grace etcd-nomad waits on purpose.",
			scaleStaleAfter, scaleRecoveryGrace, 16, so.kvRounds, so.kvDur, scaleRecoveryGrace),
	}
	if len(slopes) > 0 {
		notes = append(notes, "Least-squares slopes over the sizes: "+strings.Join(slopes, "; ")+".")
	}
	notes = append(notes, "Why etcd-nomad's bootstrap grows with the members where plain etcd's barely does: plain etcd starts every member at once with a static initial cluster; an etcd-nomad cluster is seeded by one member and the others join one membership change at a time (DESIGN.md invariant 3: each joins as a learner and is promoted before the next may join), each change a round of the members' 1-second loop, etcd's learner add and promotion, so its bootstrap is about linear in the members (the slope above per member). "+
		"Kill -9 of the leader is etcd's election either way (election timeout 1 s plus the client's retry): it does not grow with the members. "+
		"The replacement is one removal and one join (learner, catch-up, promotion) whatever the size; the quorum loss includes the recovery grace (5 s), the survivors' probes of the lost members and the new members' joins one at a time, so it grows with the members lost.")
	if len(errNote) > 0 {
		notes = append(notes, "Failed puts (not counted): "+strings.Join(errNote, "; ")+".")
	}
	return plots, notes
}

// membersAt measures one cluster size.
func (e *runEnv) membersAt(ctx context.Context, n int) (membersRow, error) {
	r := membersRow{n: n}
	sub := e.subEnv(fmt.Sprintf("members-%d", n))
	defer os.RemoveAll(sub.opts.work)
	ports, err := localmode.AllocatePorts(2 * n)
	if err != nil {
		return r, err
	}
	if _, err := e.etcdNomad(ctx); err != nil { // built before the clock starts
		return r, err
	}
	// Plain etcd first, alone.
	start := time.Now()
	plain, err := sub.plainCluster(ctx, ports[:n])
	if err != nil {
		return r, err
	}
	defer plain.close()
	if err := plain.connect(ctx); err != nil {
		return r, fmt.Errorf("plain etcd: %w", err)
	}
	r.bootPlain = time.Since(start).Seconds()
	e.log.Info("plain etcd up", "members", n, "took", r.bootPlain)

	opts := localmode.Options{Name: fmt.Sprintf("scale-%d", n), TLSMode: config.TLSOff, StaleAfter: scaleStaleAfter, RecoveryGrace: scaleRecoveryGrace}
	mports := ports[n:]
	start = time.Now()
	managed, err := sub.managedClusterIn(ctx, mports, "etcd-nomad", "managed", opts, true)
	if err != nil {
		return r, err
	}
	defer managed.close()
	if _, err := waitMembersHealthy(ctx, statusURLs(mports), 3*time.Minute, nil); err != nil {
		return r, fmt.Errorf("etcd-nomad bootstrap: %w", err)
	}
	r.bootOurs = time.Since(start).Seconds()
	if err := managed.connect(ctx); err != nil {
		return r, fmt.Errorf("etcd-nomad: %w", err)
	}
	e.log.Info("etcd-nomad up", "members", n, "took", r.bootOurs)

	value := strings.Repeat("v", kvValueSize)
	var po, pp []loadResult
	for round := 0; round < e.opts.scale.kvRounds; round++ {
		order := []*cluster{plain, managed}
		if round%2 == 1 {
			order = []*cluster{managed, plain}
		}
		for _, c := range order {
			lr := runLoad(ctx, c.clis, e.opts.kvClients, e.opts.scale.kvDur, putOp(value))
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			if c == plain {
				pp = append(pp, lr)
			} else {
				po = append(po, lr)
			}
			e.log.Info("put round", "members", n, "cluster", c.name, "round", round, "ops_per_sec", int(lr.opsPerSec))
		}
	}
	mp, mm := median(pp), median(po)
	r.putPlain, r.putOurs, r.putErrPlain, r.putErrOurs = mp.opsPerSec, mm.opsPerSec, mp.errors, mm.errors

	// Kill -9 of the leader, plain etcd first; its cluster is done then.
	li, err := leaderIndex(ctx, plain.clis[0], plain.eps)
	if err != nil {
		return r, fmt.Errorf("plain etcd: %w", err)
	}
	killed := time.Now()
	if err := syscall.Kill(plain.pids()[li], syscall.SIGKILL); err != nil {
		return r, fmt.Errorf("kill plain leader: %w", err)
	}
	d, err := untilWritable(ctx, plain.clis[0], killed, "after-kill")
	if err != nil {
		return r, fmt.Errorf("plain etcd after kill -9 of its leader: %w", err)
	}
	r.killPlain = d.Seconds()
	plain.close()

	li, err = leaderIndex(ctx, managed.clis[0], managed.eps)
	if err != nil {
		return r, fmt.Errorf("etcd-nomad: %w", err)
	}
	killed = time.Now()
	if err := managed.sup.Kill(localmode.MemberName(li), syscall.SIGKILL); err != nil {
		return r, err
	}
	if d, err = untilWritable(ctx, managed.clis[0], killed, "after-kill"); err != nil {
		return r, fmt.Errorf("etcd-nomad after kill -9 of its leader: %w", err)
	}
	r.killOurs = d.Seconds()
	if _, err := waitMembersHealthy(ctx, statusURLs(mports), 3*time.Minute, nil); err != nil {
		return r, fmt.Errorf("etcd-nomad after kill -9 of its leader: %w", err)
	}
	r.killHealthy = time.Since(killed).Seconds()
	e.log.Info("kill -9 of the leader", "members", n, "plain", r.killPlain, "ours", r.killOurs, "healthy", r.killHealthy)

	// Replacement of a follower whose data is lost.
	li, err = leaderIndex(ctx, managed.clis[0], managed.eps)
	if err != nil {
		return r, err
	}
	victim := (li + 1) % n
	name := localmode.MemberName(victim)
	before, err := status.Fetch(ctx, &http.Client{Timeout: 2 * time.Second}, statusURLs(mports)[victim])
	if err != nil {
		return r, err
	}
	start = time.Now()
	if err := managed.loseData(name); err != nil {
		return r, err
	}
	if _, err := waitMembersHealthy(ctx, statusURLs(mports), 3*time.Minute, func(ms []status.Member) bool {
		return ms[victim].MemberID != before.MemberID && ms[victim].MemberID != 0
	}); err != nil {
		return r, fmt.Errorf("replacement of %s: %w", name, err)
	}
	r.replace = time.Since(start).Seconds()
	e.log.Info("replacement", "members", n, "took", r.replace)

	// Quorum loss: the smallest majority, the last members.
	q := n/2 + 1
	var lost []int
	for i := n - q; i < n; i++ {
		lost = append(lost, i)
	}
	took, _, err := sub.loseQuorum(ctx, managed.sup, managed.lay, opts, mports, lost, managed.clis[0], fmt.Sprintf("quorum-%d", n))
	if err != nil {
		return r, fmt.Errorf("quorum loss of %d: %w", q, err)
	}
	r.quorum, r.quoLo = took.Seconds(), q
	e.log.Info("quorum loss", "members", n, "lost", q, "took", r.quorum)
	return r, nil
}
