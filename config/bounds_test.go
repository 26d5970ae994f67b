package config

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// The limits the validation enforces, each at its boundary: one step inside
// passes, one step outside fails with its own summary.
func TestValidationBoundaries(t *testing.T) {
	base := func(body string) string {
		if !strings.Contains(body, "provider") {
			body += "\n  provider \"nomad\" { group = \"etcd\" }"
		}
		return `cluster "b" {
  data_dir = "/var/lib/etcd"
  coordination "consul" {}
  ` + body + `
}
`
	}
	static := func(n int) string {
		var b strings.Builder
		b.WriteString(`provider "static" {` + "\n")
		for i := range n {
			b.WriteString(`  member "m` + string(rune('a'+i)) + `" { address = "10.0.0.` + string(rune('1'+i)) + `" }` + "\n")
		}
		b.WriteString("}\n")
		return b.String()
	}
	cases := []struct {
		name, body, summary string
		ok                  bool
	}{
		{"election 5x heartbeat", `etcd {
    heartbeat_interval = "100ms"
    election_timeout   = "500ms"
  }`, "", true},
		{"election 4.9x heartbeat", `etcd {
    heartbeat_interval = "100ms"
    election_timeout   = "490ms"
  }`, "Election timeout too short", false},
		{"election 4x heartbeat", `etcd {
    heartbeat_interval = "100ms"
    election_timeout   = "400ms"
  }`, "Election timeout too short", false},
		{"size 9", "size = 9", "", true},
		{"size 10", "size = 10", "Invalid size", false},
		{"size 0 refused (the safety issue: it was reported as 3 members)", "size = 0", "Invalid size", false},
		{"retain_count 1", `snapshot {
    retain_count = 1
    store "file" { path = "/b" }
  }`, "", true},
		{"retain_count 0", `snapshot {
    retain_count = 0
    store "file" { path = "/b" }
  }`, "Invalid retain_count", false},
		{"static size matches", "size = 3\n" + static(3), "", true},
		{"static size differs", "size = 5\n" + static(3), "Size does not match the static members", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, diags := Load("b.hcl", []byte(base(c.body)))
			var errs []string
			for _, d := range diags {
				if d.Severity == hcl.DiagError {
					errs = append(errs, d.Summary)
				}
			}
			if c.ok && len(errs) > 0 {
				t.Fatalf("want no error, got %v", errs)
			}
			if !c.ok && !contains(errs, c.summary) {
				t.Fatalf("want error %q, got %v", c.summary, errs)
			}
		})
	}
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}
