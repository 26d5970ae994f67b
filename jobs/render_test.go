package jobs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/nomad"
)

// jobspec is a rendered job, parsed as HCL so that tests read the settings
// Nomad reads rather than search the text.
type jobspec struct {
	t   *testing.T
	src []byte
	top *hclsyntax.Body
}

// render renders the definition whose cluster block holds body.
func render(t *testing.T, body string) jobspec {
	t.Helper()
	src := `cluster "db" {
  provider "nomad" {}
  coordination "consul" {}
` + body + `
}`
	cl, _, diags := config.Load("db.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	spec, err := Render(cl, Options{Binary: "/usr/local/bin/etcd-nomad"})
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclsyntax.ParseConfig([]byte(spec), "job.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("rendered job does not parse: %v\n%s", diags, spec)
	}
	return jobspec{t: t, src: []byte(spec), top: f.Body.(*hclsyntax.Body)}
}

// block returns the body at path, each step a block type ("group", "task",
// "env"); nil when a step is missing.
func (j jobspec) block(path ...string) *hclsyntax.Body {
	b := j.top
	for _, typ := range path {
		var next *hclsyntax.Body
		for _, blk := range b.Blocks {
			if blk.Type == typ {
				next = blk.Body
				break
			}
		}
		if next == nil {
			return nil
		}
		b = next
	}
	return b
}

// attr returns the source text of the attribute name at path ("" when
// absent): `"5s"`, `true`, `"${NOMAD_UNIX_ADDR}"`.
func (j jobspec) attr(name string, path ...string) string {
	j.t.Helper()
	b := j.block(path...)
	if b == nil {
		return ""
	}
	a, ok := b.Attributes[name]
	if !ok {
		return ""
	}
	return string(a.Expr.Range().SliceBytes(j.src))
}

var (
	group = []string{"job", "group"}
	task  = []string{"job", "group", "task"}
	env   = []string{"job", "group", "task", "env"}
)

func in(path []string, more ...string) []string {
	return append(append([]string(nil), path...), more...)
}

// Item 4 of the job review: the members' Nomad address came from the
// renderer's NOMAD_ADDR (or 127.0.0.1:4646). They now use the task API
// socket of their own client, which Nomad opens and names in
// NOMAD_UNIX_ADDR ("unix://.../secrets/api.sock") for tasks whose
// identity is in their environment (client/taskenv: only then).
func TestRenderedNomadAddrIsTheTaskAPISocket(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "http://operator-laptop:4646")
	j := render(t, "")
	if got := j.attr("NOMAD_ADDR", env...); got != `"${NOMAD_UNIX_ADDR}"` {
		t.Errorf("NOMAD_ADDR = %s, want the task API socket \"${NOMAD_UNIX_ADDR}\"", got)
	}
	if got := j.attr("env", in(task, "identity")...); got != "true" {
		t.Errorf("identity { env = %s }: NOMAD_UNIX_ADDR and NOMAD_TOKEN are only set with env = true", got)
	}
}

// Item 4: CONSUL_HTTP_ADDR came from the renderer's shell. It is now the
// definition's nomad { consul { } }, the clients' local agent by default,
// with its TLS settings rendered explicitly (empty ones too, so that
// nothing is inherited from the client agent's environment).
func TestRenderedConsulAddrFromTheDefinitionNotTheShell(t *testing.T) {
	t.Setenv("CONSUL_HTTP_ADDR", "operator-laptop:8500")
	t.Setenv("CONSUL_CACERT", "/home/op/ca.pem")
	j := render(t, "")
	for k, want := range map[string]string{
		"CONSUL_HTTP_ADDR":       `"127.0.0.1:8500"`,
		"CONSUL_HTTP_SSL":        `"false"`,
		"CONSUL_CACERT":          `""`,
		"CONSUL_TLS_SERVER_NAME": `""`,
		"CONSUL_CLIENT_CERT":     `""`,
		"CONSUL_CLIENT_KEY":      `""`,
	} {
		if got := j.attr(k, env...); got != want {
			t.Errorf("default: %s = %s, want %s", k, got, want)
		}
	}
	j = render(t, `nomad {
    consul {
      address         = "10.0.0.5:8501"
      ca_file         = "/etc/consul.d/ca.pem"
      tls_server_name = "server.dc1.consul"
      cert_file       = "/etc/consul.d/client.pem"
      key_file        = "/etc/consul.d/client-key.pem"
    }
  }`)
	for k, want := range map[string]string{
		"CONSUL_HTTP_ADDR":       `"10.0.0.5:8501"`,
		"CONSUL_HTTP_SSL":        `"true"`,
		"CONSUL_CACERT":          `"/etc/consul.d/ca.pem"`,
		"CONSUL_TLS_SERVER_NAME": `"server.dc1.consul"`,
		"CONSUL_CLIENT_CERT":     `"/etc/consul.d/client.pem"`,
		"CONSUL_CLIENT_KEY":      `"/etc/consul.d/client-key.pem"`,
	} {
		if got := j.attr(k, env...); got != want {
			t.Errorf("with TLS: %s = %s, want %s", k, got, want)
		}
	}
}

// Item 6: restart { mode = "delay" } never fails the allocation, so a
// member crash-looping on a broken node was never rescheduled. With mode
// "fail" and bounded attempts the allocation fails and reschedule places
// it again (e2e TestCrashLoopingMemberIsRescheduled shows Nomad doing it).
func TestCrashLoopingMemberFailsItsAllocation(t *testing.T) {
	j := render(t, "")
	restart := in(group, "restart")
	if got := j.attr("mode", restart...); got != `"fail"` {
		t.Errorf("restart { mode = %s }, want \"fail\"", got)
	}
	if got := j.attr("attempts", restart...); got != "3" {
		t.Errorf("restart { attempts = %s }, want 3", got)
	}
	if got := j.attr("interval", restart...); got != `"5m"` {
		t.Errorf("restart { interval = %s }, want \"5m\"", got)
	}
	if got := j.attr("unlimited", in(group, "reschedule")...); got != "true" {
		t.Errorf("reschedule { unlimited = %s }, want true", got)
	}
}

// What the review found right stays: one member at a time, gated on the
// Consul checks; no canaries; no check_restart (a cluster without quorum
// fails every member's check, and restarting them all would not bring it
// back); templates never restart or signal the member.
func TestRenderedJobKeepsWhatTheReviewFoundRight(t *testing.T) {
	j := render(t, "")
	update := []string{"job", "update"}
	if got := j.attr("max_parallel", update...); got != "1" {
		t.Errorf("update { max_parallel = %s }, want 1", got)
	}
	if got := j.attr("health_check", update...); got != `"checks"` {
		t.Errorf("update { health_check = %s }, want \"checks\"", got)
	}
	if got := j.attr("canary", update...); got != "" {
		t.Errorf("update { canary = %s }, want none", got)
	}
	if strings.Contains(string(j.src), "check_restart") {
		t.Error("the job has a check_restart block")
	}
	n := 0
	for _, blk := range j.block(task...).Blocks {
		if blk.Type != "template" {
			continue
		}
		n++
		if a, ok := blk.Body.Attributes["change_mode"]; !ok || string(a.Expr.Range().SliceBytes(j.src)) != `"noop"` {
			t.Errorf("a template without change_mode = \"noop\"")
		}
	}
	if n != 2 {
		t.Errorf("%d templates, want 2 (Consul token, definition)", n)
	}
}

// Item 8: ephemeral_disk { size = 1024 } was under the default 2 GiB quota
// alone. The disk now holds twice the quota (the database, and a second
// copy while a snapshot is received, spooled or defragmented) plus 1 GiB
// for the WAL and .snap files; with a host volume there is no such disk.
func TestEphemeralDiskFollowsTheQuota(t *testing.T) {
	for _, c := range []struct {
		etcd string
		want string
	}{
		{"", "5120"},
		{`etcd { quota_backend_bytes = "8GiB" }`, "17408"},
		{`etcd { quota_backend_bytes = "100MiB" }`, "1224"},
		{`etcd { quota_backend_bytes = "1048577" }`, "1027"}, // rounded up to whole MiB
	} {
		j := render(t, c.etcd)
		if got := j.attr("size", in(group, "ephemeral_disk")...); got != c.want {
			t.Errorf("%q: ephemeral_disk { size = %s }, want %s", c.etcd, got, c.want)
		}
		if got := j.attr("sticky", in(group, "ephemeral_disk")...); got != "true" {
			t.Errorf("%q: ephemeral_disk { sticky = %s }, want true", c.etcd, got)
		}
	}
	j := render(t, `nomad {
    driver      = "exec"
    host_volume = "etcd"
  }`)
	if j.block(in(group, "ephemeral_disk")...) != nil {
		t.Error("a host volume job also asks for an ephemeral disk of the quota's size")
	}
}

// Item 8: the member's Consul service must be gone before the member gets
// SIGTERM, so that clients looking it up stop choosing it while it hands
// leadership away and leaves: the group's shutdown_delay (its services are
// the group's) sits between deregistration and the kill signal.
func TestShutdownDelayDeregistersBeforeSIGTERM(t *testing.T) {
	j := render(t, "")
	if got := j.attr("shutdown_delay", group...); got != `"5s"` {
		t.Errorf("group shutdown_delay = %s, want \"5s\"", got)
	}
	if got := j.attr("kill_timeout", task...); got != `"30s"` {
		t.Errorf("kill_timeout = %s, want \"30s\"", got)
	}
}

// renderWith renders the definition whose cluster block holds body with
// options o, and returns the job or the error.
func renderWith(t *testing.T, body string, o Options) (jobspec, error) {
	t.Helper()
	src := "cluster \"db\" {\n  provider \"nomad\" {}\n  coordination \"consul\" {}\n" + body + "\n}"
	cl, _, diags := config.Load("db.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	spec, err := Render(cl, o)
	if err != nil {
		return jobspec{}, err
	}
	f, diags := hclsyntax.ParseConfig([]byte(spec), "job.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("rendered job does not parse: %v\n%s", diags, spec)
	}
	return jobspec{t: t, src: []byte(spec), top: f.Body.(*hclsyntax.Body)}, nil
}

// Item 5: with no binary named, the job ran the renderer's own path (a
// path on the operator's machine; replacing the file there never changed
// the job). Render now refuses, naming the nomad block's file and line and
// the settings that fix it; -binary (Options.Binary) still names one.
func TestRenderRequiresABinaryOrArtifact(t *testing.T) {
	_, err := renderWith(t, "  nomad {\n    cpu = 500\n  }", Options{})
	if err == nil || !strings.Contains(err.Error(), "db.hcl:4: nomad: neither binary nor artifact") || !strings.Contains(err.Error(), "-binary") {
		t.Fatalf("render without a binary: %v, want an error at db.hcl:4 naming binary, artifact and -binary", err)
	}
	j, err := renderWith(t, "  nomad {\n    binary = \"/opt/bin/etcd-nomad\"\n  }", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := j.attr("command", in(task, "config")...); got != `"/opt/bin/etcd-nomad"` {
		t.Errorf("command = %s, want the definition's binary", got)
	}
	if j.block(in(task, "artifact")...) != nil {
		t.Error("an artifact block without an artifact")
	}
}

// Item 5: a release as an artifact with its checksum, unpacked into the
// task directory (exec's chroot holds it too) and run from there; a new
// release is then a change of the job, which the update block rolls out
// one member at a time. The renderer's -binary overrides it (tests, demo).
func TestRenderedArtifact(t *testing.T) {
	const sum = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	def := func(driver, path string) string {
		s := "  nomad {\n    driver = \"" + driver + "\"\n    artifact {\n      source   = \"https://r.example.com/etcd-nomad_0.2.0_linux_amd64.tar.gz\"\n      checksum = \"" + sum + "\"\n"
		if path != "" {
			s += "      path     = \"" + path + "\"\n"
		}
		return s + "    }\n  }"
	}
	for _, c := range []struct{ driver, path, command string }{
		{"exec", "", `"${NOMAD_TASK_DIR}/etcd-nomad"`},
		{"raw_exec", "etcd-nomad_0.2.0/etcd-nomad", `"${NOMAD_TASK_DIR}/etcd-nomad_0.2.0/etcd-nomad"`},
	} {
		j, err := renderWith(t, def(c.driver, c.path), Options{})
		if err != nil {
			t.Fatal(err)
		}
		art := in(task, "artifact")
		for k, want := range map[string]string{
			"source":      `"https://r.example.com/etcd-nomad_0.2.0_linux_amd64.tar.gz"`,
			"destination": `"local/"`,
		} {
			if got := j.attr(k, art...); got != want {
				t.Errorf("%s: artifact { %s = %s }, want %s", c.driver, k, got, want)
			}
		}
		if got := j.attr("checksum", in(art, "options")...); got != `"`+sum+`"` {
			t.Errorf("%s: artifact { options { checksum = %s } }, want %q", c.driver, got, sum)
		}
		if got := j.attr("command", in(task, "config")...); got != c.command {
			t.Errorf("%s: command = %s, want %s", c.driver, got, c.command)
		}
		if got := j.attr("driver", task...); got != `"`+c.driver+`"` {
			t.Errorf("driver = %s, want %q", got, c.driver)
		}
	}
	j, err := renderWith(t, def("exec", ""), Options{Binary: "/tmp/etcd-nomad"})
	if err != nil {
		t.Fatal(err)
	}
	if j.block(in(task, "artifact")...) != nil || j.attr("command", in(task, "config")...) != `"/tmp/etcd-nomad"` {
		t.Errorf("-binary did not replace the artifact: command %s", j.attr("command", in(task, "config")...))
	}
}

// Item 7: healthy_deadline was a fixed 3m, about a minute of transfer for
// a 2 GiB database joining from scratch: a real join missed it, and
// auto_revert rolled the job back. It now follows the quota (3m of fixed
// costs plus the quota at 20 MiB/s, rounded up to the minute), for
// rolling updates and node drains alike, and progress_deadline stays
// above it as Nomad requires.
func TestJoinDeadlinesFollowTheQuota(t *testing.T) {
	for _, c := range []struct{ etcd, healthy, progress string }{
		{`etcd { quota_backend_bytes = "100MiB" }`, `"4m"`, `"10m"`},
		{"", `"5m"`, `"10m"`},
		{`etcd { quota_backend_bytes = "8GiB" }`, `"10m"`, `"15m"`},
	} {
		j := render(t, c.etcd)
		update := []string{"job", "update"}
		if got := j.attr("healthy_deadline", update...); got != c.healthy {
			t.Errorf("%q: update { healthy_deadline = %s }, want %s", c.etcd, got, c.healthy)
		}
		if got := j.attr("progress_deadline", update...); got != c.progress {
			t.Errorf("%q: update { progress_deadline = %s }, want %s", c.etcd, got, c.progress)
		}
		if got := j.attr("healthy_deadline", in(group, "migrate")...); got != c.healthy {
			t.Errorf("%q: migrate { healthy_deadline = %s }, want %s", c.etcd, got, c.healthy)
		}
	}
}

// One member per host: Nomad's default binpack scheduler may put every member on one
// client, and that host's failure then takes the quorum. The group carries a
// distinct_hosts constraint unless the definition turns it off (a demo on a
// single client, which could not place a second member otherwise).
func TestOneMemberPerHostByDefault(t *testing.T) {
	distinct := func(j jobspec) bool {
		for _, blk := range j.block(group...).Blocks {
			if blk.Type != "constraint" {
				continue
			}
			op, ok := blk.Body.Attributes["operator"]
			if ok && string(op.Expr.Range().SliceBytes(j.src)) == `"distinct_hosts"` {
				v := blk.Body.Attributes["value"]
				return v != nil && string(v.Expr.Range().SliceBytes(j.src)) == `"true"`
			}
		}
		return false
	}
	if !distinct(render(t, "")) {
		t.Error("default job: no distinct_hosts constraint on the group")
	}
	if !distinct(render(t, `nomad { distinct_hosts = true }`)) {
		t.Error("distinct_hosts = true: no distinct_hosts constraint on the group")
	}
	if distinct(render(t, `nomad { distinct_hosts = false }`)) {
		t.Error("distinct_hosts = false still renders the constraint")
	}
}

// A node drain moves the member of the drained host by the
// group's migrate block: one at a time, the next only once the replacement
// passes its Consul check, so a drain of several hosts never takes two
// members (and the quorum of a 3-member cluster) at once.
func TestNodeDrainMovesOneMemberAtATime(t *testing.T) {
	j := render(t, "")
	migrate := in(group, "migrate")
	if j.block(migrate...) == nil {
		t.Fatal("no migrate block: Nomad's default is the same, but unstated")
	}
	for k, want := range map[string]string{
		"max_parallel":     "1",
		"health_check":     `"checks"`,
		"min_healthy_time": `"3s"`,
		"healthy_deadline": `"5m"`, // JoinDeadline at the default 2 GiB quota
	} {
		if got := j.attr(k, migrate...); got != want {
			t.Errorf("migrate { %s = %s }, want %s", k, got, want)
		}
	}
}

// Data follows allocations (invariant 12): with a host volume (and one member
// per host) the peer port is static, etcd's 2380 unless peer_port says
// otherwise, so a member that comes back after 'nomad job stop' and
// 'nomad job run' has the peer URL its peers dial. Without a host volume
// Nomad picks every port.
func TestHostVolumePinsThePeerPort(t *testing.T) {
	for _, c := range []struct {
		nomad string
		want  string // the peer port's static, "" for a dynamic port
	}{
		{``, ""},
		{`nomad {
    driver      = "exec"
    host_volume = "etcd"
  }`, "2380"},
		{`nomad {
    driver      = "exec"
    host_volume = "etcd"
    peer_port   = 12380
  }`, "12380"},
		{`nomad {
    peer_port = 2390
  }`, "2390"},
	} {
		j := render(t, c.nomad)
		net := j.block(in(group, "network")...)
		if net == nil {
			t.Fatalf("%q: no network block", c.nomad)
		}
		static := map[string]string{}
		for _, blk := range net.Blocks {
			if blk.Type != "port" || len(blk.Labels) != 1 {
				continue
			}
			static[blk.Labels[0]] = ""
			if a, ok := blk.Body.Attributes["static"]; ok {
				static[blk.Labels[0]] = string(a.Expr.Range().SliceBytes(j.src))
			}
		}
		want := map[string]string{nomadglue.PortClient: "", nomadglue.PortPeer: c.want, nomadglue.PortStatus: ""}
		if fmt.Sprint(static) != fmt.Sprint(want) {
			t.Errorf("%q: ports' static %v, want %v", c.nomad, static, want)
		}
	}
}

// nomad { user }: the member's task runs as that user (exec's default is
// nobody, which cannot write a host volume owned by another user); unset,
// the job names no user and Nomad's driver default applies.
func TestTaskUser(t *testing.T) {
	if got := render(t, "").attr("user", task...); got != "" {
		t.Errorf("user = %s without nomad { user }", got)
	}
	j := render(t, `nomad {
    driver      = "exec"
    host_volume = "etcd"
    user        = "etcd"
  }`)
	if got := j.attr("user", task...); got != `"etcd"` {
		t.Errorf("task user = %s, want \"etcd\"", got)
	}
}

// Members in Docker: driver "docker" got the binary's path as its image
// (image = "/usr/local/bin/etcd-nomad"), no network mode and a port
// mapping nothing agreed with. The job now runs the definition's image
// (or -image) with host networking, so that the addresses a member
// advertises (NOMAD_IP_peer and the group's ports) are the ones it
// listens on; no port mapping; the data, the task API socket and the
// definition where raw_exec has them (the alloc, secrets and task
// directories Nomad mounts into the container); the same kill_signal and
// kill_timeout; -binary is refused, and so is -image with another driver.
func TestRenderedDockerTask(t *testing.T) {
	j, err := renderWith(t, "  nomad {\n    driver = \"docker\"\n    image  = \"registry.example.com/etcd-nomad:1.2.3\"\n    kill_timeout = \"25s\"\n  }", Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := in(task, "config")
	for k, want := range map[string]string{
		"image":        `"registry.example.com/etcd-nomad:1.2.3"`,
		"network_mode": `"host"`,
		"args":         `["member", "-config", "${NOMAD_TASK_DIR}/cluster.hcl"]`,
		"ports":        "",
		"command":      "",
	} {
		if got := j.attr(k, cfg...); got != want {
			t.Errorf("config { %s = %s }, want %q", k, got, want)
		}
	}
	for k, want := range map[string]string{"driver": `"docker"`, "kill_signal": `"SIGTERM"`, "kill_timeout": `"25s"`} {
		if got := j.attr(k, task...); got != want {
			t.Errorf("task { %s = %s }, want %s", k, got, want)
		}
	}
	if got := j.attr("NOMAD_ADDR", env...); got != `"${NOMAD_UNIX_ADDR}"` {
		t.Errorf("NOMAD_ADDR = %s, want the task API socket", got)
	}
	if got := j.attr("sticky", in(group, "ephemeral_disk")...); got != "true" {
		t.Errorf("ephemeral_disk { sticky = %s }: the data must follow the allocation as under raw_exec", got)
	}
	cl, _, diags := config.Load("db.hcl", []byte("cluster \"db\" {\n  provider \"nomad\" {}\n  coordination \"consul\" {}\n  nomad {\n    driver = \"docker\"\n  }\n}"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if cl.DataDir != config.NomadDataDir {
		t.Errorf("data_dir %q, want raw_exec's %q", cl.DataDir, config.NomadDataDir)
	}
	spec, err := Render(cl, Options{Image: "etcd-nomad:e2e"})
	if err != nil || !strings.Contains(spec, `image        = "etcd-nomad:e2e"`) {
		t.Errorf("-image: %v\n%s", err, spec)
	}
	for _, c := range []struct {
		o    Options
		says string
	}{
		{Options{}, "driver \"docker\" and no image"},
		{Options{Binary: "/usr/local/bin/etcd-nomad"}, "-binary names a path"},
		{Options{Image: "/usr/local/bin/etcd-nomad"}, "is a path"},
	} {
		if _, err := Render(cl, c.o); err == nil || !strings.Contains(err.Error(), "db.hcl:4: nomad: ") || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v, want an error at db.hcl:4 saying %q", c.o, err, c.says)
		}
	}
	if _, err := renderWith(t, "  nomad {\n    binary = \"/opt/etcd-nomad\"\n  }", Options{Image: "etcd-nomad:1.2.3"}); err == nil || !strings.Contains(err.Error(), "-image is for driver \"docker\"") {
		t.Errorf("-image with raw_exec: %v", err)
	}
}

// The job template (the pack's) writes the variable's keys and the KEK's
// environment variable as text: they must be the ones the CLI stores
// (TokenKey, CAKEKKey at TokenVariable) and the member reads
// (certs.KEKEnv).
func TestSecretsTemplateReadsWhatJobRunStores(t *testing.T) {
	j := render(t, `nomad {
    job = "kv"
  }`)
	path := TokenVariable("kv")
	want := fmt.Sprintf(`{{ range nomadVarList %q }}{{ if eq .Path %q }}{{ with nomadVar .Path }}{{ range $k, $v := . }}`+
		`{{ if eq $k %q }}CONSUL_HTTP_TOKEN={{ $v }}
{{ end }}{{ if eq $k %q }}%s={{ $v }}
{{ end }}{{ end }}{{ end }}{{ end }}{{ end }}`, path, path, TokenKey, CAKEKKey, certs.KEKEnv)
	if !strings.Contains(string(j.src), "data        = <<EOT\n"+want+"\nEOT\n") {
		t.Errorf("the member.env template does not read %s's keys %s and %s into CONSUL_HTTP_TOKEN and %s:\n%s", path, TokenKey, CAKEKKey, certs.KEKEnv, j.src)
	}
}
