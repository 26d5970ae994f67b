package bench

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	for _, c := range []struct {
		name  string
		r     Result
		ratio float64
		pass  bool
	}{
		{"faster passes", Result{Value: 120, Baseline: 100, GoalKind: RatioAtLeast, Goal: 1}, 1.2, true},
		{"slower fails", Result{Value: 90, Baseline: 100, GoalKind: RatioAtLeast, Goal: 0.97}, 0.9, false},
		{"lower latency passes", Result{Value: 10, Baseline: 20, GoalKind: RatioAtLeastInverse, Goal: 0.97}, 2, true},
		{"higher latency fails", Result{Value: 40, Baseline: 20, GoalKind: RatioAtLeastInverse, Goal: 0.97}, 0.5, false},
		{"small overhead passes", Result{Value: 95, Baseline: 70, GoalKind: DeltaAtMost, Goal: 30}, 95.0 / 70, true},
		{"large overhead fails", Result{Value: 101, Baseline: 70, GoalKind: DeltaAtMost, Goal: 30}, 101.0 / 70, false},
		{"absolute bound", Result{Value: 8, Baseline: 4, GoalKind: AtMost, Goal: 10}, 2, true},
		{"unknown kind never passes", Result{Value: 1, Baseline: 1, GoalKind: "??"}, 1, false},
		{"skipped never passes", Result{Value: 1, Baseline: 1, GoalKind: RatioAtLeast, Skipped: "no time"}, 0, false},
	} {
		c.r.Judge()
		if math.Abs(c.r.Ratio-c.ratio) > 1e-9 || c.r.Pass != c.pass {
			t.Errorf("%s: ratio %v pass %v, want %v %v", c.name, c.r.Ratio, c.r.Pass, c.ratio, c.pass)
		}
	}
	z := Result{Value: 1, Baseline: 0, GoalKind: RatioAtLeast, Goal: 1}
	z.Judge()
	if z.Ratio != 0 || z.Pass {
		t.Errorf("zero baseline: ratio %v pass %v, want 0 and fail", z.Ratio, z.Pass)
	}
}

func sample() Report {
	rs := []Result{
		{ID: "e.save", Name: "save | pipe", Unit: "MiB/s", Value: 150, Baseline: 120, GoalKind: RatioAtLeast, Goal: 1, Notes: "keyspace 1 GiB"},
		{ID: "f.rss", Name: "RSS", Unit: "MiB", Value: 120, Baseline: 70, GoalKind: DeltaAtMost, Goal: 30},
		{ID: "b.boot", Name: "bootstrap", Unit: "s", GoalKind: AtMost, Goal: 10, Skipped: "not measured"},
		{ID: "b.kill", Name: "kill", Unit: "s", Value: 3.2, GoalKind: AtMost, Goal: 5},
	}
	for i := range rs {
		rs[i].Judge()
	}
	return Report{Started: time.Date(2026, 11, 22, 21, 0, 0, 0, time.UTC), Took: 90 * time.Second,
		Machine: Machine{CPUs: 2, CPUModel: "AMD EPYC", MemTotal: "24000000 kB", GoVersion: "go1.26.8", LoadAvg: "3.10 2.00 1.00"},
		Commit:  "abc123", LoadAvgEnd: "4.20 3.00 2.00", Results: rs, Notes: []string{"Workload notes."}}
}

func TestTableAndMarkdown(t *testing.T) {
	r := sample()
	tab := Table(r.Results)
	lines := strings.Split(strings.TrimSpace(tab), "\n")
	if len(lines) != 2+len(r.Results) {
		t.Fatalf("table has %d lines, want header, rule and %d rows:\n%s", len(lines), len(r.Results), tab)
	}
	for i, want := range []string{
		"| e.save | save \\| pipe | 150 MiB/s | 120 MiB/s | 1.25 | ratio ≥ 1.00 | pass |",
		"| f.rss | RSS | 120 MiB | 70.0 MiB | 1.71 | ≤ 30.0 MiB over baseline | FAIL |",
		"| b.boot | bootstrap | – | – | – | ≤ 10.0 s | SKIPPED: not measured |",
		"| b.kill | kill | 3.20 s | – | – | ≤ 5.00 s | pass |",
	} {
		if lines[2+i] != want {
			t.Errorf("row %d:\n got %s\nwant %s", i, lines[2+i], want)
		}
	}
	md := Markdown(r)
	for _, want := range []string{"2 CPUs", "AMD EPYC", "24000000 kB", "go1.26.8", "commit `abc123`", "took 1m30s", tab, "- **e.save**: keyspace 1 GiB", "Workload notes.", "3.10 2.00 1.00", "4.20 3.00 2.00"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	r := sample()
	if err := WriteJSON(path, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != 4 || back.Results[0].Value != 150 || !back.Results[0].Pass || back.Results[1].Pass || back.Machine.CPUs != 2 {
		t.Errorf("round trip lost data: %+v", back)
	}
}

func TestProcField(t *testing.T) {
	text := "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu\n"
	if got := ProcField(text, "model name"); got != "AMD EPYC 7B13" {
		t.Errorf("model name = %q", got)
	}
	if got := ProcField(text, "missing"); got != "" {
		t.Errorf("missing = %q", got)
	}
}
