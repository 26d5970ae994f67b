package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-nomad/etcd-nomad/internal/bench"
)

// scaleOptions are the flags of `bench -scale`: the sizes of each family.
type scaleOptions struct {
	on       bool
	only     string // members, data, clusters (comma-separated); "" all
	members  []int
	dataMiB  []int
	clusters []int
	out      string // docs/scaling.md
	plots    string // docs/scaling
	idle     time.Duration
	kvRounds int
	kvDur    time.Duration
}

// parseSizes reads a comma-separated list of positive integers.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("size %q: want a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no size in %q", s)
	}
	return out, nil
}

// scale runs the families of curves (issue 27) and writes docs/scaling.md
// and its plots. A family that fails keeps the rows it measured; the run
// fails at the end.
func (e *runEnv) scale(ctx context.Context, args []string) error {
	so := e.opts.scale
	m := bench.Describe()
	start := time.Now()
	want := func(id string) bool { return so.only == "" || strings.Contains(","+so.only+",", ","+id+",") }
	cmdline := "go run ./cmd/bench " + strings.Join(args, " ")
	var fams []scaleFamily
	var errs []error
	runFamily := func(id string, f func(context.Context, *scaleFamily) error) {
		if !want(id) || ctx.Err() != nil {
			return
		}
		fam := scaleFamily{Command: cmdline, LoadStart: bench.LoadAvg()}
		e.log.Info("scale family", "family", id, "load", fam.LoadStart)
		err := f(ctx, &fam)
		fam.LoadEnd = bench.LoadAvg()
		if err != nil {
			fam.Err = err.Error()
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			e.log.Error("scale family failed", "family", id, "error", err)
		}
		for _, p := range fam.Plots {
			if err := writePlot(so.plots, p); err != nil {
				errs = append(errs, err)
			}
		}
		fams = append(fams, fam)
		// Write as we go: a later family's failure keeps this one's.
		if err := e.writeScaling(m, start, fams); err != nil {
			errs = append(errs, err)
		}
	}
	runFamily("members", e.membersFamily)
	runFamily("data", e.dataFamily)
	runFamily("clusters", e.clustersFamily)
	e.log.Info("scale done", "took", time.Since(start).Round(time.Second), "markdown", so.out, "plots", so.plots)
	return errors.Join(errs...)
}

func (e *runEnv) writeScaling(m bench.Machine, start time.Time, fams []scaleFamily) error {
	so := e.opts.scale
	if so.out == "" {
		return nil
	}
	rel, err := filepath.Rel(filepath.Dir(so.out), so.plots)
	if err != nil {
		rel = so.plots
	}
	md := scalingMarkdown(m, gitCommit(e.opts.repo), start.UTC().Format(time.RFC3339), time.Since(start).Round(time.Second).String(), rel, fams)
	if err := os.MkdirAll(filepath.Dir(so.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(so.out, []byte(md), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", so.out, err)
	}
	return nil
}

// loadNow is the 1-minute load average, for notes.
func loadNow() string {
	if f := strings.Fields(bench.LoadAvg()); len(f) > 0 {
		return f[0]
	}
	return "?"
}
