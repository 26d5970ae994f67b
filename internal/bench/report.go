// Package bench holds the results of `make bench` and renders them: a
// markdown table (printed and written to docs/benchmarks.md with the
// machine it ran on) and JSON. Every figure carries the baseline measured
// in the same run, the ratio between them and the goal it is judged by.
// It measures nothing itself.
package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Goal kinds: how a figure is judged.
const (
	// RatioAtLeast: baseline-relative figure, higher is better; the ratio
	// (value/baseline) must be at least Goal.
	RatioAtLeast = "ratio>="
	// RatioAtLeastInverse: lower is better (a duration or a latency); the
	// ratio is baseline/value, so above 1 still means "ours is better".
	RatioAtLeastInverse = "ratio>=(inverse)"
	// DeltaAtMost: the value minus the baseline must be at most Goal.
	DeltaAtMost = "delta<="
	// AtMost: the value alone must be at most Goal (the baseline is
	// informative).
	AtMost = "value<="
)

// Result is one figure.
type Result struct {
	ID       string  `json:"id"`   // e.g. "e.save"
	Name     string  `json:"name"` // what is measured
	Unit     string  `json:"unit"`
	Value    float64 `json:"value"`    // etcd-nomad
	Baseline float64 `json:"baseline"` // plain etcd / etcd's tools, same run
	GoalKind string  `json:"goal_kind"`
	Goal     float64 `json:"goal"`
	// Ratio and Pass are filled by Judge; Ratio is 0 when a division by
	// zero would be needed.
	Ratio float64 `json:"ratio"`
	Pass  bool    `json:"pass"`
	// Skipped holds why a figure was not measured (Value is meaningless).
	Skipped string `json:"skipped,omitempty"`
	Notes   string `json:"notes,omitempty"`
}

// Judge computes Ratio and Pass from Value, Baseline and the goal.
func (r *Result) Judge() {
	if r.Skipped != "" {
		r.Ratio, r.Pass = 0, false
		return
	}
	switch r.GoalKind {
	case RatioAtLeast:
		r.Ratio = safeDiv(r.Value, r.Baseline)
		r.Pass = r.Ratio >= r.Goal
	case RatioAtLeastInverse:
		r.Ratio = safeDiv(r.Baseline, r.Value)
		r.Pass = r.Ratio >= r.Goal
	case DeltaAtMost:
		r.Ratio = safeDiv(r.Value, r.Baseline)
		r.Pass = r.Value-r.Baseline <= r.Goal
	case AtMost:
		r.Ratio = safeDiv(r.Value, r.Baseline)
		r.Pass = r.Value <= r.Goal
	default:
		r.Ratio, r.Pass = safeDiv(r.Value, r.Baseline), false
	}
}

// safeDiv is a/b, and 0 (never NaN, which JSON cannot carry) when b is 0.
func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// GoalText is the goal as written in the table.
func (r Result) GoalText() string {
	switch r.GoalKind {
	case RatioAtLeast, RatioAtLeastInverse:
		return fmt.Sprintf("ratio ≥ %s", num(r.Goal))
	case DeltaAtMost:
		return fmt.Sprintf("≤ %s %s over baseline", num(r.Goal), r.Unit)
	case AtMost:
		return fmt.Sprintf("≤ %s %s", num(r.Goal), r.Unit)
	}
	return r.GoalKind
}

// Machine describes where the figures were measured.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	MemTotal  string `json:"mem_total"`
	GoVersion string `json:"go_version"`
	Kernel    string `json:"kernel"`
	// LoadAvg is /proc/loadavg when the run started: the machine is shared.
	LoadAvg string `json:"load_avg"`
}

// Report is one run of the benchmarks.
type Report struct {
	Started time.Time     `json:"started"`
	Took    time.Duration `json:"took_ns"`
	Machine Machine       `json:"machine"`
	// Commit is the git commit benchmarked ("" when unknown).
	Commit string `json:"commit"`
	// LoadAvgEnd is /proc/loadavg when the run ended.
	LoadAvgEnd string   `json:"load_avg_end"`
	Results    []Result `json:"results"`
	// Notes are printed under the table (workload descriptions).
	Notes []string `json:"notes,omitempty"`
}

// Describe reads the machine description from /proc and the runtime.
func Describe() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = ProcField(string(b), "model name")
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemTotal = ProcField(string(b), "MemTotal")
	}
	m.LoadAvg = LoadAvg()
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		m.Kernel = strings.TrimSpace(string(out))
	}
	return m
}

// LoadAvg returns the 1, 5 and 15 minute load averages ("" if unknown).
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// ProcField returns the value of the first "key : value" line of a /proc
// text file ("" if absent).
func ProcField(text, key string) string {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// num prints a figure with 3 significant digits, no exponent.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// Table renders the results as a markdown table.
func Table(results []Result) string {
	var b strings.Builder
	b.WriteString("| id | figure | etcd-nomad | baseline | ratio | goal | result |\n")
	b.WriteString("|---|---|---:|---:|---:|---|---|\n")
	for _, r := range results {
		if r.Skipped != "" {
			fmt.Fprintf(&b, "| %s | %s | – | – | – | %s | SKIPPED: %s |\n", r.ID, cell(r.Name), r.GoalText(), cell(r.Skipped))
			continue
		}
		verdict := "FAIL"
		if r.Pass {
			verdict = "pass"
		}
		base, ratio := num(r.Baseline)+" "+r.Unit, num(r.Ratio)
		if r.GoalKind == AtMost && r.Baseline == 0 {
			base, ratio = "–", "–" // an absolute goal without a baseline
		}
		fmt.Fprintf(&b, "| %s | %s | %s %s | %s | %s | %s | %s |\n", r.ID, cell(r.Name), num(r.Value), r.Unit, base, ratio, r.GoalText(), verdict)
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// Markdown renders the whole report: machine, table, notes.
func Markdown(r Report) string {
	var b strings.Builder
	b.WriteString("# Benchmarks\n\n")
	b.WriteString("Generated by `make bench` (`go run ./cmd/bench`); do not edit by hand. Every baseline is\n")
	b.WriteString("measured in the same run as the figure it is compared with. Ratios above 1 mean etcd-nomad\n")
	b.WriteString("is faster (for durations and latencies the ratio is baseline/value).\n\n")
	fmt.Fprintf(&b, "Run %s, took %s", r.Started.UTC().Format(time.RFC3339), r.Took.Round(time.Second))
	if r.Commit != "" {
		fmt.Fprintf(&b, ", commit `%s`", r.Commit)
	}
	b.WriteString(".\n\n")
	m := r.Machine
	fmt.Fprintf(&b, "Machine: %d CPUs (`nproc`), %s, %s memory, %s, %s.\n", m.CPUs, orUnknown(m.CPUModel), orUnknown(m.MemTotal), orUnknown(m.Kernel), m.GoVersion)
	fmt.Fprintf(&b, "Load average (1/5/15 min) at the start: %s; at the end: %s. The machine is shared with other builds and tests, so figures move from run to run.\n\n", orUnknown(m.LoadAvg), orUnknown(r.LoadAvgEnd))
	b.WriteString(Table(r.Results))
	sep := "\n"
	for _, res := range r.Results {
		if res.Notes != "" {
			fmt.Fprintf(&b, "%s- **%s**: %s\n", sep, res.ID, res.Notes)
			sep = ""
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "%s\n\n", n)
		}
	}
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// WriteJSON writes the report to path.
func WriteJSON(path string, r Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
