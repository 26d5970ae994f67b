package main

import (
	"context"
	"encoding/json"
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

// scaleOrder is the families' order in docs/scaling.md.
var scaleOrder = []string{"members", "data", "clusters"}

// scale runs the families of curves (issue 27) and writes docs/scaling.md,
// docs/scaling.json (what the markdown is rendered from) and the plots. A
// family that fails keeps the rows it measured; the run fails at the end.
// Families not run are kept from docs/scaling.json.
func (e *runEnv) scale(ctx context.Context, args []string) error {
	so := e.opts.scale
	m := bench.Describe()
	want := func(id string) bool { return so.only == "" || strings.Contains(","+so.only+",", ","+id+",") }
	cmdline := "go run ./cmd/bench " + strings.Join(args, " ")
	kept, err := readScaling(so.jsonPath())
	if err != nil {
		return err
	}
	start := time.Now()
	var fresh []scaleFamily
	var errs []error
	funcs := map[string]func(context.Context, *scaleFamily) error{"members": e.membersFamily, "data": e.dataFamily, "clusters": e.clustersFamily}
	for _, id := range scaleOrder {
		if !want(id) || ctx.Err() != nil {
			continue
		}
		t0 := time.Now()
		fam := scaleFamily{ID: id, Command: cmdline, LoadStart: bench.LoadAvg(), Started: t0.UTC().Format(time.RFC3339), Commit: gitCommit(e.opts.repo), Machine: m}
		e.log.Info("scale family", "family", id, "load", fam.LoadStart)
		err := funcs[id](ctx, &fam)
		fam.LoadEnd, fam.Took = bench.LoadAvg(), time.Since(t0).Round(time.Second).String()
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
		fresh = append(fresh, fam)
		// Write as we go: a later family's failure keeps this one's.
		if err := e.writeScaling(mergeFamilies(kept, fresh, scaleOrder)); err != nil {
			errs = append(errs, err)
		}
	}
	e.log.Info("scale done", "took", time.Since(start).Round(time.Second), "markdown", so.out, "plots", so.plots)
	return errors.Join(errs...)
}

// jsonPath is docs/scaling.json beside docs/scaling.md.
func (so scaleOptions) jsonPath() string {
	if so.out == "" {
		return ""
	}
	return strings.TrimSuffix(so.out, ".md") + ".json"
}

// readScaling reads the families of an earlier run (none when there is no
// file).
func readScaling(path string) ([]scaleFamily, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var fams []scaleFamily
	if err := json.Unmarshal(b, &fams); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return fams, nil
}

func (e *runEnv) writeScaling(fams []scaleFamily) error {
	so := e.opts.scale
	if so.out == "" {
		return nil
	}
	rel, err := filepath.Rel(filepath.Dir(so.out), so.plots)
	if err != nil {
		rel = so.plots
	}
	if err := os.MkdirAll(filepath.Dir(so.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(so.out, []byte(scalingMarkdown(rel, fams)), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", so.out, err)
	}
	b, err := json.MarshalIndent(fams, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(so.jsonPath(), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", so.jsonPath(), err)
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
