package config

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// The inputs of the safety issue, which validate used to accept in
// silence (size = 0 even reported "3 members"): size 0 is refused, the
// rest warn, each at its own line and column with the minimum it was
// compared with.
func TestSafetyIssueInputsNoLongerPass(t *testing.T) {
	src := `cluster "x" {
  size           = 0
  recovery_grace = "1s"
  etcd {
    quota_backend_bytes = "100TiB"
  }
  provider "nomad" {
    stale_after = "1ms"
  }
  coordination "consul" {}
}`
	c, res, diags := Load("x.hcl", []byte(src))
	if c != nil {
		t.Fatalf("size = 0 accepted as %d members", c.Size)
	}
	var buf bytes.Buffer
	if err := res.WriteDiagnostics(&buf, diags); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"x.hcl:2:20: error: Invalid size",
		"size must be between 1 and 9, got 0",
		"x.hcl:3:20: warning: recovery_grace shorter than a restart",
		"under 16s, a member's restart (10s) plus 3 elections",
		"x.hcl:5:27: warning: quota_backend_bytes over etcd's suggested maximum",
		"(100 TiB) is over etcd's suggested maximum of 8 GiB",
		"x.hcl:8:19: warning: stale_after shorter than Nomad's lost_after",
		`lost_after = "2m" }`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if len(diags.Errs()) != 1 {
		t.Errorf("want exactly one error (size), got %d", len(diags.Errs()))
	}
	if t.Failed() {
		t.Log(out)
	}
}

// Nomad's raw_exec driver mounts no volumes ("does not support host
// volumes"): a host_volume with it would be accepted by validate and then
// fail to place, or worse, leave the data on the allocation's disk.
func TestHostVolumeRefusedWithRawExec(t *testing.T) {
	src := func(driver string) []byte {
		return []byte(`cluster "x" {
  provider "nomad" {}
  coordination "consul" {}
  nomad {
    ` + driver + `
    host_volume = "etcd"
    binary      = "/usr/bin/etcd-nomad"
  }
}`)
	}
	for _, driver := range []string{``, `driver = "raw_exec"`} {
		_, _, diags := Load("x.hcl", src(driver))
		if !diagAt(diags, "host_volume needs another driver", 6) || !strings.Contains(diags.Error(), "host_volume") {
			t.Errorf("driver %q: want an error at host_volume (line 6), got %v", driver, diags)
		}
	}
	for _, driver := range []string{`driver = "exec"`, `driver = "docker"`} {
		def := src(driver)
		if driver == `driver = "docker"` {
			def = bytes.Replace(def, []byte(`binary      = "/usr/bin/etcd-nomad"`), []byte(`image       = "etcd-nomad:1.0.0"`), 1)
		}
		c, _, diags := Load("x.hcl", def)
		if len(diags) > 0 {
			t.Fatalf("%s: %v", driver, diags)
		}
		if c.DataDir != HostVolumeDataDir {
			t.Errorf("%s: data_dir %q, want the volume's mount %s", driver, c.DataDir, HostVolumeDataDir)
		}
	}
}

// With a host volume, the data must be on it: the job mounts the volume at
// HostVolumeDataDir, and data_dir used to keep its allocation-disk default.
func TestHostVolumeDataDirOffTheVolumeWarns(t *testing.T) {
	src := func(dataDir string) []byte {
		return []byte(`cluster "x" {
  data_dir = "` + dataDir + `"
  provider "nomad" {}
  coordination "consul" {}
  nomad {
    driver      = "exec"
    host_volume = "etcd"
    binary      = "/usr/bin/etcd-nomad"
  }
}`)
	}
	_, _, diags := Load("x.hcl", src("$${NOMAD_ALLOC_DIR}/data"))
	if len(diags) != 1 || diags[0].Severity != hcl.DiagWarning || diags[0].Summary != "data_dir not on the host volume" || diags[0].Subject.Start.Line != 2 {
		t.Fatalf("want one warning at data_dir, got %v", diags)
	}
	for _, dir := range []string{HostVolumeDataDir, HostVolumeDataDir + "/etcd"} {
		if _, _, diags := Load("x.hcl", src(dir)); len(diags) > 0 {
			t.Errorf("%s: %v", dir, diags)
		}
	}
}

// The members' Consul address used to come from the renderer's shell:
// it is now a setting of the job, with the clients' local agent as the
// default, and TLS settings that the Consul client would ignore, or read
// from the task's directory, are refused.
func TestNomadConsulAddressIsASetting(t *testing.T) {
	src := func(block string) []byte {
		return []byte(`cluster "x" {
  provider "nomad" {}
  coordination "consul" {}
  nomad {
    ` + block + `
  }
}`)
	}
	c, _, diags := Load("x.hcl", src(""))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if want := (NomadConsul{Address: "127.0.0.1:8500"}); c.Nomad.Consul != want || c.Nomad.Consul.TLS() {
		t.Errorf("default: %+v (tls %v), want %+v without TLS", c.Nomad.Consul, c.Nomad.Consul.TLS(), want)
	}
	c, _, diags = Load("x.hcl", src(`consul {
      address         = "10.0.0.5:8501"
      ca_file         = "/etc/consul.d/ca.pem"
      tls_server_name = "consul.service"
    }`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if want := (NomadConsul{Address: "10.0.0.5:8501", CAFile: "/etc/consul.d/ca.pem", TLSServerName: "consul.service"}); c.Nomad.Consul != want || !c.Nomad.Consul.TLS() {
		t.Errorf("got %+v (tls %v), want %+v with TLS", c.Nomad.Consul, c.Nomad.Consul.TLS(), want)
	}
	for _, ok := range []string{`"https://127.0.0.1:8501"`, `"unix:///var/run/consul.sock"`, `"localhost:8500"`} {
		if _, _, diags := Load("x.hcl", src(`consul { address = `+ok+` }`)); diags.HasErrors() {
			t.Errorf("address %s: %v", ok, diags)
		}
	}
	for _, bad := range []struct{ block, summary string }{
		{`consul { address = "127.0.0.1" }`, "Invalid Consul address"},
		{`consul { address = "tcp://127.0.0.1:8500" }`, "Invalid Consul address"},
		{`consul { address = "unix://consul.sock" }`, "Invalid Consul address"},
		{`consul {
      address = "http://127.0.0.1:8500"
      ca_file = "/ca.pem"
    }`, "TLS settings with an http:// Consul address"},
		{`consul { ca_file = "ca.pem" }`, "Relative Consul ca_file"},
		{`consul { cert_file = "/etc/consul.d/client.pem" }`, "Consul client certificate without its key"},
		{`consul { key_file = "client-key.pem" }`, "Relative Consul key_file"},
	} {
		_, _, diags := Load("x.hcl", src(bad.block))
		line := 5
		if strings.Contains(bad.block, "\n") {
			line = 6 // the address, on the block's first line
		}
		if !diagAt(diags, bad.summary, line) {
			t.Errorf("%s: want %q at line %d, got %v", bad.block, bad.summary, line, diags)
		}
	}
}

// What the clients run: the binary defaulted to the renderer's own path (a
// path on the operator's machine, whose replacement never changes the
// job). What the clients run is now named on purpose: a binary, or a
// release archive with its checksum. Each problem is reported at its
// field's line.
func TestNomadBinaryOrArtifact(t *testing.T) {
	const sum = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	src := func(nomad string) []byte {
		return []byte(`cluster "x" {
  provider "nomad" {}
  coordination "consul" {}
  nomad {
    ` + nomad + `
  }
}`)
	}
	artifact := func(source, checksum, path string) string {
		s := "artifact {\n      source   = \"" + source + "\"\n      checksum = \"" + checksum + "\"\n"
		if path != "" {
			s += "      path     = \"" + path + "\"\n"
		}
		return s + "    }"
	}
	const rel = "https://releases.example.com/etcd-nomad_0.1.0_linux_amd64.tar.gz"
	for _, c := range []struct {
		name, nomad string
		sev         hcl.DiagnosticSeverity // 0: no diagnostic
		summary     string
		line        int
	}{
		{"nothing named", `cpu = 500`, hcl.DiagWarning, "No binary or artifact for the Nomad clients", 4},
		{"binary", `binary = "/usr/local/bin/etcd-nomad"`, 0, "", 0},
		{"relative binary", `binary = "bin/etcd-nomad"`, hcl.DiagError, "Relative binary", 5},
		{"exec, binary in /usr", "driver = \"exec\"\n    binary = \"/usr/local/bin/etcd-nomad\"", 0, "", 0},
		{"exec, binary outside the chroot", "driver = \"exec\"\n    binary = \"/opt/etcd-nomad\"", hcl.DiagWarning, "binary outside the exec chroot", 6},
		{"docker image", "driver = \"docker\"\n    image = \"registry.example.com/etcd-nomad:0.1.0\"", 0, "", 0},
		{"artifact", artifact(rel, sum, ""), 0, "", 0},
		{"artifact, exec, path in a directory", "driver = \"exec\"\n    " + artifact("https://r.example.com/e.zip?x=1", sum, "etcd-nomad_0.1.0/etcd-nomad"), 0, "", 0},
		{"artifact, archive= query", artifact("https://r.example.com/download?archive=tar.gz", sum, ""), 0, "", 0},
		{"artifact, a bare file", artifact("https://r.example.com/etcd-nomad_linux_amd64", sum, ""), hcl.DiagError, "artifact is not an archive", 6},
		{"artifact, md5", artifact(rel, "md5:0123456789abcdef0123456789abcdef", ""), hcl.DiagError, "Invalid artifact checksum", 7},
		{"artifact, uppercase hex", artifact(rel, strings.ToUpper(sum), ""), hcl.DiagError, "Invalid artifact checksum", 7},
		{"artifact, path leaves the archive", artifact(rel, sum, "../etcd-nomad"), hcl.DiagError, "Invalid artifact path", 8},
		{"artifact and binary", "binary = \"/usr/local/bin/etcd-nomad\"\n    " + artifact(rel, sum, ""), hcl.DiagError, "binary and artifact both set", 5},
		{"artifact with docker", "driver = \"docker\"\n    image = \"etcd-nomad:0.1.0\"\n    " + artifact(rel, sum, ""), hcl.DiagError, "artifact with driver docker", 7},
	} {
		cl, _, diags := Load("x.hcl", src(c.nomad))
		if c.sev == 0 {
			if len(diags) > 0 {
				t.Errorf("%s: want no diagnostic, got %v", c.name, diags)
			} else if strings.HasPrefix(c.name, "artifact") && (cl.Nomad.Artifact == nil || cl.Nomad.Artifact.Checksum != sum || cl.Nomad.Artifact.Path == "") {
				t.Errorf("%s: decoded %+v", c.name, cl.Nomad.Artifact)
			}
			continue
		}
		found := false
		for _, d := range diags {
			found = found || (d.Severity == c.sev && d.Summary == c.summary && d.Subject != nil && d.Subject.Start.Line == c.line)
		}
		if !found {
			t.Errorf("%s: want %q at line %d, got %v", c.name, c.summary, c.line, diags)
		}
	}
}

// One member per host: distinct_hosts = false is for a demo on one Nomad client; on a
// cluster of several members validate says what it costs, at the setting.
func TestDistinctHostsOffWarns(t *testing.T) {
	load := func(size int, nomad string) (*Cluster, string) {
		t.Helper()
		src := fmt.Sprintf(`cluster "x" {
  size = %d
  provider "nomad" {}
  coordination "consul" {}
  nomad {
    %s
  }
}`, size, nomad)
		c, res, diags := Load("x.hcl", []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		var buf bytes.Buffer
		if err := res.WriteDiagnostics(&buf, diags); err != nil {
			t.Fatal(err)
		}
		return c, buf.String()
	}
	const warning = "warning: Members may share a host"
	c, out := load(3, "")
	if !c.Nomad.DistinctHosts || strings.Contains(out, warning) {
		t.Errorf("default: DistinctHosts = %v, output %q", c.Nomad.DistinctHosts, out)
	}
	c, out = load(3, "distinct_hosts = false")
	if c.Nomad.DistinctHosts || !strings.Contains(out, "x.hcl:6:22: "+warning) || !strings.Contains(out, "takes the quorum") {
		t.Errorf("distinct_hosts = false, 3 members: DistinctHosts = %v, output %q", c.Nomad.DistinctHosts, out)
	}
	// One member has no quorum to lose to a shared host.
	if _, out = load(1, "distinct_hosts = false"); strings.Contains(out, warning) {
		t.Errorf("distinct_hosts = false, 1 member: %q", out)
	}
}

// peer_port (data follows allocations on host volumes): a static peer port is a port, and members sharing
// a Nomad client cannot all have it. user is a user name or a uid.
func TestNomadPortAndUserRefusals(t *testing.T) {
	src := func(nomad string) []byte {
		return []byte(`cluster "x" {
  provider "nomad" {}
  coordination "consul" {}
  nomad {
    binary = "/usr/bin/etcd-nomad"
    ` + nomad + `
  }
}`)
	}
	for _, c := range []struct{ nomad, want string }{
		{"peer_port = 70000", "Invalid peer_port"},
		{"peer_port = -1", "Invalid peer_port"},
		{"peer_port = 2380\n distinct_hosts = false", "Static peer port on shared clients"},
		{`user = "root; rm"`, "Invalid user"},
		{`user = "Etcd"`, "Invalid user"},
	} {
		_, _, diags := Load("x.hcl", src(c.nomad))
		if !diagAt(diags, c.want, 6) {
			t.Errorf("%q: want %q at line 6, got %v", c.nomad, c.want, diags)
		}
	}
	for _, ok := range []string{"peer_port = 2380", "peer_port = 0", "distinct_hosts = false", `user = "etcd"`, `user = "999"`} {
		cl, _, diags := Load("x.hcl", src(ok))
		if diags.HasErrors() {
			t.Errorf("%q: %v", ok, diags)
		} else if ok == "peer_port = 2380" && cl.Nomad.PeerPort != 2380 {
			t.Errorf("%q: PeerPort %d", ok, cl.Nomad.PeerPort)
		}
	}
}

// A snapshot store open to its readers (no encryption) or its writers (no
// authentication: tls not auto, so no KEK to derive the MAC key from) is
// said at validate, not found out after a forged restore.
func TestValidateWarnsUnprotectedSnapshotStore(t *testing.T) {
	src := func(tls, enc string) string {
		return `cluster "x" {
  data_dir = "/d"
  provider "static" {
    member "a" { address = "127.0.0.1" }
  }
  coordination "local" { dir = "c" }
  tls { mode = "` + tls + `" }
  snapshot {
    store "file" { path = "/s" }
    ` + enc + `
  }
}`
	}
	warnings := func(s string) []string {
		_, _, diags := Load("/etc/x.hcl", []byte(s))
		if diags.HasErrors() {
			t.Fatalf("%s", diags)
		}
		var out []string
		for _, d := range diags {
			out = append(out, d.Summary)
		}
		return out
	}
	recipients := `encryption { recipients = ["age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"] }`
	for _, c := range []struct {
		tls, enc string
		want     []string
	}{
		{"auto", "", []string{SummaryUnencryptedSnapshots}},
		{"off", "", []string{SummaryUnencryptedSnapshots, SummaryUnauthenticatedSnapshots}},
		{"off", recipients, []string{SummaryUnauthenticatedSnapshots}},
		{"auto", recipients, nil},
	} {
		if got := warnings(src(c.tls, c.enc)); !slices.Equal(got, c.want) {
			t.Errorf("tls %s, encryption %q: warnings %q, want %q", c.tls, c.enc, got, c.want)
		}
	}
}

// Members in Docker: driver "docker" runs an image, its own field. The renderer
// used to put binary's path in the job's config.image, which Nomad then
// tried to pull. A path, a saved image file or a binary is refused at its
// field's line, saying which field; an image without a version tag warns
// (a new build under the same name rolls nothing out); so do settings
// that name files on the clients, which the container does not see.
func TestDockerRunsAnImage(t *testing.T) {
	src := func(nomad string) []byte {
		return []byte(`cluster "x" {
  provider "nomad" {}
  coordination "consul" {}
  nomad {
    driver = "docker"
    ` + nomad + `
  }
}`)
	}
	for _, c := range []struct {
		name, nomad string
		sev         hcl.DiagnosticSeverity // 0: no diagnostic
		summary     string
		line        int
		says        string // in the diagnostic's detail
	}{
		{"tagged", `image = "etcd-nomad:1.2.3"`, 0, "", 0, ""},
		{"registry with a port", `image = "registry.example.com:5000/infra/etcd-nomad:1.2.3"`, 0, "", 0, ""},
		{"digest", `image = "ghcr.io/x/etcd-nomad@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"`, 0, "", 0, ""},
		{"nothing named", `cpu = 500`, hcl.DiagWarning, "No image for driver docker", 4, "-image REF"},
		{"a path", `image = "/usr/local/bin/etcd-nomad"`, hcl.DiagError, "Invalid image", 6, `image = "/usr/local/bin/etcd-nomad" is a path`},
		{"a relative path", `image = "./bin/etcd-nomad"`, hcl.DiagError, "Invalid image", 6, "is a path"},
		{"a saved image", `image = "bin/etcd-nomad-image-1.2.3.tar"`, hcl.DiagError, "Invalid image", 6, "docker load"},
		{"uppercase", `image = "Etcd-Nomad:1.2.3"`, hcl.DiagError, "Invalid image", 6, "not an image reference"},
		{"no tag", `image = "etcd-nomad"`, hcl.DiagWarning, "Image without a version tag", 6, "nothing rolls out"},
		{"latest", `image = "registry.example.com:5000/etcd-nomad:latest"`, hcl.DiagWarning, "Image without a version tag", 6, "nothing rolls out"},
		{"binary", "image = \"etcd-nomad:1.2.3\"\n    binary = \"/usr/local/bin/etcd-nomad\"", hcl.DiagError, "binary with driver docker", 7, `driver "docker" runs an image`},
		{"binary alone", `binary = "registry.example.com/etcd-nomad:0.1.0"`, hcl.DiagError, "binary with driver docker", 6, "image ="},
		{"client files", "image = \"etcd-nomad:1.2.3\"\n    consul {\n      ca_file = \"/etc/consul.d/ca.pem\"\n    }", hcl.DiagWarning, "Client paths the member's container does not see", 5, `nomad { consul { ca_file } } = "/etc/consul.d/ca.pem"`},
	} {
		_, _, diags := Load("x.hcl", src(c.nomad))
		if c.sev == 0 {
			if len(diags) > 0 {
				t.Errorf("%s: want no diagnostic, got %v", c.name, diags)
			}
			continue
		}
		found := false
		for _, d := range diags {
			found = found || (d.Severity == c.sev && d.Summary == c.summary && d.Subject != nil && d.Subject.Start.Line == c.line && strings.Contains(d.Detail, c.says))
		}
		if !found {
			t.Errorf("%s: want %q at line %d saying %q, got %v", c.name, c.summary, c.line, c.says, diags)
		}
	}
	// image is docker's: with another driver it is refused.
	_, _, diags := Load("x.hcl", []byte(`cluster "x" {
  provider "nomad" {}
  coordination "consul" {}
  nomad {
    binary = "/usr/local/bin/etcd-nomad"
    image  = "etcd-nomad:1.2.3"
  }
}`))
	if !diagAt(diags, "image without driver docker", 6) {
		t.Errorf("image with raw_exec: want an error at line 6, got %v", diags)
	}
}

// Review of the Docker work (session 12), F1 and F3: under driver docker a
// data_dir on nothing Nomad mounts into the container (its writable layer,
// recreated at every restart of the task) or in the secrets directory (a
// tmpfs) is refused at data_dir's line; the allocation's and the task's
// directories and the host volume are accepted. user = "root" (or uid 0)
// is refused at user's line, saying why.
func TestDockerKeepsDataOnTheHostAndRunsUnprivileged(t *testing.T) {
	src := func(top, nomad string) []byte {
		return []byte(`cluster "x" {
  provider "nomad" {}
  coordination "consul" {}
  ` + top + `
  nomad {
    driver = "docker"
    image  = "etcd-nomad:1.2.3"
    ` + nomad + `
  }
}`)
	}
	for _, c := range []struct {
		name, top, nomad string
		summary          string // "": no error
		line             int
		says             string
	}{
		{"default", "", "", "", 0, ""},
		{"alloc data", `data_dir = "$${NOMAD_ALLOC_DIR}/data/etcd"`, "", "", 0, ""},
		{"alloc mount", `data_dir = "/alloc/data"`, "", "", 0, ""},
		{"task dir", `data_dir = "$${NOMAD_TASK_DIR}/etcd"`, "", "", 0, ""},
		{"host volume", `data_dir = "/var/lib/etcd-nomad/x"`, `host_volume = "etcd"`, "", 0, ""},
		{"numeric user", "", `user = "65532"`, "", 0, ""},
		{"tmp", `data_dir = "/tmp/etcd"`, "", "data_dir in the container's writable layer", 4, `data_dir = "/tmp/etcd" is on nothing Nomad mounts`},
		{"relative", `data_dir = "data"`, "", "data_dir in the container's writable layer", 4, "new container at every restart"},
		{"host volume path without one", `data_dir = "/var/lib/etcd-nomad"`, "", "data_dir in the container's writable layer", 4, "host_volume (then mounted at"},
		{"escapes the alloc dir", `data_dir = "$${NOMAD_ALLOC_DIR}/../etc"`, "", "data_dir in the container's writable layer", 4, ""},
		{"outside the host volume", `data_dir = "/srv/etcd"`, `host_volume = "etcd"`, "data_dir in the container's writable layer", 4, `where host_volume = "etcd" is mounted`},
		{"secrets", `data_dir = "$${NOMAD_SECRETS_DIR}/etcd"`, "", "data_dir in the secrets directory", 4, "tmpfs"},
		{"secrets mount", `data_dir = "/secrets"`, "", "data_dir in the secrets directory", 4, "tmpfs"},
		{"root", "", `user = "root"`, "user root with driver docker", 8, "uid 65532"},
		{"uid 0", "", `user = "0"`, "user root with driver docker", 8, "root on the host"},
	} {
		_, _, diags := Load("x.hcl", src(c.top, c.nomad))
		if c.summary == "" {
			if diags.HasErrors() {
				t.Errorf("%s: want no error, got %v", c.name, diags)
			}
			continue
		}
		found := false
		for _, d := range diags {
			found = found || (d.Severity == hcl.DiagError && d.Summary == c.summary && d.Subject != nil && d.Subject.Filename == "x.hcl" && d.Subject.Start.Line == c.line && strings.Contains(d.Detail, c.says))
		}
		if !found {
			t.Errorf("%s: want %q at x.hcl:%d saying %q, got %v", c.name, c.summary, c.line, c.says, diags)
		}
	}
	// Other drivers keep their choices: raw_exec runs as the client's
	// user, and its data_dir is a path on the client.
	_, _, diags := Load("x.hcl", []byte(`cluster "x" {
  provider "nomad" {}
  coordination "consul" {}
  data_dir = "/srv/etcd"
  nomad {
    binary = "/usr/local/bin/etcd-nomad"
    user   = "root"
  }
}`))
	if diags.HasErrors() {
		t.Errorf("raw_exec with data_dir /srv/etcd and user root: want no error, got %v", diags)
	}
}
