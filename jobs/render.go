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

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/provider/nomad"
)

// Options complete what the definition does not say.
type Options struct {
	// Binary is the etcd-nomad path on the clients; overrides the
	// definition's nomad.binary. Default: this executable.
	Binary string
	// ConsulAddr and NomadAddr are passed to the members (CONSUL_HTTP_ADDR,
	// NOMAD_ADDR). Default: this process's environment.
	ConsulAddr string
	NomadAddr  string
}

type view struct {
	C          *config.Cluster
	Binary     string
	Group      string
	Definition string
	ConsulAddr string
	NomadAddr  string
	Ports      []string
	KillSecs   int
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
		C:          cl,
		Binary:     bin,
		Group:      cl.Provider.Nomad.Group,
		Definition: escapeHeredoc(string(cl.Source)),
		ConsulAddr: firstOf(o.ConsulAddr, os.Getenv("CONSUL_HTTP_ADDR"), "127.0.0.1:8500"),
		NomadAddr:  firstOf(o.NomadAddr, os.Getenv("NOMAD_ADDR"), "http://127.0.0.1:4646"),
		Ports:      []string{nomad.PortClient, nomad.PortPeer, nomad.PortStatus},
		KillSecs:   int(cl.Nomad.KillTimeout.Seconds()),
		LostAfter:  config.NomadLostAfter.String(),
		TokenEnv:   tokenTemplate(cl.Nomad.Job),
	}
	var b bytes.Buffer
	if err := jobTemplate.Execute(&b, v); err != nil {
		return "", fmt.Errorf("render job: %w", err)
	}
	return b.String(), nil
}

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

    network {
{{- range .Ports}}
      port "{{.}}" {}
{{- end}}
    }

    # A crashed member restarts in place, where its data is.
    restart {
      attempts = 10
      interval = "5m"
      delay    = "2s"
      mode     = "delay"
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
    ephemeral_disk {
      sticky  = true
      migrate = true
      size    = 1024
    }
{{end}}
    service {
      name     = "{{.C.Name}}"
      provider = "consul"
      port     = "client"
      tags     = ["etcd", "etcd-nomad"]
      meta {
        member_alloc = "${NOMAD_ALLOC_ID}"
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

      env {
        CONSUL_HTTP_ADDR = "{{.ConsulAddr}}"
        NOMAD_ADDR       = "{{.NomadAddr}}"
      }

      # Under Nomad ACLs the member reads its job's allocations with its
      # workload identity (NOMAD_TOKEN); the job needs a policy granting
      # read-job ('etcd-nomad job run' attaches one).
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
