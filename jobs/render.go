// Package jobs turns a cluster definition into the Nomad job that runs it
// (HCL2 jobspec text, accepted by `nomad job validate` and `nomad job run`)
// and registers it through the API, following the deployment. It holds no
// state and never touches etcd.
package jobs

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/nomad"
)

// Options complete what the definition does not say. Nothing of the
// renderer's environment reaches the job: the members find Nomad through
// their client's task API socket and Consul at the definition's
// nomad { consul { } } (the client's local agent by default).
type Options struct {
	// Binary is the etcd-nomad path on the clients; overrides the
	// definition's nomad.binary and nomad.artifact. The definition or
	// this must name what the clients run: Render never falls back to
	// its own path.
	Binary string
	// Image is the container image of driver "docker"; overrides the
	// definition's nomad.image.
	Image string
}

type view struct {
	C      *config.Cluster
	Binary string
	// Image is what driver "docker" runs, instead of Binary.
	Image string
	// Artifact, when set, is downloaded into the task directory, and
	// Binary is the path inside it.
	Artifact *config.NomadArtifact
	// HealthyDeadline and ProgressDeadline are the update block's
	// (JoinDeadline).
	HealthyDeadline, ProgressDeadline string
	Group                             string
	Definition                        string
	Consul                            config.NomadConsul
	Ports                             []portView
	KillSecs                          int
	// DiskMB is the sticky ephemeral disk's size (EphemeralDiskMB).
	DiskMB int64
	// ShutdownDelay is the group's shutdown_delay (ShutdownDelay).
	ShutdownDelay string
	// LostAfter is config.NomadLostAfter, which validate compares the
	// provider's stale_after with.
	LostAfter string
	// TokenEnv is the consul-template that turns the job's Nomad variable
	// into CONSUL_HTTP_TOKEN and ETCD_NOMAD_CA_KEK (see TokenVariable).
	TokenEnv string
}

// Where the members find their secrets: the Nomad variable
// TokenVariable(job) (readable by the job's own tasks through their
// workload identity), key TokenKey for CONSUL_HTTP_TOKEN and key CAKEKKey
// for the cluster CA's key encryption key (certs.KEKEnv). The rendered job
// never holds a secret.
const (
	TokenKey = "consul_token"
	CAKEKKey = "ca_kek"
)

// TokenVariable is the path of the job's Nomad variable.
func TokenVariable(job string) string { return "nomad/jobs/" + job }

// secretsTemplate renders the job's variable into the task's environment.
func secretsTemplate(job string) string {
	path := TokenVariable(job)
	return fmt.Sprintf(`{{ range nomadVarList %q }}{{ if eq .Path %q }}{{ with nomadVar .Path }}{{ range $k, $v := . }}`+
		`{{ if eq $k %q }}CONSUL_HTTP_TOKEN={{ $v }}
{{ end }}{{ if eq $k %q }}%s={{ $v }}
{{ end }}{{ end }}{{ end }}{{ end }}{{ end }}`, path, path, TokenKey, CAKEKKey, certs.KEKEnv)
}

// Render returns the jobspec for cl.
func Render(cl *config.Cluster, o Options) (string, error) {
	if cl.Provider.Kind != config.ProviderNomad {
		return "", fmt.Errorf("%s: job render needs provider \"nomad\", the definition uses %q", cl.File, cl.Provider.Kind)
	}
	if cl.Coordination.Kind != config.CoordConsul {
		return "", fmt.Errorf("%s: members on Nomad coordinate through Consul: use coordination \"consul\", not %q", cl.File, cl.Coordination.Kind)
	}
	bin, art, img, err := whatRuns(cl, o)
	if err != nil {
		return "", err
	}
	healthy := JoinDeadline(cl.Etcd.QuotaBackendBytes)
	v := view{
		C:                cl,
		Binary:           bin,
		Image:            img,
		Artifact:         art,
		HealthyDeadline:  minutes(healthy),
		ProgressDeadline: minutes(ProgressDeadline(healthy)),
		Group:            cl.Provider.Nomad.Group,
		Definition:       escapeHeredoc(string(cl.Source)),
		Consul:           cl.Nomad.Consul,
		Ports:            []portView{{Label: nomad.PortClient}, {Label: nomad.PortPeer, Static: cl.Nomad.PeerPort}, {Label: nomad.PortStatus}},
		KillSecs:         int(cl.Nomad.KillTimeout.Seconds()),
		DiskMB:           EphemeralDiskMB(cl.Etcd.QuotaBackendBytes),
		ShutdownDelay:    ShutdownDelay.String(),
		LostAfter:        config.NomadLostAfter.String(),
		TokenEnv:         secretsTemplate(cl.Nomad.Job),
	}
	var b bytes.Buffer
	if err := jobTemplate.Execute(&b, v); err != nil {
		return "", fmt.Errorf("render job: %w", err)
	}
	return b.String(), nil
}

// whatRuns is what the clients run: the binary's path (absolute, or in
// the task directory when an artifact brings it), or, with driver docker,
// the image.
func whatRuns(cl *config.Cluster, o Options) (bin string, art *config.NomadArtifact, img string, err error) {
	where := firstOf(cl.Nomad.Where, cl.File)
	if cl.Nomad.Driver == "docker" {
		img = firstOf(o.Image, cl.Nomad.Image)
		switch {
		case o.Binary != "":
			return "", nil, "", fmt.Errorf("%s: nomad: driver \"docker\" runs an image: -binary names a path on the clients, for drivers \"raw_exec\" and \"exec\"; pass -image REF or set nomad { image }", where)
		case img == "":
			return "", nil, "", fmt.Errorf("%s: nomad: driver \"docker\" and no image: set nomad { image = \"registry.example.com/etcd-nomad:<version>\" } ('make image' builds it) or pass -image REF", where)
		}
		if err := config.CheckImage(img); err != nil {
			return "", nil, "", fmt.Errorf("%s: nomad: %w", where, err)
		}
		return "", nil, img, nil
	}
	if o.Image != "" {
		return "", nil, "", fmt.Errorf("%s: nomad: -image is for driver \"docker\"; this job uses driver %q, which runs a binary (-binary PATH)", where, cl.Nomad.Driver)
	}
	bin = firstOf(o.Binary, cl.Nomad.Binary)
	art = cl.Nomad.Artifact
	switch {
	case o.Binary != "":
		art = nil // the caller's binary wins (tests, the demo)
	case art != nil:
		return "${NOMAD_TASK_DIR}/" + art.Path, art, "", nil
	case bin == "":
		return "", nil, "", fmt.Errorf("%s: nomad: neither binary nor artifact is set: name what the Nomad clients run, nomad { artifact { source = \"<release archive URL>\", checksum = \"sha256:<hex>\" } } or nomad { binary = \"/usr/local/bin/etcd-nomad\" }, or pass -binary PATH (a dev or demo cluster)", where)
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", nil, "", err
	}
	return abs, nil, "", nil
}

// portView is one port of the group's network: Static when not 0.
type portView struct {
	Label  string
	Static int
}

// EphemeralDiskMB is the sticky ephemeral disk a member needs for a
// backend quota of quota bytes: twice the quota, since a second copy of the
// database is written while a member receives a snapshot from the leader,
// spools a scheduled snapshot, or defragments; plus 1 GiB for the WAL (etcd
// keeps 5 segments of 64 MiB), its .snap files and the task's logs. Nomad
// counts MB (MiB); rounded up.
func EphemeralDiskMB(quota int64) int64 {
	const mib = 1 << 20
	return (2*quota + 1<<30 + mib - 1) / mib
}

// JoinDeadline is the update block's healthy_deadline (and the migrate
// block's) for a backend quota of quota bytes: how long a new allocation
// may take to pass its check. A member placed without its data (a new
// node, a lost disk) joins as a learner and receives the whole database
// from the leader before it is promoted: joinBase for the start, the
// learner add (etcd's 5 s strict reconfiguration) and the catch-up, plus
// the quota at joinThroughput, rounded up to the minute. 3m, the old
// fixed value, left 2 GiB about a minute: a real join missed it, and
// auto_revert rolled the job back.
func JoinDeadline(quota int64) time.Duration {
	d := joinBase + time.Duration(float64(quota)/joinThroughput*float64(time.Second))
	return (d + time.Minute - 1).Truncate(time.Minute)
}

// ProgressDeadline is the update block's progress_deadline: Nomad wants it
// above healthy_deadline; the margin leaves room to place the allocation
// (and download its artifact) before the member's own deadline starts.
func ProgressDeadline(healthy time.Duration) time.Duration {
	return max(10*time.Minute, healthy+5*time.Minute)
}

const (
	// joinBase covers a join's fixed costs: process and etcd start, the
	// learner add under the lock, the catch-up and promotion, and the
	// check's interval and min_healthy_time.
	joinBase = 3 * time.Minute
	// joinThroughput is a conservative rate for the leader's snapshot
	// to a new learner, in bytes per second (20 MiB/s: a busy 1 Gbit
	// network and disks shared with the serving members).
	joinThroughput = 20 << 20
)

// ShutdownDelay is the group's shutdown_delay: Nomad deregisters the
// member's Consul service, waits this long, then sends SIGTERM, so that
// clients resolving the service stop choosing the member before it hands
// leadership away and leaves. It comes before kill_timeout, not out of it.
const ShutdownDelay = 5 * time.Second

// escapeHeredoc keeps HCL2 and consul-template from interpolating the
// embedded definition.
func escapeHeredoc(s string) string {
	s = strings.ReplaceAll(s, "${", "$${")
	s = strings.ReplaceAll(s, "%{", "%%{")
	return s
}

// minutes formats a whole number of minutes as "5m".
func minutes(d time.Duration) string { return fmt.Sprintf("%dm", int(d/time.Minute)) }

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

var jobTemplate = template.Must(template.New("job").Funcs(template.FuncMap{"list": quoteList}).Parse(`# Rendered by etcd-nomad from {{.C.File}}. Submit with: nomad job run <this file>
job "{{.C.Nomad.Job}}" {
  datacenters = {{list .C.Nomad.Datacenters}}
{{- if .C.Nomad.Namespace}}
  namespace   = "{{.C.Nomad.Namespace}}"
{{- end}}
{{- if .C.Nomad.Region}}
  region      = "{{.C.Nomad.Region}}"
{{- end}}
  type        = "service"

  meta {
    etcd-nomad-cluster = "{{.C.Name}}"
  }

  # One member at a time, and only once the previous one passes its Consul
  # check: a started, caught-up voting member of a cluster with quorum.
  update {
    max_parallel      = 1
    health_check      = "checks"
    min_healthy_time  = "3s"
    healthy_deadline  = "{{.HealthyDeadline}}"
    progress_deadline = "{{.ProgressDeadline}}"
    auto_revert       = true
  }

  group "{{.Group}}" {
    count = {{.C.Size}}
{{if .C.Nomad.DistinctHosts}}
    # One member per Nomad client: a host's failure, drain or reboot costs
    # one member, never the quorum (nomad { distinct_hosts }).
    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }
{{else}}
    # distinct_hosts = false: members may share a Nomad client (a demo or
    # test on one host); that host's failure costs the quorum.
{{end}}
    # A node drain moves one member at a time, and the next only once the
    # replacement passes its Consul check (a caught-up voter of a cluster
    # with quorum): a drained member hands leadership away and leaves, its
    # replacement joins as a learner elsewhere, given as long to pass its
    # check as a rolling update gives it (jobs.JoinDeadline).
    migrate {
      max_parallel     = 1
      health_check     = "checks"
      min_healthy_time = "3s"
      healthy_deadline = "{{.HealthyDeadline}}"
    }

    # On stop, the Consul service goes first and SIGTERM follows: clients
    # stop picking this member before it leaves (jobs.ShutdownDelay).
    shutdown_delay = "{{.ShutdownDelay}}"

    network {
{{- range .Ports}}
{{- if .Static}}
      # Static (nomad { peer_port }): the peer URL stays the same across
      # stops, so members that all stopped find each other again.
      port "{{.Label}}" {
        static = {{.Static}}
      }
{{- else}}
      port "{{.Label}}" {}
{{- end}}
{{- end}}
    }

    # A crashed member restarts in place, where its data is; one that
    # keeps crashing (a broken node, a full disk) fails its allocation, and
    # reschedule places it again, elsewhere if it can: it rejoins as a
    # learner. A member that waits (no quorum, an operator's decision)
    # keeps running: only real exits count.
    restart {
      attempts = 3
      interval = "5m"
      delay    = "2s"
      mode     = "fail"
    }

    reschedule {
      delay          = "10s"
      delay_function = "exponential"
      max_delay      = "2m"
      unlimited      = true
    }

    # A member on a disconnected client may come back with its data: give
    # it time before it is replaced, and keep the original when it returns.
    disconnect {
      lost_after = "{{.LostAfter}}"
      replace    = true
      reconcile  = "keep_original"
    }
{{if .C.Nomad.HostVolume}}
    volume "data" {
      type   = "host"
      source = "{{.C.Nomad.HostVolume}}"
    }
{{else}}
    # Data stays with the allocation and follows it to its replacement.
    # Twice quota_backend_bytes plus 1 GiB, in MiB (jobs.EphemeralDiskMB).
    ephemeral_disk {
      sticky  = true
      migrate = true
      size    = {{.DiskMB}}
    }
{{end}}
    service {
      name     = "{{.C.Name}}"
      provider = "consul"
      port     = "client"
      tags     = ["etcd", "etcd-nomad"]
      meta {
        member_alloc = "${NOMAD_ALLOC_ID}"
        # Where 'etcd-nomad creds' finds the exchange (creds.StatusPortMeta).
        status_port  = "${NOMAD_PORT_status}"
      }

      check {
        name            = "etcd member health"
        type            = "http"
        protocol        = "{{if eq .C.TLS.Mode "off"}}http{{else}}https{{end}}"
        tls_skip_verify = true
        port            = "status"
        path            = "/health"
        interval        = "2s"
        timeout         = "2s"
      }
    }

    task "etcd" {
      driver       = "{{.C.Nomad.Driver}}"
      kill_signal  = "SIGTERM"
{{- if .C.Nomad.User}}
      user         = "{{.C.Nomad.User}}"
{{- end}}
      kill_timeout = "{{.KillSecs}}s"
{{if .Image}}
      # The image's entrypoint is etcd-nomad ('make image'). Host
      # networking, on purpose: a member advertises its peer and client
      # URLs at NOMAD_IP_peer and the group's ports, and the other members
      # dial exactly those; in the client's network namespace it listens
      # there itself, as under raw_exec. Under Docker's bridge it would
      # listen on the container's address, and every advertised URL would
      # rest on a port mapping agreeing with it. The data is where
      # raw_exec keeps it: data_dir ${NOMAD_ALLOC_DIR}/data is the
      # allocation's alloc/data on the client (or the host volume below),
      # mounted into the container, so the sticky disk follows the
      # allocation to its replacement the same way. The task API socket
      # and the job's secrets are in ${NOMAD_SECRETS_DIR}, mounted too.
      config {
        image        = "{{.Image}}"
        network_mode = "host"
        args         = ["member", "-config", "${NOMAD_TASK_DIR}/cluster.hcl"]
      }
{{else}}
      config {
        command = "{{.Binary}}"
        args    = ["member", "-config", "${NOMAD_TASK_DIR}/cluster.hcl"]
      }
{{end}}
{{- if .Artifact}}
      # The release, unpacked into the task directory and checked against
      # its checksum (Nomad refuses a mismatch). A new release is a change
      # of this job: Nomad rolls it out one member at a time.
      artifact {
        source      = "{{.Artifact.Source}}"
        destination = "local/"
        options {
          checksum = "{{.Artifact.Checksum}}"
        }
      }
{{- end}}
{{- if .C.Nomad.HostVolume}}
      volume_mount {
        volume      = "data"
        destination = "/var/lib/etcd-nomad"
      }
{{- end}}

      # Nomad: the client's task API socket, which needs no address, no
      # TLS settings and no agent port; NOMAD_UNIX_ADDR ("unix://...") is
      # set because the identity below is in the environment. Consul: the
      # definition's nomad { consul { } }, all six set so that nothing is
      # inherited from the client agent's environment.
      env {
        NOMAD_ADDR             = "${NOMAD_UNIX_ADDR}"
        CONSUL_HTTP_ADDR       = "{{.Consul.Address}}"
        CONSUL_HTTP_SSL        = "{{.Consul.TLS}}"
        CONSUL_CACERT          = "{{.Consul.CAFile}}"
        CONSUL_TLS_SERVER_NAME = "{{.Consul.TLSServerName}}"
        CONSUL_CLIENT_CERT     = "{{.Consul.CertFile}}"
        CONSUL_CLIENT_KEY      = "{{.Consul.KeyFile}}"
      }

      # The member reads its job's allocations with its workload identity
      # (NOMAD_TOKEN), which the task API requires even without ACLs; under
      # Nomad ACLs the job needs a policy granting read-job ('etcd-nomad job
      # run' attaches one).
      identity {
        env = true
      }

      # Under Consul ACLs the member's CONSUL_HTTP_TOKEN comes from the
      # Nomad variable {{.C.Nomad.Job | printf "nomad/jobs/%s"}} (key consul_token), never from
      # this file, and so does the key that seals the cluster CA's key in
      # Consul (key ca_kek, ETCD_NOMAD_CA_KEK). Where it is missing, the
      # first member creates it there (check-and-set: one key) and every
      # member reads it; under Nomad ACLs, whose workload identities may
      # only read, create it first ('etcd-nomad job run' does). A changed
      # token is used from the member's next restart.
      template {
        destination = "secrets/member.env"
        env         = true
        change_mode = "noop"
        data        = <<EOT
{{.TokenEnv}}
EOT
      }

      # The cluster definition, as validated by etcd-nomad.
      template {
        destination = "local/cluster.hcl"
        change_mode = "noop"
        data        = <<EOT
{{.Definition}}
EOT
      }

      resources {
        cpu    = {{.C.Nomad.CPU}}
        memory = {{.C.Nomad.MemoryMB}}
      }
    }
  }
}
`))
