package monitoring

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// etcdMetrics are the metrics of the embedded etcd (v3.6.16) the dashboard
// and the rules read, by the names etcd registers (histograms by their base
// name). A name etcd drops or renames must be changed here on purpose.
var etcdMetrics = []string{
	"etcd_server_has_leader",
	"etcd_server_is_leader",
	"etcd_server_is_learner",
	"etcd_server_leader_changes_seen_total",
	"etcd_server_proposals_committed_total",
	"etcd_server_proposals_applied_total",
	"etcd_server_proposals_pending",
	"etcd_server_proposals_failed_total",
	"etcd_server_quota_backend_bytes",
	"etcd_disk_wal_fsync_duration_seconds",
	"etcd_disk_backend_commit_duration_seconds",
	"etcd_mvcc_db_total_size_in_bytes",
	"etcd_mvcc_db_total_size_in_use_in_bytes",
}

// memberMetrics are the names the member registers: every "etcd_nomad_..."
// string literal of the packages that register them.
func memberMetrics(t *testing.T) map[string]bool {
	t.Helper()
	lit := regexp.MustCompile(`"(etcd_nomad_[a-z0-9_]+)"`)
	out := map[string]bool{}
	// The packages and their sub-packages (the carve of task.Member put
	// the certificate metrics in task/trust).
	for _, pkg := range []string{"../task", "../snapshot"} {
		var files []string
		if err := filepath.WalkDir(pkg, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") {
				files = append(files, p)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
				out[m[1]] = true
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d member metrics in the code: %v", len(out), out)
	}
	return out
}

func knownMetrics(t *testing.T) map[string]bool {
	known := memberMetrics(t)
	for _, m := range etcdMetrics {
		known[m] = true
	}
	return known
}

// promqlWords are the PromQL functions, aggregations and keywords the
// expressions may use besides metric names.
var promqlWords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "count": true, "by": true, "without": true,
	"on": true, "ignoring": true, "group_left": true, "group_right": true, "and": true, "or": true, "unless": true, "bool": true,
	"rate": true, "increase": true, "irate": true, "delta": true, "changes": true, "time": true, "histogram_quantile": true,
	"label_values": true, "offset": true,
}

// metricNames returns the metric names expr reads: its identifiers once
// string literals, label matchers, grouping label lists and range
// durations are removed; a histogram's _bucket, _sum and _count series by
// its base name.
func metricNames(expr string) []string {
	s := regexp.MustCompile(`"[^"]*"`).ReplaceAllString(expr, `""`)
	s = regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(s, " ")
	s = regexp.MustCompile(`\[[^\]]*\]`).ReplaceAllString(s, " ")
	s = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`).ReplaceAllString(s, " ")
	var out []string
	for _, w := range regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`).FindAllString(s, -1) {
		if promqlWords[w] {
			continue
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if strings.HasPrefix(w, "etcd_disk_") && strings.HasSuffix(w, suffix) {
				w = strings.TrimSuffix(w, suffix)
			}
		}
		out = append(out, w)
	}
	return out
}

type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
}

// TestDashboardReadsOnlyExportedMetrics stands in for Grafana: the
// dashboard parses, every panel has a title and a place, every query
// panel has expressions with balanced brackets, and every expression reads
// only metrics the members or etcd export.
func TestDashboardReadsOnlyExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard without title, uid or panels: %q %q %d", d.Title, d.UID, len(d.Panels))
	}
	known := knownMetrics(t)
	ids := map[int]bool{}
	exprs := 0
	for _, p := range d.Panels {
		if p.Title == "" || p.GridPos.W == 0 || p.GridPos.H == 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %d %q: no title or no place on the 24-column grid: %+v", p.ID, p.Title, p.GridPos)
		}
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs++
			if !balanced(tg.Expr) {
				t.Errorf("panel %q %s: unbalanced brackets: %s", p.Title, tg.RefID, tg.Expr)
			}
			names := metricNames(tg.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q %s reads no metric: %s", p.Title, tg.RefID, tg.Expr)
			}
			for _, n := range names {
				if !known[n] {
					t.Errorf("panel %q %s reads %s, which no member exports (etcd's: etcdMetrics): %s", p.Title, tg.RefID, n, tg.Expr)
				}
			}
		}
	}
	for _, v := range d.Templating.List {
		q, _ := json.Marshal(v.Query)
		for _, n := range metricNames(string(q)) {
			if strings.HasPrefix(n, "etcd_") && !known[n] {
				t.Errorf("variable %s reads %s, which no member exports", v.Name, n)
			}
		}
	}
	t.Logf("%d panels, %d expressions", len(d.Panels), exprs)
}

// TestAlertsAndREADMENameOnlyExportedMetrics: the rules (which promtool
// checks for syntax, not for names) and the README read only metrics that
// exist, and the README documents every metric the member exports.
func TestAlertsAndREADMENameOnlyExportedMetrics(t *testing.T) {
	known := knownMetrics(t)
	name := regexp.MustCompile(`\betcd_[a-z0-9_]+`)
	for _, f := range []string{"alerts.yml", "alerts_test.yml", "README.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(string(b), -1) {
			if strings.HasSuffix(n, "_") {
				continue // a prefix (etcd_nomad_*), not a name
			}
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
			if !known[n] && !known[base] {
				t.Errorf("%s names %s, which no member exports", f, n)
			}
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for n := range memberMetrics(t) {
		if !strings.Contains(string(readme), "`"+n) {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("README.md does not document %v", missing)
	}
}

func balanced(s string) bool {
	var stack []rune
	pair := map[rune]rune{')': '(', ']': '[', '}': '{'}
	inString := false
	for _, r := range s {
		switch {
		case r == '"':
			inString = !inString
		case inString:
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case r == ')' || r == ']' || r == '}':
			if len(stack) == 0 || stack[len(stack)-1] != pair[r] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0 && !inString
}
