[[- /* healthy_deadline in minutes: 3m for a join's fixed costs plus the
       backend quota at 20 MiB/s, rounded up to the minute; the progress
       deadline 5m more, at least 10m (jobs.JoinDeadline and
       ProgressDeadline). The sticky disk: twice the quota plus 1 GiB, in
       MiB (jobs.EphemeralDiskMB). */ -]]
[[- $quota := var "quota_backend_bytes" . -]]
[[- $rate := 20971520 -]]
[[- $join := div (add (mul 180 $rate) $quota (sub (mul 60 $rate) 1)) (mul 60 $rate) -]]
[[- $disk := div (add (mul 2 $quota) 1073741824 1048575) 1048576 -]]
# Rendered by nomad-pack from the etcd pack: the job 'etcd-nomad job render'
# renders for the same cluster definition. Submit with: nomad-pack run etcd
job "[[ template "etcd.job_name" . ]]" {
  datacenters = [[ var "datacenters" . | toStringList ]]
[[- if var "namespace" . ]]
  namespace   = "[[ var "namespace" . ]]"
[[- end ]]
[[- if var "region" . ]]
  region      = "[[ var "region" . ]]"
[[- end ]]
  type        = "service"

  meta {
    etcd-nomad-cluster = "[[ var "cluster_name" . ]]"
  }

  # One member at a time, and only once the previous one passes its Consul
  # check: a started, caught-up voting member of a cluster with quorum.
  update {
    max_parallel      = 1
    health_check      = "checks"
    min_healthy_time  = "3s"
    healthy_deadline  = "[[ $join ]]m"
    progress_deadline = "[[ max 10 (add $join 5) ]]m"
    auto_revert       = true
  }

  group "[[ var "group" . ]]" {
    count = [[ var "size" . ]]
[[- if var "distinct_hosts" . ]]

    # One member per Nomad client: a host's failure, drain or reboot costs
    # one member, never the quorum.
    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }
[[- else ]]

    # distinct_hosts = false: members may share a Nomad client (a demo or
    # test on one host); that host's failure costs the quorum.
[[- end ]]

    # A node drain moves one member at a time, and the next only once the
    # replacement passes its Consul check.
    migrate {
      max_parallel     = 1
      health_check     = "checks"
      min_healthy_time = "3s"
      healthy_deadline = "[[ $join ]]m"
    }

    # On stop, the Consul service goes first and SIGTERM follows: clients
    # stop picking this member before it leaves.
    shutdown_delay = "5s"

    network {
      port "client" {}
      port "peer" {}
      port "status" {}
    }

    # A crashed member restarts in place, where its data is; one that
    # keeps crashing fails its allocation, and reschedule places it again.
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
      lost_after = "2m"
      replace    = true
      reconcile  = "keep_original"
    }
[[- if var "host_volume" . ]]

    volume "data" {
      type   = "host"
      source = "[[ var "host_volume" . ]]"
    }
[[- else ]]

    # Data stays with the allocation and follows it to its replacement.
    ephemeral_disk {
      sticky  = true
      migrate = true
      size    = [[ $disk ]]
    }
[[- end ]]

    service {
      name     = "[[ var "cluster_name" . ]]"
      provider = "consul"
      port     = "client"
      tags     = ["etcd", "etcd-nomad"]
      meta {
        member_alloc = "${NOMAD_ALLOC_ID}"
        status_port  = "${NOMAD_PORT_status}"
      }

      check {
        name            = "etcd member health"
        type            = "http"
        protocol        = "[[ if eq (var "tls_mode" .) "off" ]]http[[ else ]]https[[ end ]]"
        tls_skip_verify = true
        port            = "status"
        path            = "/health"
        interval        = "2s"
        timeout         = "2s"
      }
    }

    task "etcd" {
      driver       = "[[ var "driver" . ]]"
      kill_signal  = "SIGTERM"
      kill_timeout = "[[ var "kill_timeout" . ]]"

      config {
[[- if eq (var "driver" .) "docker" ]]
        # Host networking: the addresses a member advertises are the ones
        # it listens on (see etcd-nomad's README: Docker).
        image        = "[[ var "image" . ]]"
        network_mode = "host"
        args         = ["member", "-config", "${NOMAD_TASK_DIR}/cluster.hcl"]
[[- else ]]
        command = "[[ template "etcd.binary" . ]]"
        args    = ["member", "-config", "${NOMAD_TASK_DIR}/cluster.hcl"]
[[- end ]]
      }
[[- if var "artifact_source" . ]]

      # The release, unpacked into the task directory and checked against
      # its checksum.
      artifact {
        source      = "[[ var "artifact_source" . ]]"
        destination = "local/"
        options {
          checksum = "[[ var "artifact_checksum" . ]]"
        }
      }
[[- end ]]
[[- if var "host_volume" . ]]

      volume_mount {
        volume      = "data"
        destination = "/var/lib/etcd-nomad"
      }
[[- end ]]

      # Nomad: the client's task API socket with the task's workload
      # identity. Consul: the agent the definition names, all six set so
      # that nothing is inherited from the client agent's environment.
      env {
        NOMAD_ADDR             = "${NOMAD_UNIX_ADDR}"
        CONSUL_HTTP_ADDR       = "[[ var "consul_address" . ]]"
        CONSUL_HTTP_SSL        = "[[ template "etcd.consul_tls" . ]]"
        CONSUL_CACERT          = "[[ var "consul_ca_file" . ]]"
        CONSUL_TLS_SERVER_NAME = "[[ var "consul_tls_server_name" . ]]"
        CONSUL_CLIENT_CERT     = "[[ var "consul_cert_file" . ]]"
        CONSUL_CLIENT_KEY      = "[[ var "consul_key_file" . ]]"
      }

      identity {
        env = true
      }

      # CONSUL_HTTP_TOKEN and the key that seals the cluster CA come from
      # the job's Nomad variable, never from this file.
      template {
        destination = "secrets/member.env"
        env         = true
        change_mode = "noop"
        data        = <<EOT
{{ range nomadVarList "[[ template "etcd.variable_path" . ]]" }}{{ if eq .Path "[[ template "etcd.variable_path" . ]]" }}{{ with nomadVar .Path }}{{ range $k, $v := . }}{{ if eq $k "consul_token" }}CONSUL_HTTP_TOKEN={{ $v }}
{{ end }}{{ if eq $k "ca_kek" }}ETCD_NOMAD_CA_KEK={{ $v }}
{{ end }}{{ end }}{{ end }}{{ end }}{{ end }}
EOT
      }

      # The cluster definition.
      template {
        destination = "local/cluster.hcl"
        change_mode = "noop"
        data        = <<EOT
[[ template "etcd.definition" . ]]
EOT
      }

      resources {
        cpu    = [[ var "cpu" . ]]
        memory = [[ var "memory_mb" . ]]
      }
    }
  }
}
