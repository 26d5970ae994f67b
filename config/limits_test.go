package config

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// def is a cluster definition with one line per setting a test changes. The
// zero def is a clean Nomad + Consul cluster: every default, no diagnostic.
type def struct {
	name     string // default "x"
	top      string // lines directly in the cluster block
	etcd     string
	provider string // a whole provider block; default provider "nomad" {}
	coord    string // inside coordination "consul" {}
	snapshot string // inside snapshot {}, after its store; "" for none
	nomad    string
}

func (d def) src() string {
	name := d.name
	if name == "" {
		name = "x"
	}
	prov := d.provider
	if prov == "" {
		prov = `provider "nomad" {}`
	}
	top := d.top
	if !strings.HasPrefix(prov, `provider "nomad"`) {
		top += "\n  data_dir = \"/d\"" // only Nomad has a default
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %q {\n  %s\n  etcd {\n    %s\n  }\n  %s\n  coordination \"consul\" {\n    %s\n  }\n", name, top, d.etcd, prov, d.coord)
	if d.snapshot != "" {
		fmt.Fprintf(&b, "  snapshot {\n    store \"file\" { path = \"/s\" }\n    %s\n  }\n", d.snapshot)
	}
	fmt.Fprintf(&b, "  nomad {\n    binary = \"/usr/local/bin/etcd-nomad\"\n    %s\n  }\n}\n", d.nomad)
	return b.String()
}

// outcome is what validate must say about a row: nothing at all (ok), or a
// diagnostic of this severity and summary at the row's field.
type outcome struct {
	sev     hcl.DiagnosticSeverity
	summary string
}

var ok = outcome{}

func refused(summary string) outcome { return outcome{hcl.DiagError, summary} }
func warned(summary string) outcome  { return outcome{hcl.DiagWarning, summary} }

func staticMembers(n int) string {
	var b strings.Builder
	b.WriteString("provider \"static\" {\n")
	for i := range n {
		fmt.Fprintf(&b, "    member \"m%d\" { address = \"10.0.0.%d\" }\n", i, i+1)
	}
	b.WriteString("  }")
	return b.String()
}

// Every numeric and duration limit validate enforces, each just outside
// (refused or warned) and exactly at the limit (accepted without a word):
// moving any limit by one step (1; 1 byte; 1ms, the resolution etcd and
// Consul read these in; 1ns for the heartbeat's 1ms floor; 1s for
// kill_timeout, rendered in seconds) makes a row fail.
func TestLimitsBoundaries(t *testing.T) {
	const passphrase = `encryption { passphrase_env = "P" }`
	rows := []struct {
		name  string
		d     def
		field string // the attribute the diagnostic must point at; "" = the cluster block
		want  outcome
	}{
		// size: 1..9; an explicit 0 is not "the default".
		{"size 0", def{top: "size = 0"}, "size", refused("Invalid size")},
		{"size -1", def{top: "size = -1"}, "size", refused("Invalid size")},
		{"size 1", def{top: "size = 1"}, "size", ok},
		{"size 9", def{top: "size = 9"}, "size", ok},
		{"size 10", def{top: "size = 10"}, "size", refused("Invalid size")},
		{"static 9 members", def{provider: staticMembers(9)}, "", ok},
		{"static 10 members", def{provider: staticMembers(10)}, "", refused("Invalid size")},
		{"static size 0", def{top: "size = 0", provider: staticMembers(1)}, "size", refused("Invalid size")},

		// names: 1-63 characters.
		{"name 63", def{name: strings.Repeat("a", 63)}, "", ok},
		{"name 64", def{name: strings.Repeat("a", 64)}, "", refused("Invalid cluster name")},

		// ports: 1..65535, the cluster's and each static member's.
		{"port 0", def{top: "ports {\n client = 0\n }"}, "client", refused("Invalid port")},
		{"port 1", def{top: "ports {\n client = 1\n }"}, "client", ok},
		{"port 65535", def{top: "ports {\n status = 65535\n }"}, "status", ok},
		{"port 65536", def{top: "ports {\n status = 65536\n }"}, "status", refused("Invalid port")},
		{"member port 0", def{provider: "provider \"static\" {\n member \"a\" {\n address = \"10.0.0.1\"\n client_port = 0\n }\n }"}, "client_port", refused("Invalid port")},
		{"member port 1", def{provider: "provider \"static\" {\n member \"a\" {\n address = \"10.0.0.1\"\n client_port = 1\n }\n }"}, "client_port", ok},
		{"member port 65535", def{provider: "provider \"static\" {\n member \"a\" {\n address = \"10.0.0.1\"\n peer_port = 65535\n }\n }"}, "peer_port", ok},
		{"member port 65536", def{provider: "provider \"static\" {\n member \"a\" {\n address = \"10.0.0.1\"\n peer_port = 65536\n }\n }"}, "peer_port", refused("Invalid port")},

		// heartbeat: at least 1ms (etcd counts whole milliseconds).
		{"heartbeat 1ms-1ns", def{etcd: `heartbeat_interval = "999999ns"`}, "heartbeat_interval", refused("Invalid heartbeat_interval")},
		{"heartbeat 1ms", def{etcd: `heartbeat_interval = "1ms"`}, "heartbeat_interval", ok},
		// election_timeout: at least 5 heartbeats, at most 50s.
		{"election 4.99x", def{etcd: "heartbeat_interval = \"100ms\"\n election_timeout = \"499ms\""}, "election_timeout", refused("Election timeout too short")},
		{"election 5x", def{etcd: "heartbeat_interval = \"100ms\"\n election_timeout = \"500ms\""}, "election_timeout", ok},
		{"election 4x", def{etcd: "heartbeat_interval = \"200ms\"\n election_timeout = \"800ms\""}, "election_timeout", refused("Election timeout too short")},
		{"election 50s", def{top: `recovery_grace = "0s"`, etcd: `election_timeout = "50s"`}, "election_timeout", ok},
		{"election 50.001s", def{top: `recovery_grace = "0s"`, etcd: `election_timeout = "50001ms"`}, "election_timeout", refused("Election timeout too long")},

		// quota_backend_bytes: at least 1 MiB; over 8 GiB warns.
		{"quota 1MiB-1", def{etcd: `quota_backend_bytes = "1048575"`}, "quota_backend_bytes", refused("quota_backend_bytes too small")},
		{"quota 1MiB", def{etcd: `quota_backend_bytes = "1MiB"`}, "quota_backend_bytes", ok},
		{"quota 8GiB", def{etcd: `quota_backend_bytes = "8GiB"`}, "quota_backend_bytes", ok},
		{"quota 8GiB+1", def{etcd: `quota_backend_bytes = "8589934593"`}, "quota_backend_bytes", warned("quota_backend_bytes over etcd's suggested maximum")},
		{"quota 100TiB", def{etcd: `quota_backend_bytes = "100TiB"`}, "quota_backend_bytes", warned("quota_backend_bytes over etcd's suggested maximum")},

		// snapshot_count: at least 1.
		{"snapshot_count 0", def{etcd: "snapshot_count = 0"}, "snapshot_count", refused("Invalid snapshot_count")},
		{"snapshot_count 1", def{etcd: "snapshot_count = 1"}, "snapshot_count", ok},

		// defrag_ratio: 0 (off) up to, not including, 1.
		{"defrag_ratio -0.1", def{etcd: "defrag_ratio = -0.1"}, "defrag_ratio", refused("Invalid defrag_ratio")},
		{"defrag_ratio 0", def{etcd: "defrag_ratio = 0"}, "defrag_ratio", ok},
		{"defrag_ratio 0.99", def{etcd: "defrag_ratio = 0.99"}, "defrag_ratio", ok},
		{"defrag_ratio 1", def{etcd: "defrag_ratio = 1"}, "defrag_ratio", refused("Invalid defrag_ratio")},
		{"defrag_min_size 0", def{etcd: `defrag_min_size = "0"`}, "defrag_min_size", ok},
		{"defrag_min_size junk", def{etcd: `defrag_min_size = "lots"`}, "defrag_min_size", refused("Invalid size")},

		// corrupt_check_interval: a duration, "0s" is off.
		{"corrupt_check_interval 0s", def{etcd: `corrupt_check_interval = "0s"`}, "corrupt_check_interval", ok},
		{"corrupt_check_interval 1m", def{etcd: `corrupt_check_interval = "1m"`}, "corrupt_check_interval", ok},
		{"corrupt_check_interval -1m", def{etcd: `corrupt_check_interval = "-1m"`}, "corrupt_check_interval", refused("Invalid duration")},

		// recovery_grace: "0s" is off; otherwise a restart (10s) plus 3
		// elections of up to 2 election timeouts.
		{"recovery_grace 0s", def{top: `recovery_grace = "0s"`}, "recovery_grace", ok},
		{"recovery_grace 1s", def{top: `recovery_grace = "1s"`}, "recovery_grace", warned("recovery_grace shorter than a restart")},
		{"recovery_grace 16s-1ms", def{top: `recovery_grace = "15999ms"`}, "recovery_grace", warned("recovery_grace shorter than a restart")},
		{"recovery_grace 16s", def{top: `recovery_grace = "16s"`}, "recovery_grace", ok},
		{"recovery_grace 22s-1ms election 2s", def{top: `recovery_grace = "21999ms"`, etcd: `election_timeout = "2s"`}, "recovery_grace", warned("recovery_grace shorter than a restart")},
		{"recovery_grace 22s election 2s", def{top: `recovery_grace = "22s"`, etcd: `election_timeout = "2s"`}, "recovery_grace", ok},

		// stale_after: positive; nomad at least lost_after (2m), others at
		// least a restart (10s).
		{"nomad stale_after 0s", def{provider: `provider "nomad" { stale_after = "0s" }`}, "stale_after", refused("Invalid stale_after")},
		{"nomad stale_after 1ms", def{provider: `provider "nomad" { stale_after = "1ms" }`}, "stale_after", warned("stale_after shorter than Nomad's lost_after")},
		{"nomad stale_after 2m-1ms", def{provider: `provider "nomad" { stale_after = "119999ms" }`}, "stale_after", warned("stale_after shorter than Nomad's lost_after")},
		{"nomad stale_after 2m", def{provider: `provider "nomad" { stale_after = "2m" }`}, "stale_after", ok},
		{"static stale_after 10s-1ms", def{provider: "provider \"static\" {\n stale_after = \"9999ms\"\n member \"a\" { address = \"10.0.0.1\" }\n }"}, "stale_after", warned("stale_after shorter than a restart")},
		{"static stale_after 10s", def{provider: "provider \"static\" {\n stale_after = \"10s\"\n member \"a\" { address = \"10.0.0.1\" }\n }"}, "stale_after", ok},
		{"asg stale_after 10s-1ms", def{provider: "provider \"asg\" {\n name = \"g\"\n stale_after = \"9999ms\"\n }"}, "stale_after", warned("stale_after shorter than a restart")},
		{"asg stale_after 10s", def{provider: "provider \"asg\" {\n name = \"g\"\n stale_after = \"10s\"\n }"}, "stale_after", ok},

		// replace_after: not shorter than stale_after.
		{"asg replace_after < stale_after", def{provider: "provider \"asg\" {\n name = \"g\"\n stale_after = \"30s\"\n replace_after = \"29999ms\"\n }"}, "replace_after", refused("replace_after too short")},
		{"asg replace_after = stale_after", def{provider: "provider \"asg\" {\n name = \"g\"\n stale_after = \"30s\"\n replace_after = \"30s\"\n }"}, "replace_after", ok},
		{"nomad asg replace_after < stale_after", def{provider: "provider \"nomad\" {\n asg {\n name = \"g\"\n replace_after = \"119999ms\"\n }\n }"}, "replace_after", refused("replace_after too short")},
		{"nomad asg replace_after = stale_after", def{provider: "provider \"nomad\" {\n asg {\n name = \"g\"\n replace_after = \"2m\"\n }\n }"}, "replace_after", ok},

		// session_ttl: what Consul accepts, 10s..24h.
		{"session_ttl 10s-1ms", def{coord: `session_ttl = "9999ms"`}, "session_ttl", refused("Invalid session_ttl")},
		{"session_ttl 10s", def{coord: `session_ttl = "10s"`}, "session_ttl", ok},
		{"session_ttl 24h", def{coord: `session_ttl = "24h"`}, "session_ttl", ok},
		{"session_ttl 24h+1ms", def{coord: `session_ttl = "86400001ms"`}, "session_ttl", refused("Invalid session_ttl")},

		// snapshots: retain_count >= 1, interval >= 1m (warns), retain_age
		// >= 2 intervals (warns).
		{"retain_count 0", def{snapshot: "retain_count = 0"}, "retain_count", refused("Invalid retain_count")},
		{"retain_count 1", def{snapshot: passphrase + "\nretain_count = 1"}, "retain_count", ok},
		{"interval 1m-1ms", def{snapshot: `interval = "59999ms"`}, "interval", warned("Snapshot interval very short")},
		{"interval 1m", def{snapshot: passphrase + "\n" + `interval = "1m"`}, "interval", ok},
		{"retain_age 2 intervals-1ms", def{snapshot: "interval = \"30m\"\n retain_age = \"3599999ms\""}, "retain_age", warned("retain_age keeps almost nothing")},
		{"retain_age 2 intervals", def{snapshot: passphrase + "\ninterval = \"30m\"\n retain_age = \"1h\""}, "retain_age", ok},

		// Nomad resources: Nomad's minimums, and scrypt's memory.
		{"cpu 0", def{nomad: "cpu = 0"}, "cpu", refused("Invalid cpu")},
		{"cpu 1", def{nomad: "cpu = 1"}, "cpu", ok},
		{"memory_mb 9", def{nomad: "memory_mb = 9"}, "memory_mb", refused("Invalid memory_mb")},
		{"memory_mb 10", def{nomad: "memory_mb = 10"}, "memory_mb", ok},
		{"memory_mb 383 passphrase", def{snapshot: passphrase, nomad: "memory_mb = 383"}, "memory_mb", refused("Too little memory for passphrase encryption")},
		{"memory_mb 384 passphrase", def{snapshot: passphrase, nomad: "memory_mb = 384"}, "memory_mb", ok},

		// kill_timeout: whole seconds, at least 1s; under the graceful stop
		// (10s) + 5s warns; over the clients' max_kill_timeout (30s) warns.
		{"kill_timeout 999ms", def{nomad: `kill_timeout = "999ms"`}, "kill_timeout", refused("kill_timeout under a second")},
		{"kill_timeout 1s", def{nomad: `kill_timeout = "1s"`}, "kill_timeout", warned("kill_timeout shorter than a graceful stop")},
		{"kill_timeout 15.5s", def{nomad: `kill_timeout = "15500ms"`}, "kill_timeout", refused("kill_timeout not in whole seconds")},
		{"kill_timeout 14s", def{nomad: `kill_timeout = "14s"`}, "kill_timeout", warned("kill_timeout shorter than a graceful stop")},
		{"kill_timeout 15s", def{nomad: `kill_timeout = "15s"`}, "kill_timeout", ok},
		{"kill_timeout 30s", def{nomad: `kill_timeout = "30s"`}, "kill_timeout", ok},
		{"kill_timeout 31s", def{nomad: `kill_timeout = "31s"`}, "kill_timeout", warned("kill_timeout over Nomad's max_kill_timeout")},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			src := r.d.src()
			c, _, diags := Load("x.hcl", []byte(src))
			defer func() {
				if t.Failed() {
					t.Logf("definition:\n%s", src)
				}
			}()
			if r.want == ok {
				if len(diags) > 0 {
					t.Fatalf("want no diagnostic, got %s", diags)
				}
				return
			}
			line := fieldLine(t, src, r.field)
			var found *hcl.Diagnostic
			for _, d := range diags {
				if d.Severity == r.want.sev && d.Summary == r.want.summary {
					found = d
				}
			}
			if found == nil {
				t.Fatalf("want %q, got %s", r.want.summary, describe(diags))
			}
			if found.Subject == nil || found.Subject.Start.Line != line {
				t.Errorf("%q points at %v, want line %d (%s)", found.Summary, found.Subject, line, r.field)
			}
			if r.field != "" && !strings.Contains(found.Detail, r.field) && !strings.Contains(found.Summary, r.field) {
				t.Errorf("%q does not name %s: %s", found.Summary, r.field, found.Detail)
			}
			if r.want.sev == hcl.DiagError && c != nil {
				t.Errorf("Load returned a cluster despite the error")
			}
			if r.want.sev == hcl.DiagWarning && (diags.HasErrors() || c == nil) {
				t.Errorf("want only a warning, got %s", describe(diags))
			}
		})
	}
}

// fieldLine is the line of src where field is assigned, 1 for "".
func fieldLine(t *testing.T, src, field string) int {
	t.Helper()
	if field == "" {
		return 1
	}
	re := regexp.MustCompile(`(^|[{\s])` + regexp.QuoteMeta(field) + `\s*=`)
	for i, l := range strings.Split(src, "\n") {
		if re.MatchString(l) {
			return i + 1
		}
	}
	t.Fatalf("no %s in the definition", field)
	return 0
}

func describe(diags hcl.Diagnostics) string {
	if len(diags) == 0 {
		return "no diagnostic"
	}
	var s []string
	for _, d := range diags {
		s = append(s, d.Error())
	}
	return strings.Join(s, "; ")
}
