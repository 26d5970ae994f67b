// Command bench measures etcd-nomad against plain etcd on this machine and
// writes the results: a markdown table on stdout, bench-results.json and
// docs/benchmarks.md. Every figure is measured in the same run as its
// baseline. `make bench` runs it from the repository root; it is not part
// of `make test`.
//
// The same binary is also the helper processes the benchmarks start (the
// first argument names one): "etcd" runs one plain embedded etcd member,
// "snapshot-save" and "snapshot-restore" run etcd-nomad's snapshot paths,
// so that both sides of a comparison are separate processes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/internal/bench"
)

func main() {
	if len(os.Args) > 1 {
		var err error
		handled := true
		switch os.Args[1] {
		case "etcd":
			err = runEtcd(os.Args[2:])
		case "snapshot-save":
			err = runSnapshotSave(os.Args[2:])
		case "snapshot-restore":
			err = runSnapshotRestore(os.Args[2:])
		case "snapshot-stages":
			err = runSnapshotStages(os.Args[2:])
		default:
			handled = false
		}
		if handled {
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
				os.Exit(1)
			}
			return
		}
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// options are the flags of a benchmark run.
type options struct {
	repo          string
	work          string
	binDir        string // where the etcd-nomad builds go: the run's scratch directory
	only          string
	snapshotBytes int64
	snapshotRound int
	snapshotData  string
	kvDuration    time.Duration
	kvClients     int
	kvRounds      int
	idle          time.Duration
	jsonOut       string
	mdOut         string
	keep          bool
	deltaInterval time.Duration
	rpoWrite      time.Duration
	replayEvents  int
	nomadRounds   int
	// scale: `bench -scale` runs the families of curves instead.
	scale scaleOptions
}

func run(args []string) error {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&o.repo, "repo", ".", "repository root (for tools/etcd and cmd/etcd-nomad)")
	fs.StringVar(&o.work, "work", "", "scratch directory (default: a new temp dir, removed at the end)")
	fs.StringVar(&o.only, "only", "", "comma-separated figures to run: e (snapshots), a (KV), f (overhead), b and c (Nomad: bootstrap, kill, replace, rolling update; raw_exec, and docker next to it where the kit's Docker engine can run), d (quorum loss), g (continuous backup: cost, RPO, replay; g.replay alone), h (multi-host testbed: idle API calls, partition, heal, drain, host crash, long faults and their heal: h.isolate-long, h.oneway, h.servers-cut, BENCH_HOSTS_LONG=id,... runs only those; needs root); default all")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process here (the in-process parts: g.replay's restore)")
	sizeMiB := fs.Int64("snapshot-mib", 1024, "keyspace size for the snapshot figures, MiB")
	fs.StringVar(&o.snapshotData, "snapshot-data", dataObjects, "snapshot keyspace contents: objects (JSON objects) or hex (random hex text, the compressor's worst case)")
	fs.IntVar(&o.snapshotRound, "snapshot-rounds", 3, "save/restore rounds per side (the fastest counts)")
	fs.DurationVar(&o.kvDuration, "kv-duration", 6*time.Second, "measured duration of each KV workload round")
	fs.IntVar(&o.kvClients, "kv-clients", 16, "concurrent KV clients")
	fs.IntVar(&o.kvRounds, "kv-rounds", 7, "rounds of each KV workload per cluster, alternating (the median counts)")
	fs.DurationVar(&o.idle, "idle", 30*time.Second, "idle window for the CPU figure")
	fs.StringVar(&o.jsonOut, "json", "bench-results.json", "JSON results file")
	fs.StringVar(&o.mdOut, "markdown", "docs/benchmarks.md", "markdown results file (\"\" to skip)")
	fs.BoolVar(&o.keep, "keep", false, "keep the scratch directory")
	fs.DurationVar(&o.deltaInterval, "delta-interval", 5*time.Second, "delta_interval of the continuous backup figures (g)")
	fs.DurationVar(&o.rpoWrite, "rpo-write", 20*time.Second, "how long the RPO figure writes before every data dir is lost")
	fs.IntVar(&o.nomadRounds, "nomad-rounds", 1, "deployments per task driver for the Nomad figures (b, c), alternating raw_exec and docker (the median counts)")
	fs.IntVar(&o.replayEvents, "replay-events", 1_000_000, "delta events after the full snapshot in the replay figure")
	fs.BoolVar(&o.scale.on, "scale", false, "measure the curves of docs/scaling.md instead of the figures (make bench-scale): members, data size, clusters per Nomad")
	fs.StringVar(&o.scale.only, "scale-only", "", "comma-separated families of -scale: members, data, clusters; default all")
	scaleMembers := fs.String("scale-members", "3,5,7", "-scale: cluster sizes of the members family")
	scaleData := fs.String("scale-data-mib", "256,1024", "-scale: keyspace sizes of the data family, MiB")
	scale4G := fs.Bool("scale-4g", false, "-scale: add 4096 MiB to -scale-data-mib (about 25 GB of disk at its peak)")
	scaleClusters := fs.String("scale-clusters", "1,5,10", "-scale: clusters of 3 members on one Nomad, the clusters family")
	fs.StringVar(&o.scale.out, "scale-markdown", "docs/scaling.md", "-scale: markdown file")
	fs.StringVar(&o.scale.plots, "scale-plots", "docs/scaling", "-scale: directory of the PNG plots")
	fs.DurationVar(&o.scale.idle, "scale-idle", time.Minute, "-scale: idle window of the clusters family (API requests, CPU)")
	fs.IntVar(&o.scale.kvRounds, "scale-kv-rounds", 3, "-scale: put rounds per side at each cluster size (the median counts)")
	fs.DurationVar(&o.scale.kvDur, "scale-kv-duration", 5*time.Second, "-scale: measured duration of each put round")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.snapshotBytes = *sizeMiB << 20
	if o.scale.on {
		var err error
		if o.scale.members, err = parseSizes(*scaleMembers); err != nil {
			return fmt.Errorf("-scale-members: %w", err)
		}
		if o.scale.dataMiB, err = parseSizes(*scaleData); err != nil {
			return fmt.Errorf("-scale-data-mib: %w", err)
		}
		if *scale4G {
			o.scale.dataMiB = append(o.scale.dataMiB, 4096)
		}
		if o.scale.clusters, err = parseSizes(*scaleClusters); err != nil {
			return fmt.Errorf("-scale-clusters: %w", err)
		}
	}
	stop, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	want := func(id string) bool { return o.only == "" || strings.Contains(","+o.only+",", ","+id+",") }

	log := hclog.New(&hclog.LoggerOptions{Name: "bench", Output: os.Stderr, Level: hclog.Info})
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	start := time.Now()

	if o.work == "" {
		d, err := os.MkdirTemp("", "etcd-nomad-bench-")
		if err != nil {
			return err
		}
		o.work = d
	}
	if !o.keep {
		defer os.RemoveAll(o.work)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	o.binDir = o.work
	env := &runEnv{opts: o, log: log, self: self}
	if o.scale.on {
		return env.scale(ctx, args)
	}
	report := bench.Report{Started: start, Machine: bench.Describe(), Commit: gitCommit(o.repo)}

	// A group that fails is reported (its error under the table, and the
	// run's exit status) without losing the figures of the others.
	var failures []string
	failed := func(group string, err error) {
		msg := fmt.Sprintf("%s not measured: %v", group, err)
		if len(msg) > 600 {
			msg = msg[:600] + "…"
		}
		log.Error(msg)
		failures = append(failures, msg)
		report.Notes = append(report.Notes, "**"+msg+"**")
	}
	if want("e") {
		res, notes, err := env.snapshotFigures(ctx)
		if err != nil {
			failed("snapshot figures", err)
		} else {
			report.Results = append(report.Results, res...)
			report.Notes = append(report.Notes, notes...)
		}
	}
	if want("a") || want("f") {
		res, notes, err := env.kvFigures(ctx, want("a"), want("f"))
		if err != nil {
			failed("KV figures", err)
		} else {
			report.Results = append(report.Results, res...)
			report.Notes = append(report.Notes, notes...)
		}
	}
	if want("b") || want("c") {
		res, notes, err := env.nomadFigures(ctx)
		if err != nil {
			failed("Nomad figures", err)
		} else {
			report.Results = append(report.Results, res...)
			report.Notes = append(report.Notes, notes...)
		}
	}
	if want("d") {
		res, notes, err := env.recoveryFigure(ctx)
		if err != nil {
			failed("quorum-loss figure", err)
		} else {
			report.Results = append(report.Results, res...)
			report.Notes = append(report.Notes, notes...)
		}
	}
	if want("g") || want("g.replay") {
		res, notes, err := env.backupFigures(ctx, want("g"))
		if err != nil {
			failed("continuous backup figures", err)
		} else {
			report.Results = append(report.Results, res...)
			report.Notes = append(report.Notes, notes...)
		}
	}
	if want("h") {
		res, notes, err := env.hostsFigures(ctx)
		if err != nil {
			failed("multi-host figures", err)
		} else {
			report.Results = append(report.Results, res...)
			report.Notes = append(report.Notes, notes...)
		}
	}
	for i := range report.Results {
		report.Results[i].Judge()
	}
	report.Took = time.Since(start)
	report.LoadAvgEnd = bench.LoadAvg()
	fmt.Println(bench.Table(report.Results))
	for _, n := range report.Notes {
		fmt.Println(n)
		fmt.Println()
	}
	if o.jsonOut != "" {
		if err := bench.WriteJSON(o.jsonOut, report); err != nil {
			return err
		}
	}
	if o.mdOut != "" {
		if err := os.MkdirAll(filepath.Dir(o.mdOut), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(o.mdOut, []byte(bench.Markdown(report)), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", o.mdOut, err)
		}
	}
	log.Info("benchmarks done", "took", report.Took.Round(time.Second), "json", o.jsonOut, "markdown", o.mdOut)
	if len(failures) > 0 {
		return errors.New(strings.Join(failures, "; "))
	}
	return nil
}

// runEnv is what every figure needs.
type runEnv struct {
	opts options
	log  hclog.Logger
	self string // this binary, for the helper processes
	// snapOut, when set, receives what snapshotFigures measured.
	snapOut *snapRun
}

func gitCommit(repo string) string {
	out, err := exec.Command("git", "-C", repo, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", repo, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "+dirty"
	}
	return c
}

// startCPUProfile profiles this process into path until stop is called; ""
// profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
