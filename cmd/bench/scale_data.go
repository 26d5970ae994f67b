package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/procstat"
	"github.com/etcd-nomad/etcd-nomad/localmode"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// diskWriteRate writes size bytes to a new file under dir in 4 MiB
// blocks, fsyncs it and removes it: the disk's sequential write rate in
// MiB/s, as a dd with conv=fsync would measure it.
func diskWriteRate(dir string, size int64) (float64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	path := filepath.Join(dir, "disk-write-rate")
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	buf := make([]byte, 4<<20)
	for i := range buf {
		buf[i] = byte(i*7 + i>>9) // not zeros: nothing below may skip them
	}
	start := time.Now()
	for n := int64(0); n < size; n += int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), size-n)]); err != nil {
			f.Close()
			return 0, fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, fmt.Errorf("fsync %s: %w", path, err)
	}
	took := time.Since(start)
	if err := f.Close(); err != nil {
		return 0, err
	}
	return mibps(size, took), nil
}

// dataRow is one data size's figures.
type dataRow struct {
	mib      int
	diskMiBs float64
	snap     snapRun
	fill     float64 // seconds to write the keyspace through the cluster
	dbBytes  int64
	// the replacement of a follower whose data is lost: until it is
	// seen as a learner, until it is a healthy voter; CPU seconds of the
	// leader and of the new member meanwhile.
	learnerAt, promoted   float64
	leaderCPU, learnerCPU float64
	defrag, defragCPU     float64
	floorWrite            float64 // db bytes at the disk's rate, s
}

// learnerText is when the replacement was first seen as a learner, or
// that no /status poll (every 200 ms) caught it as one.
func learnerText(at float64) string {
	if at == 0 {
		return "not seen"
	}
	return fmtNum(at)
}

// dataFamily measures, at each keyspace size: snapshot save and restore
// against etcdctl and etcdutl (the e figures' code), a learner's catch-up
// and promotion after a member's data is lost, defragmentation, and the
// disk's sequential write rate, all in the same run.
func (e *runEnv) dataFamily(ctx context.Context, fam *scaleFamily) error {
	so := e.opts.scale
	fam.Title = "Data size: " + sizesText(so.dataMiB) + " MiB"
	fam.Table.Head = []string{"keyspace (MiB)", "db (MiB)", "save (s)", "etcdctl save (s)", "save ratio", "restore (s)", "etcdutl restore (s)", "restore ratio",
		"replacement → learner (s)", "→ promoted, healthy (s)", "defrag (s)", "disk write (MiB/s)", "db at disk rate (s)", "load (1 min) at the size's end"}
	var rows []dataRow
	defer func() { fam.Plots, fam.Notes = dataCurves(rows) }()
	for _, mib := range so.dataMiB {
		r, err := e.dataAt(ctx, mib)
		if err != nil {
			return fmt.Errorf("%d MiB: %w", mib, err)
		}
		rows = append(rows, r)
		s := r.snap
		fam.Table.Rows = append(fam.Table.Rows, []string{fmt.Sprint(mib), fmtNum(float64(r.dbBytes) / (1 << 20)),
			fmtNum(s.SaveOurs.Seconds()), fmtNum(s.SaveCtl.Seconds()), ratioText(s.SaveCtl.Seconds(), s.SaveOurs.Seconds()),
			fmtNum(s.RestoreOurs.Seconds()), fmtNum(s.RestoreUtl.Seconds()), ratioText(s.RestoreUtl.Seconds(), s.RestoreOurs.Seconds()),
			learnerText(r.learnerAt), fmtNum(r.promoted), fmtNum(r.defrag), fmtNum(r.diskMiBs), fmtNum(r.floorWrite), loadNow()})
	}
	return nil
}

func dataCurves(rows []dataRow) ([]scalePlot, []string) {
	var x, so, sc, ro, ru, pr, df, fl []float64
	cpuOf := func(what string) []float64 {
		var out []float64
		for _, r := range rows {
			s := r.snap
			out = append(out, map[string]float64{
				"save": (s.CPUOurs + s.CPUOursSrv).Seconds(), "etcdctl": (s.CPUCtl + s.CPUCtlSrv).Seconds(),
				"restore": s.CPURestore.Seconds(), "etcdutl": s.CPUUtl.Seconds(),
				"replacement": r.leaderCPU + r.learnerCPU, "defrag": r.defragCPU}[what])
		}
		return out
	}
	var where scaleTable
	where.Head = []string{"keyspace (MiB)", "save wall (s)", "save CPU-s: saver + etcd server", "etcdctl wall (s)", "etcdctl CPU-s: client + server", "stages alone CPU-s: compress / encrypt / sha256",
		"restore wall (s): fetch+decode / complete", "restore CPU-s", "etcdutl wall (s)", "etcdutl CPU-s", "stages alone: decrypt / decompress CPU-s, write+fsync wall s",
		"catch-up CPU-s: leader / learner", "defrag CPU-s (member)", "fill (s)"}
	for _, r := range rows {
		s, st := r.snap, r.snap.Stages
		x = append(x, float64(r.mib))
		so, sc, ro, ru = append(so, s.SaveOurs.Seconds()), append(sc, s.SaveCtl.Seconds()), append(ro, s.RestoreOurs.Seconds()), append(ru, s.RestoreUtl.Seconds())
		pr, df, fl = append(pr, r.promoted), append(df, r.defrag), append(fl, r.floorWrite)
		where.Rows = append(where.Rows, []string{fmt.Sprint(r.mib),
			fmtNum(s.SaveOurs.Seconds()), fmt.Sprintf("%s + %s", fmtNum(s.CPUOurs.Seconds()), fmtNum(s.CPUOursSrv.Seconds())),
			fmtNum(s.SaveCtl.Seconds()), fmt.Sprintf("%s + %s", fmtNum(s.CPUCtl.Seconds()), fmtNum(s.CPUCtlSrv.Seconds())),
			fmt.Sprintf("%s / %s / %s", fmtNum(st.Compress), fmtNum(st.Encrypt), fmtNum(st.Hash)),
			fmt.Sprintf("%s: %s / %s", fmtNum(s.RestoreOurs.Seconds()), fmtNum(s.Steps.Fetch), fmtNum(s.Steps.Install)), fmtNum(s.CPURestore.Seconds()),
			fmtNum(s.RestoreUtl.Seconds()), fmtNum(s.CPUUtl.Seconds()),
			fmt.Sprintf("%s / %s, %s", fmtNum(st.Decrypt), fmtNum(st.Decompress), fmtNum(st.Write)),
			fmt.Sprintf("%s / %s", fmtNum(r.leaderCPU), fmtNum(r.learnerCPU)), fmtNum(r.defragCPU), fmtNum(r.fill)})
	}
	plots := []scalePlot{
		{File: "data-snapshot.png", Title: "Snapshot save and restore by keyspace size", XLabel: "keyspace (MiB)", YLabel: "seconds", Series: []scaleSeries{
			{"save (etcd-nomad)", x, so}, {"etcdctl snapshot save", x, sc}, {"restore (etcd-nomad)", x, ro}, {"etcdutl snapshot restore", x, ru}}},
		{File: "data-member.png", Title: "Replacement (learner catch-up, promotion) and defrag by keyspace size", XLabel: "keyspace (MiB)", YLabel: "seconds", Series: []scaleSeries{
			{"replacement, data lost -> promoted, healthy", x, pr}, {"defragmentation", x, df}, {"db at the disk's write rate", x, fl}}},
	}
	notes := []string{"Where the time goes, per size (CPU seconds are user + system of the processes named; on 2 cores a wall time below half the CPU seconds is impossible, one near the CPU seconds means one core's worth of work or a busy machine):\n\n" + where.markdown()}
	codec := "the stored codec"
	if len(rows) > 0 {
		codec = rows[0].snap.Codec
	}
	notes = append(notes, "How: save and restore are the e figures' code (`bench` `snapshotFigures`) at each size, one round per side (`-snapshot-rounds 1` here: the sizes are the repetition): a 1-member plain etcd filled with 1 MiB JSON-object values, `etcdctl snapshot save` vs etcd-nomad's `snapshot.Save` ("+codec+" + age X25519 + sha256 into a file store, fsynced), each a separate process; `etcdutl snapshot restore` of the plaintext file vs etcd-nomad's fetch, decode and `datadir.InstallSnapshot`, both with a revision bump. The stages-alone columns are `bench snapshot-stages` on the same snapshot, in memory. "+
		"Replacement: a local 3-member etcd-nomad cluster (TLS off, stale_after 5s) filled with the same keyspace through the cluster (fill column); a follower is stopped, its data dir's `current` removed and the member started: the old member is removed, the new one added as a learner (first seen as a learner on its /status), sent the leader's snapshot or log and promoted; until every /status is a healthy voter with a new member id. "+
		"Defragmentation: etcd's `Defragment` of one follower of that cluster after the replacement (the db holds the keyspace with no free pages to speak of: the defrag rewrites all of it). "+
		"Disk: the sequential write rate of the disk that holds the scratch directory, min(keyspace, 1 GiB) written in 4 MiB blocks and fsynced (Go, like `dd conv=fsync`), measured at each size just before it; 'db at disk rate' is the db size at that rate, the physical floor of writing the data once (a restore, a learner's copy, a defrag each write it at least once).")
	// A figure that grows faster than the data: is it work (its CPU
	// grows as much) or waiting (on the disk, whose rate is measured at
	// each size, or on the machine's other load)?
	var disk []float64
	for _, r := range rows {
		disk = append(disk, r.diskMiBs)
	}
	for _, s := range []struct {
		name   string
		y, cpu []float64
	}{{"save", so, cpuOf("save")}, {"etcdctl save", sc, cpuOf("etcdctl")}, {"restore", ro, cpuOf("restore")}, {"etcdutl restore", ru, cpuOf("etcdutl")},
		{"replacement", pr, cpuOf("replacement")}, {"defrag", df, cpuOf("defrag")}} {
		g := growth(x, s.y)
		if g <= 1.3 {
			continue
		}
		last := len(x) - 1
		notes = append(notes, fmt.Sprintf("%s grows faster than the data: %.2f× linear from %s to %s MiB (%s s to %s s). Its CPU seconds grew %.2f× linear (%s to %s CPU-s), and the disk's write rate measured just before each size went from %s to %s MiB/s. %s",
			s.name, g, fmtNum(x[0]), fmtNum(x[last]), fmtNum(s.y[0]), fmtNum(s.y[last]), growth(x, s.cpu), fmtNum(s.cpu[0]), fmtNum(s.cpu[last]), fmtNum(disk[0]), fmtNum(disk[last]),
			ifThen(growth(x, s.cpu) < g*0.8, "The work grew about with the data; the rest of the wall time is waiting: for the disk (shared with the other sessions' builds and tests, its rate is what changed) and for the CPUs the machine's other load leaves (the load column).",
				"The work itself grew faster than the data: see the where-the-time-goes table.")))
	}
	return plots, notes
}

// dataAt measures one keyspace size, then removes its files.
func (e *runEnv) dataAt(ctx context.Context, mib int) (dataRow, error) {
	r := dataRow{mib: mib}
	sub := e.subEnv(fmt.Sprintf("data-%d", mib))
	defer os.RemoveAll(sub.opts.work)
	var err error
	if r.diskMiBs, err = diskWriteRate(sub.opts.work, min(int64(mib), 1024)<<20); err != nil {
		return r, err
	}
	e.log.Info("disk write rate", "mib_per_s", r.diskMiBs)

	sub.opts.snapshotBytes = int64(mib) << 20
	sub.opts.snapshotRound = 1
	sub.snapOut = &r.snap
	if _, _, err := sub.snapshotFigures(ctx); err != nil {
		return r, fmt.Errorf("snapshot figures: %w", err)
	}
	sub.snapOut = nil
	e.log.Info("snapshots", "mib", mib, "save", r.snap.SaveOurs, "etcdctl", r.snap.SaveCtl, "restore", r.snap.RestoreOurs, "etcdutl", r.snap.RestoreUtl)

	ports, err := localmode.AllocatePorts(3)
	if err != nil {
		return r, err
	}
	opts := localmode.Options{Name: fmt.Sprintf("data-%d", mib), TLSMode: config.TLSOff, StaleAfter: scaleStaleAfter}
	c, err := sub.managedClusterIn(ctx, ports, "etcd-nomad", "managed", opts, true)
	if err != nil {
		return r, err
	}
	defer c.close()
	if err := c.connect(ctx); err != nil {
		return r, err
	}
	filler, _, err := fillerFor(e.opts.snapshotData)
	if err != nil {
		return r, err
	}
	start := time.Now()
	if err := fill(ctx, c.clis[0], int((int64(mib)<<20+valueSize-1)/valueSize), filler); err != nil {
		return r, err
	}
	r.fill = time.Since(start).Seconds()
	urls := statusURLs(ports)
	if _, err := waitMembersHealthy(ctx, urls, 3*time.Minute, nil); err != nil {
		return r, err
	}
	li, err := leaderIndex(ctx, c.clis[0], c.eps)
	if err != nil {
		return r, err
	}
	victim := (li + 1) % 3
	name := localmode.MemberName(victim)
	hc := &http.Client{Timeout: 2 * time.Second}
	before, err := status.Fetch(ctx, hc, urls[victim])
	if err != nil {
		return r, err
	}
	r.dbBytes = before.DBSize
	leaderPID := c.sup.PID(localmode.MemberName(li))
	leader0, err := procstat.CPUTime(leaderPID)
	if err != nil {
		return r, err
	}
	start = time.Now()
	if err := c.loseData(name); err != nil {
		return r, err
	}
	var learnerAt time.Duration
	err = poll(ctx, 10*time.Minute, "the replacement a healthy voter", func() (bool, string) {
		var last string
		done := true
		// The replacement first: a learner phase may be short.
		for _, i := range []int{victim, (victim + 1) % 3, (victim + 2) % 3} {
			m, err := status.Fetch(ctx, hc, urls[i])
			if err != nil {
				return false, err.Error()
			}
			if i == victim && m.Learner && learnerAt == 0 {
				learnerAt = time.Since(start)
			}
			if !m.Healthy || m.Learner || (i == victim && (m.MemberID == before.MemberID || m.MemberID == 0)) {
				done, last = false, fmt.Sprintf("%s healthy %v learner %v id %x (%s)", m.Name, m.Healthy, m.Learner, m.MemberID, m.Decision)
			}
		}
		return done, last
	})
	if err != nil {
		return r, err
	}
	r.promoted, r.learnerAt = time.Since(start).Seconds(), learnerAt.Seconds()
	if leader1, err := procstat.CPUTime(leaderPID); err == nil {
		r.leaderCPU = (leader1 - leader0).Seconds()
	}
	if t, err := procstat.CPUTime(c.sup.PID(name)); err == nil {
		r.learnerCPU = t.Seconds()
	}
	r.floorWrite = float64(r.dbBytes) / (1 << 20) / r.diskMiBs
	e.log.Info("replacement", "mib", mib, "learner_at", r.learnerAt, "promoted", r.promoted)

	// Defragmentation of another follower.
	li, err = leaderIndex(ctx, c.clis[0], c.eps)
	if err != nil {
		return r, err
	}
	df := (li + 2) % 3
	dctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var took time.Duration
	cpu, err := cpuOf(c.sup.PID(localmode.MemberName(df)), func() error {
		t0 := time.Now()
		_, err := c.clis[0].Defragment(dctx, c.eps[df])
		took = time.Since(t0)
		return err
	})
	if err != nil {
		return r, fmt.Errorf("defragment %s: %w", c.eps[df], err)
	}
	r.defrag, r.defragCPU = took.Seconds(), cpu.Seconds()
	e.log.Info("defragment", "mib", mib, "took", took)
	return r, nil
}
