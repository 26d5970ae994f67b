// Command mutate is the project's mutation test (`make mutate`): it applies
// named, hand-written mutants — each one breaks one documented rule, most
// of them a safety invariant of docs/design.md's table — one at a time to a
// copy of the repository, runs the mutated package's tests, and reports
// which mutants the tests kill. A surviving mutant is a rule no test
// guards.
//
// Hand-written rather than generated (gremlins v0.6.0 was the candidate):
// every mutant here is a defect someone could plausibly write, with the
// invariant it breaks beside it, so the score measures what matters and a
// survivor is a finding, not noise.
//
// The mutants live in cmd/mutate/mutants.txt; docs/mutation.md is written
// from a run (-out). The run takes the tests with -short (what a developer
// runs), so a mutant killed here is also killed by `make test`.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

// Mutant is one deliberate defect.
type Mutant struct {
	ID        string
	Package   string // e.g. "task"
	File      string // relative to the repository root
	Invariant string // the rule it breaks
	Tests     []string
	Accepted  string // why a survivor is acceptable, if it is
	Original  string
	Mutated   string
	line      int // in the mutants file
}

// Result is the outcome of one mutant.
type Result struct {
	Mutant
	Status   string // killed, survived, invalid
	KilledBy []string
	Took     time.Duration
	Detail   string
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	list := fs.String("mutants", "cmd/mutate/mutants.txt", "the list of mutants")
	only := fs.String("only", "", "comma-separated mutant ids or packages to run (default: all)")
	out := fs.String("out", "", "write the markdown report here (e.g. docs/mutation.md)")
	timeout := fs.Duration("timeout", 5*time.Minute, "go test -timeout for one mutant")
	keep := fs.Bool("keep", false, "keep the scratch copy of the repository")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := os.ReadFile(*list)
	if err != nil {
		return err
	}
	ms, err := Parse(string(b))
	if err != nil {
		return fmt.Errorf("%s: %w", *list, err)
	}
	ms = selectMutants(ms, *only)
	if len(ms) == 0 {
		return errors.New("no mutant selected")
	}
	scratch, err := os.MkdirTemp("", "etcd-nomad-mutate-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(scratch)
	}
	if err := copyRepo(ctx, scratch); err != nil {
		return fmt.Errorf("copy the repository: %w", err)
	}
	fmt.Fprintf(stdout, "mutate: %d mutants, scratch copy %s\n", len(ms), scratch)

	// Baseline: every test package must pass unmutated, or every mutant
	// would count as killed.
	pkgs := map[string]bool{}
	for _, m := range ms {
		for _, p := range m.Tests {
			pkgs[p] = true
		}
	}
	var all []string
	for p := range pkgs {
		all = append(all, p)
	}
	sort.Strings(all)
	start := time.Now()
	if failed, detail := goTest(ctx, scratch, all, *timeout); len(failed) > 0 || detail != "" {
		return fmt.Errorf("baseline tests fail without any mutant (%v): %s", failed, detail)
	}
	fmt.Fprintf(stdout, "baseline %v passes (%s)\n", all, time.Since(start).Round(time.Second))

	var results []Result
	for _, m := range ms {
		r := apply(ctx, scratch, m, *timeout)
		results = append(results, r)
		fmt.Fprintf(stdout, "%-9s %-44s %6s %s\n", r.Status, m.ID, r.Took.Round(time.Second), strings.Join(r.KilledBy, " ")+r.Detail)
	}
	report := Report(results, time.Since(start))
	fmt.Fprint(stdout, "\n"+report)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(report), 0o644); err != nil {
			return err
		}
	}
	for _, r := range results {
		if r.Status == "invalid" {
			return fmt.Errorf("mutant %s is invalid: %s", r.ID, r.Detail)
		}
	}
	return nil
}

func selectMutants(ms []Mutant, only string) []Mutant {
	if only == "" {
		return ms
	}
	want := map[string]bool{}
	for _, s := range strings.Split(only, ",") {
		want[strings.TrimSpace(s)] = true
	}
	var out []Mutant
	for _, m := range ms {
		if want[m.ID] || want[m.Package] {
			out = append(out, m)
		}
	}
	return out
}

// apply mutates one file of the scratch copy, runs the tests and restores
// the file.
func apply(ctx context.Context, root string, m Mutant, timeout time.Duration) Result {
	r := Result{Mutant: m}
	path := filepath.Join(root, m.File)
	orig, err := os.ReadFile(path)
	if err != nil {
		r.Status, r.Detail = "invalid", err.Error()
		return r
	}
	if n := strings.Count(string(orig), m.Original); n != 1 {
		r.Status, r.Detail = "invalid", fmt.Sprintf("the original snippet occurs %d times in %s (stale mutant?)", n, m.File)
		return r
	}
	mutated := strings.Replace(string(orig), m.Original, m.Mutated, 1)
	if err := os.WriteFile(path, []byte(mutated), 0o644); err != nil {
		r.Status, r.Detail = "invalid", err.Error()
		return r
	}
	defer os.WriteFile(path, orig, 0o644)
	start := time.Now()
	failed, detail := goTest(ctx, root, m.Tests, timeout)
	r.Took = time.Since(start)
	switch {
	case strings.Contains(detail, "[build failed]") || strings.Contains(detail, "[setup failed]"):
		r.Status, r.Detail = "invalid", "does not compile: "+firstLines(detail, 6)
	case len(failed) > 0 || detail != "":
		r.Status, r.KilledBy = "killed", failed
		if len(failed) == 0 {
			r.KilledBy = []string{firstLines(detail, 1)}
		}
	default:
		r.Status = "survived"
	}
	return r
}

var failRE = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// goTest runs the packages' tests with -short; it returns the failed
// tests, and the output when go test failed otherwise ("" when it passed).
func goTest(ctx context.Context, root string, pkgs []string, timeout time.Duration) ([]string, string) {
	args := append([]string{"test", "-short", "-count=1", "-failfast", "-timeout", timeout.String()}, pkgs...)
	cctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "go", args...)
	cmd.Dir = root
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	if err == nil {
		return nil, ""
	}
	var failed []string
	seen := map[string]bool{}
	for _, f := range failRE.FindAllStringSubmatch(buf.String(), -1) {
		name := strings.SplitN(f[1], "/", 2)[0]
		if !seen[name] {
			seen[name] = true
			failed = append(failed, name)
		}
	}
	if len(failed) > 0 {
		return failed, ""
	}
	out := buf.String()
	if strings.Contains(out, "panic: test timed out") {
		return []string{"(test timeout)"}, ""
	}
	if out == "" {
		out = err.Error()
	}
	return nil, out
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

// copyRepo copies the working tree's files known to git (tracked, and new
// ones not ignored) into dst.
func copyRepo(ctx context.Context, dst string) error {
	out, err := exec.CommandContext(ctx, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return err
	}
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		st, err := os.Stat(f)
		if err != nil {
			return err
		}
		p := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, st.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}
