package pack_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	"github.com/etcd-nomad/etcd-nomad/nomad/pack"
)

// packDir is the pack, from this package's directory.
const packDir = "etcd"

// Each case: variables given to the pack, and the cluster definition an
// operator would write for the same settings (by hand, not derived from
// the pack).
var cases = []struct {
	name       string
	vars       map[string]any
	definition string
}{
	{
		name: "defaults",
		definition: `cluster "etcd" {
  provider "nomad" {
    stale_after = "2m"
  }
  coordination "consul" {}
  nomad {
    binary = "/usr/local/bin/etcd-nomad"
  }
}`,
	},
	{
		name: "everything else",
		vars: map[string]any{
			"cluster_name":              "kv-prod",
			"job_name":                  "kv",
			"size":                      5,
			"recovery_grace":            "0s",
			"quota_backend_bytes":       8589934592,
			"heartbeat_interval":        "200ms",
			"election_timeout":          "2s",
			"auto_compaction_mode":      "revision",
			"auto_compaction_retention": "1000",
			"group":                     "members",
			"stale_after":               "3m",
			"consul_prefix":             "kv",
			"session_ttl":               "20s",
			"snapshot_store":            "s3",
			"snapshot_interval":         "1h",
			"snapshot_retain_count":     12,
			"snapshot_retain_age":       "72h",
			"snapshot_s3_bucket":        "backups",
			"snapshot_s3_prefix":        "kv/",
			"snapshot_s3_endpoint":      "https://s3.example.com",
			"snapshot_s3_region":        "eu-west-1",
			"snapshot_s3_path_style":    true,
			"datacenters":               []any{"dc1", "dc2"},
			"namespace":                 "prod",
			"region":                    "eu",
			"driver":                    "exec",
			"artifact_source":           "https://releases.example.com/etcd-nomad.tar.gz",
			"artifact_checksum":         "sha256:" + strings.Repeat("ab", 32),
			"artifact_path":             "bin/etcd-nomad",
			"cpu":                       1000,
			"memory_mb":                 1024,
			"kill_timeout":              "20s",
			"host_volume":               "etcd",
			"distinct_hosts":            false,
			"consul_address":            "https://127.0.0.1:8501",
			"consul_ca_file":            "/etc/consul.d/ca.pem",
			"consul_tls_server_name":    "server.dc1.consul",
			"consul_cert_file":          "/etc/consul.d/client.pem",
			"consul_key_file":           "/etc/consul.d/client-key.pem",
			"extra_definition": `access {
    role "billing" {
      read_write = ["/billing/"]
    }
    user "billing-api" {
      roles      = ["billing"]
      nomad_jobs = ["billing-api"]
    }
  }`,
		},
		definition: `cluster "kv-prod" {
  size           = 5
  recovery_grace = "0s"
  etcd {
    quota_backend_bytes       = "8GiB"
    heartbeat_interval        = "200ms"
    election_timeout          = "2s"
    auto_compaction_mode      = "revision"
    auto_compaction_retention = "1000"
  }
  provider "nomad" {
    group       = "members"
    stale_after = "3m"
  }
  coordination "consul" {
    prefix      = "kv"
    session_ttl = "20s"
  }
  snapshot {
    interval     = "1h"
    retain_count = 12
    retain_age   = "72h"
    store "s3" {
      bucket     = "backups"
      prefix     = "kv/"
      endpoint   = "https://s3.example.com"
      region     = "eu-west-1"
      path_style = true
    }
  }
  access {
    role "billing" {
      read_write = ["/billing/"]
    }
    user "billing-api" {
      roles      = ["billing"]
      nomad_jobs = ["billing-api"]
    }
  }
  nomad {
    job            = "kv"
    datacenters    = ["dc1", "dc2"]
    namespace      = "prod"
    region         = "eu"
    driver         = "exec"
    cpu            = 1000
    memory_mb      = 1024
    kill_timeout   = "20s"
    distinct_hosts = false
    host_volume    = "etcd"
    artifact {
      source   = "https://releases.example.com/etcd-nomad.tar.gz"
      checksum = "sha256:abababababababababababababababababababababababababababababababab"
      path     = "bin/etcd-nomad"
    }
    consul {
      address         = "https://127.0.0.1:8501"
      ca_file         = "/etc/consul.d/ca.pem"
      tls_server_name = "server.dc1.consul"
      cert_file       = "/etc/consul.d/client.pem"
      key_file        = "/etc/consul.d/client-key.pem"
    }
  }
}`,
	},
	{
		name: "a host volume, a static peer port and a task user",
		vars: map[string]any{
			"driver":      "exec",
			"host_volume": "etcd",
			"peer_port":   2380,
			"user":        "etcd",
		},
		definition: `cluster "etcd" {
  provider "nomad" {
    stale_after = "2m"
  }
  coordination "consul" {}
  nomad {
    binary      = "/usr/local/bin/etcd-nomad"
    driver      = "exec"
    host_volume = "etcd"
    user        = "etcd"
  }
}`,
	},
	{
		// The definition pins 2380 with a host volume on distinct hosts;
		// the pack's peer_port 0 is written into its definition, so that
		// the job's dynamic port and the definition agree.
		name: "a host volume, Nomad's peer port",
		vars: map[string]any{
			"driver":      "exec",
			"host_volume": "etcd",
		},
		definition: `cluster "etcd" {
  provider "nomad" {
    stale_after = "2m"
  }
  coordination "consul" {}
  nomad {
    binary      = "/usr/local/bin/etcd-nomad"
    driver      = "exec"
    host_volume = "etcd"
    peer_port   = 0
  }
}`,
	},
	{
		name: "docker and a file store",
		vars: map[string]any{
			"driver":              "docker",
			"image":               "ghcr.io/etcd-nomad/etcd-nomad:0.1.0",
			"snapshot_store":      "file",
			"snapshot_file_path":  "/mnt/backups",
			"tls_mode":            "files",
			"tls_ca_file":         "@DIR@/ca.pem",
			"tls_cert_file":       "@DIR@/member.pem",
			"tls_key_file":        "@DIR@/member-key.pem",
			"quota_backend_bytes": 1073741824,
		},
		definition: `cluster "etcd" {
  etcd {
    quota_backend_bytes = "1GiB"
  }
  tls {
    mode      = "files"
    ca_file   = "@DIR@/ca.pem"
    cert_file = "@DIR@/member.pem"
    key_file  = "@DIR@/member-key.pem"
  }
  provider "nomad" {
    stale_after = "2m"
  }
  coordination "consul" {}
  snapshot {
    store "file" {
      path = "/mnt/backups"
    }
  }
  nomad {
    driver = "docker"
    image  = "ghcr.io/etcd-nomad/etcd-nomad:0.1.0"
  }
}`,
	},
}

// TestPackRendersTheJobOfJobRender compares the two jobs as Nomad reads
// them ('nomad job run -output', the API job in JSON), and the cluster
// definitions embedded in them as etcd-nomad reads them (config.Load).
// The job's text is one template for both (etcd.nomad.tpl); what differs
// is where its values come from, the pack's variables through
// _helpers.tpl (the deadlines and disk from the quota, the job name, the
// binary, Consul's TLS, the definition itself) or the definition through
// jobs.Render, and that is what this checks.
func TestPackRendersTheJobOfJobRender(t *testing.T) {
	nomadBin, err := devagents.Bin("nomad", devagents.NomadVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// TLS files must exist where validate runs.
			vars := map[string]any{}
			for k, v := range tc.vars {
				if s, ok := v.(string); ok {
					v = strings.ReplaceAll(s, "@DIR@", dir)
				}
				vars[k] = v
			}
			for _, f := range []string{"ca.pem", "member.pem", "member-key.pem"} {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			packJob, err := pack.Render(packDir, vars)
			if err != nil {
				t.Fatal(err)
			}
			cl, _, diags := config.Load("cluster.hcl", []byte(strings.ReplaceAll(tc.definition, "@DIR@", dir)))
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			want, err := jobs.Render(cl, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			gotJob, gotDef := apiJob(t, nomadBin, filepath.Join(dir, "pack.nomad.hcl"), packJob)
			wantJob, wantDef := apiJob(t, nomadBin, filepath.Join(dir, "render.nomad.hcl"), want)
			if d := cmp.Diff(wantJob, gotJob); d != "" {
				t.Errorf("the pack's job differs from job render's (-render +pack):\n%s\npack's job:\n%s", d, packJob)
			}
			if d := cmp.Diff(definition(t, wantDef), definition(t, gotDef)); d != "" {
				t.Errorf("the pack's cluster definition differs (-render +pack):\n%s\npack's definition:\n%s", d, gotDef)
			}
		})
	}
}

// A variable the pack ignores is caught: the comparison above is not
// blind to the settings.
func TestPackComparisonSeesAChangedSetting(t *testing.T) {
	nomadBin, err := devagents.Bin("nomad", devagents.NomadVersion)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, err := pack.Render(packDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pack.Render(packDir, map[string]any{"quota_backend_bytes": 4294967296})
	if err != nil {
		t.Fatal(err)
	}
	ja, da := apiJob(t, nomadBin, filepath.Join(dir, "a.hcl"), a)
	jb, db := apiJob(t, nomadBin, filepath.Join(dir, "b.hcl"), b)
	if cmp.Equal(ja, jb) {
		t.Error("a 4 GiB quota rendered the same job as 2 GiB: the ephemeral disk and deadlines must follow it")
	}
	if cmp.Equal(definition(t, da), definition(t, db)) {
		t.Error("a 4 GiB quota rendered the same cluster definition as 2 GiB")
	}
}

// apiJob parses the jobspec src as Nomad does and returns the job, with the
// cluster definition's template cut out, and that definition.
func apiJob(t *testing.T, nomadBin, path, src string) (map[string]any, string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nomadBin, "job", "run", "-output", path)
	cmd.Env = append(os.Environ(), "NOMAD_ADDR=http://127.0.0.1:1")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("nomad job run -output %s: %v\n%s\n%s", path, err, stderr, src)
	}
	var req map[string]any
	if err := json.Unmarshal(out, &req); err != nil {
		t.Fatal(err)
	}
	job := req["Job"].(map[string]any)
	var def string
	for _, g := range job["TaskGroups"].([]any) {
		for _, tk := range g.(map[string]any)["Tasks"].([]any) {
			for _, tpl := range tk.(map[string]any)["Templates"].([]any) {
				tm := tpl.(map[string]any)
				if tm["DestPath"] == "local/cluster.hcl" {
					def = tm["EmbeddedTmpl"].(string)
					tm["EmbeddedTmpl"] = "(compared by definition)"
				}
			}
		}
	}
	if def == "" {
		t.Fatalf("%s: no local/cluster.hcl template", path)
	}
	return job, def
}

// definition is the cluster as etcd-nomad reads src, without what names
// the file or its text.
func definition(t *testing.T, src string) *config.Cluster {
	t.Helper()
	cl, _, diags := config.Load("cluster.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatalf("%v\n%s", diags, src)
	}
	cl.File, cl.Source, cl.Nomad.Where = "", nil, ""
	return cl
}

// The README's variables table is the pack's variables: every one, with its
// default as variables.hcl writes it.
func TestReadmeListsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(packDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	vars, err := os.ReadFile(filepath.Join(packDir, "variables.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`(?m)^variable "(\w+)" \{\n(?:  \w+ += [^\n]*\n)*?  default +=([^\n]+)\n`)
	matches := decl.FindAllStringSubmatch(string(vars), -1)
	if n := strings.Count(string(vars), "\nvariable \""); len(matches) != n {
		t.Fatalf("read %d variables' defaults of %d declared", len(matches), n)
	}
	for _, m := range matches {
		row := fmt.Sprintf("| `%s` |", m[1])
		i := strings.Index(string(readme), row)
		if i < 0 {
			t.Errorf("README.md: no row for variable %s", m[1])
			continue
		}
		line, _, _ := strings.Cut(string(readme)[i:], "\n")
		if want := "`" + strings.TrimSpace(m[2]) + "`"; !strings.Contains(line, want) {
			t.Errorf("README.md: %s: default %s not in %q", m[1], want, line)
		}
	}
}
