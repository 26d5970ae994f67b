package main

import (
	"math"
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/internal/bench"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
)

func TestFitLine(t *testing.T) {
	for _, c := range []struct {
		name   string
		xs, ys []float64
		a, b   float64
	}{
		{"exact line", []float64{0, 1, 5, 10}, []float64{3, 5, 13, 23}, 3, 2},
		{"noisy points", []float64{1, 2, 3}, []float64{1, 3, 2}, 1, 0.5},
		{"one x: the mean", []float64{4, 4}, []float64{1, 3}, 2, 0},
		{"nothing", nil, nil, 0, 0},
	} {
		a, b := fitLine(c.xs, c.ys)
		if math.Abs(a-c.a) > 1e-9 || math.Abs(b-c.b) > 1e-9 {
			t.Errorf("%s: fitLine = %v + %v·x, want %v + %v·x", c.name, a, b, c.a, c.b)
		}
	}
}

func TestGrowth(t *testing.T) {
	if g := growth([]float64{256, 1024}, []float64{2, 8}); math.Abs(g-1) > 1e-9 {
		t.Errorf("linear: growth %v, want 1", g)
	}
	if g := growth([]float64{256, 1024}, []float64{2, 16}); math.Abs(g-2) > 1e-9 {
		t.Errorf("quadratic-ish: growth %v, want 2", g)
	}
	if g := growth([]float64{0, 5}, []float64{1, 2}); g != 0 {
		t.Errorf("x from 0: growth %v, want 0 (cannot tell)", g)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes(" 3,5, 7 ")
	if err != nil || len(got) != 3 || got[0] != 3 || got[2] != 7 {
		t.Fatalf("parseSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"", "3,x", "0", "-1"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q): no error", bad)
		}
	}
}

func TestScaleTableMarkdown(t *testing.T) {
	tb := scaleTable{Head: []string{"n", "a|b"}, Rows: [][]string{{"3", "1.5"}, {"5"}}}
	want := "| n | a\\|b |\n|---|---:|\n| 3 | 1.5 |\n| 5 |  |\n"
	if got := tb.markdown(); got != want {
		t.Errorf("markdown:\n%s\nwant:\n%s", got, want)
	}
	if (scaleTable{}).markdown() != "" {
		t.Error("an empty table renders")
	}
}

func TestFmtNumAndRatio(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.01234: "0.0123", 2.345: "2.35", 23.45: "23.4", 1234.5: "1234", math.NaN(): "–"} {
		if got := fmtNum(v); got != want {
			t.Errorf("fmtNum(%v) = %q, want %q", v, got, want)
		}
	}
	if got := ratioText(3, 0); got != "–" {
		t.Errorf("ratio without a baseline: %q", got)
	}
	if got := ratioText(3, 2); got != "1.50" {
		t.Errorf("ratioText(3, 2) = %q", got)
	}
}

func TestScalingMarkdown(t *testing.T) {
	m := bench.Machine{CPUs: 2, CPUModel: "Test CPU", MemTotal: "1 kB", Kernel: "Linux", GoVersion: "go1"}
	fams := []scaleFamily{{
		ID: "members", Title: "Members: 3, 5", Command: "go run ./cmd/bench -scale", LoadStart: "1.00 2.00 3.00", LoadEnd: "4.00 5.00 6.00",
		Started: "2026-01-01T00:00:00Z", Took: "1m0s", Commit: "abc123", Machine: m,
		Table: scaleTable{Head: []string{"members", "s"}, Rows: [][]string{{"3", "1"}}},
		Plots: []scalePlot{{File: "members.png", Title: "Members"}},
		Notes: []string{"How: like this."},
		Err:   "5 members: boom",
	}}
	md := scalingMarkdown("scaling", fams)
	for _, want := range []string{"on 2 CPUs (`nproc`), Test CPU", "Run 2026-01-01T00:00:00Z, took 1m0s, commit `abc123`", "## Members: 3, 5", "Command: `go run ./cmd/bench -scale`",
		"at the start 1.00 2.00 3.00, at the end 4.00 5.00 6.00", "| 3 | 1 |", "![Members](scaling/members.png)", "How: like this.", "**Stopped early: 5 members: boom**"} {
		if !strings.Contains(md, want) {
			t.Errorf("scaling.md lacks %q:\n%s", want, md)
		}
	}
}

func TestMergeFamilies(t *testing.T) {
	kept := []scaleFamily{{ID: "clusters", Title: "old clusters"}, {ID: "members", Title: "old members"}, {ID: "other", Title: "other"}}
	fresh := []scaleFamily{{ID: "members", Title: "new members"}, {ID: "data", Title: "new data"}}
	var got []string
	for _, f := range mergeFamilies(kept, fresh, scaleOrder) {
		got = append(got, f.Title)
	}
	if want := "new members,new data,old clusters,other"; strings.Join(got, ",") != want {
		t.Errorf("merged %v, want %s", got, want)
	}
}

func TestRequestClass(t *testing.T) {
	for _, c := range []struct {
		r    devagents.Request
		want string
	}{
		{devagents.Request{Agent: "consul", Method: "PUT", Path: "/v1/kv/etcd-nomad/x"}, "consul KV writes"},
		{devagents.Request{Agent: "consul", Method: "PUT", Path: "/v1/txn"}, "consul KV writes"},
		{devagents.Request{Agent: "consul", Method: "GET", Path: "/v1/kv/etcd-nomad/x", Blocking: true}, "consul blocking queries"},
		{devagents.Request{Agent: "consul", Method: "PUT", Path: "/v1/session/renew/abc"}, "consul session renewals"},
		{devagents.Request{Agent: "consul", Method: "PUT", Path: "/v1/session/create"}, "consul other session calls"},
		{devagents.Request{Agent: "consul", Method: "GET", Path: "/v1/agent/checks"}, "consul /v1/agent (local: checks, services)"},
		{devagents.Request{Agent: "nomad", Method: "GET", Path: "/v1/job/x/allocations", Blocking: true}, "nomad blocking queries"},
		{devagents.Request{Agent: "nomad", Method: "GET", Path: "/v1/agent/health"}, "nomad other requests"},
	} {
		if got := requestClass(c.r); got != c.want {
			t.Errorf("requestClass(%+v) = %q, want %q", c.r, got, c.want)
		}
	}
}

func TestPaperEstimate(t *testing.T) {
	x := []float64{0, 1, 5}
	line := func(a, b float64) []float64 { return []float64{a, a + b, a + 5*b} }
	notes := paperEstimate(x, line(10, 60), line(5, 30), line(0, 6), line(0, 12), line(0, 3), line(1, 0.5), line(2, 1), line(0, 1), line(0, 6), line(50, 1), line(80, 2))
	if len(notes) != 2 {
		t.Fatalf("notes: %q", notes)
	}
	// Consul requests: 10 + 60·N per minute.
	if !strings.Contains(notes[0], "| Consul requests (/min) | 10.0 | 60.0 | 6010 | 60010 |") {
		t.Errorf("estimate table:\n%s", notes[0])
	}
	// 1,000 clusters: (6 + 12)·1000 / 60 = 300 Raft writes/s.
	if !strings.Contains(notes[1], "about 300/s are Raft writes") {
		t.Errorf("reading: %s", notes[1])
	}
	// The Consul agent: 1 + 0.5·N % of a core -> a whole core at 198.
	if !strings.Contains(notes[1], "the Consul agent would use a whole core at about 198 clusters") {
		t.Errorf("where it bends: %s", notes[1])
	}
	if got := paperEstimate(x[:1], nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil); len(got) != 1 || !strings.Contains(got[0], "at least two sizes") {
		t.Errorf("one size: %q", got)
	}
}
