// Package jobs turns a cluster definition into the Nomad job that runs it
// (HCL2 jobspec text, accepted by `nomad job validate` and `nomad job run`)
// and registers it through the API, following the deployment. It holds no
// state and never touches etcd.
package jobs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/provider/nomad"
)

// Options complete what the definition does not say. Nothing of the
// renderer's environment reaches the job: the members find Nomad through
// their client's task API socket and Consul at the definition's
// nomad { consul { } } (the client's local agent by default).
type Options struct {
	// Binary is the etcd-nomad path on the clients; overrides the
	// definition's nomad.binary. Default: this executable.
	Binary string
}

type view struct {
	C          *config.Cluster
	Binary     string
	Group      string
	Definition string
	Consul     config.NomadConsul
	Ports      []string
	KillSecs   int
	// DiskMB is the sticky ephemeral disk's size (EphemeralDiskMB).
	DiskMB int64
	// ShutdownDelay is the group's shutdown_delay (ShutdownDelay).
	ShutdownDelay string
	// LostAfter is config.NomadLostAfter, which validate compares the
	// provider's stale_after with.
	LostAfter string
	// TokenEnv is the consul-template that turns the job's Nomad variable
	// into CONSUL_HTTP_TOKEN (see TokenVariable).
	TokenEnv string
}

// Where the members find their Consul token: the Nomad variable
// TokenVariable(job) (readable by the job's own tasks through their
// workload identity), key TokenKey. The rendered job never holds a token.
const TokenKey = "consul_token"

// TokenVariable is the path of the job's Nomad variable.
func TokenVariable(job string) string { return "nomad/jobs/" + job }

func tokenTemplate(job string) string {
	path := TokenVariable(job)
	return fmt.Sprintf(`{{ range nomadVarList %q }}{{ if eq .Path %q }}{{ with nomadVar .Path }}{{ range $k, $v := . }}{{ if eq $k %q }}CONSUL_HTTP_TOKEN={{ $v }}{{ end }}{{ end }}{{ end }}{{ end }}{{ end }}`, path, path, TokenKey)
}

// Render returns the jobspec for cl.
func Render(cl *config.Cluster, o Options) (string, error) {
	if cl.Provider.Kind != config.ProviderNomad {
		return "", fmt.Errorf("%s: job render needs provider \"nomad\", the definition uses %q", cl.File, cl.Provider.Kind)
	}
	if cl.Coordination.Kind != config.CoordConsul {
		return "", fmt.Errorf("%s: members on Nomad coordinate through Consul: use coordination \"consul\", not %q", cl.File, cl.Coordination.Kind)
	}
	bin := firstOf(o.Binary, cl.Nomad.Binary)
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("find the etcd-nomad binary: %w", err)
		}
		bin = exe
	}
	if cl.Nomad.Driver != "docker" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			return "", err
		}
		bin = abs
	}
	v := view{
		C:             cl,
		Binary:        bin,
		Group:         cl.Provider.Nomad.Group,
		Definition:    escapeHeredoc(string(cl.Source)),
		Consul:        cl.Nomad.Consul,
		Ports:         []string{nomad.PortClient, nomad.PortPeer, nomad.PortStatus},
		KillSecs:      int(cl.Nomad.KillTimeout.Seconds()),
		DiskMB:        EphemeralDiskMB(cl.Etcd.QuotaBackendBytes),
		ShutdownDelay: ShutdownDelay.String(),
		LostAfter:     config.NomadLostAfter.String(),
		TokenEnv:      tokenTemplate(cl.Nomad.Job),
	}
	var b bytes.Buffer
	if err := jobTemplate.Execute(&b, v); err != nil {
		return "", fmt.Errorf("render job: %w", err)
	}
	return b.String(), nil
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
    healthy_deadline  = "3m"
    progress_deadline = "10m"
    auto_revert       = true
  }

  group "{{.Group}}" {
    count = {{.C.Size}}

    # On stop, the Consul service goes first and SIGTERM follows: clients
    # stop picking this member before it leaves (jobs.ShutdownDelay).
    shutdown_delay = "{{.ShutdownDelay}}"

    network {
{{- range .Ports}}
      port "{{.}}" {}
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
      kill_timeout = "{{.KillSecs}}s"
{{if eq .C.Nomad.Driver "docker"}}
      config {
        image   = "{{.Binary}}"
        args    = ["member", "-config", "${NOMAD_TASK_DIR}/cluster.hcl"]
        ports   = ["client", "peer", "status"]
      }
{{else}}
      config {
        command = "{{.Binary}}"
        args    = ["member", "-config", "${NOMAD_TASK_DIR}/cluster.hcl"]
      }
{{end}}
{{- if .C.Nomad.HostVolume}}
      volume_mount {
        volume      = "data"
        destination = "/var/lib/etcd-nomad"
      }
{{- end}}

      # Nomad: the client's task API socket, which needs no address, no
      # TLS settings and no agent port; NOMAD_UNIX_ADDR ("unix://...") is
      # set because the identity below is in the environment. Consul: the
      # definition's nomad { consul { } }, all four set so that nothing is
      # inherited from the client agent's environment.
      env {
        NOMAD_ADDR             = "${NOMAD_UNIX_ADDR}"
        CONSUL_HTTP_ADDR       = "{{.Consul.Address}}"
        CONSUL_HTTP_SSL        = "{{.Consul.TLS}}"
        CONSUL_CACERT          = "{{.Consul.CAFile}}"
        CONSUL_TLS_SERVER_NAME = "{{.Consul.TLSServerName}}"
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
      # this file. A changed token is used from the member's next restart.
      template {
        destination = "secrets/consul-token.env"
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
