[[- /* The job, written once: nomad-pack renders it with the pack's
       variables and _helpers.tpl, and 'etcd-nomad job render' renders
       the same text with the values of a cluster definition instead
       (jobs.Render; pack.Job gives each "etcd.*" template the value the
       definition gives it). A setting is var "name"; what is derived
       from settings is template "etcd.name". */ -]]
[[ template "etcd.header" . ]]
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
    healthy_deadline  = "[[ template "etcd.healthy_deadline" . ]]"
    progress_deadline = "[[ template "etcd.progress_deadline" . ]]"
    auto_revert       = true
  }

  group "[[ var "group" . ]]" {
    count = [[ var "size" . ]]
[[ if var "distinct_hosts" . ]]
    # One member per Nomad client: a host's failure, drain or reboot costs
    # one member, never the quorum (nomad { distinct_hosts }).
    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }
[[ else ]]
    # distinct_hosts = false: members may share a Nomad client (a demo or
    # test on one host); that host's failure costs the quorum.
[[ end ]]
    # A node drain moves one member at a time, and the next only once the
    # replacement passes its Consul check (a caught-up voter of a cluster
    # with quorum): a drained member hands leadership away and leaves, its
    # replacement joins as a learner elsewhere, given as long to pass its
    # check as a rolling update gives it (jobs.JoinDeadline).
    migrate {
      max_parallel     = 1
      health_check     = "checks"
      min_healthy_time = "3s"
      healthy_deadline = "[[ template "etcd.healthy_deadline" . ]]"
    }

    # On stop, the Consul service goes first and SIGTERM follows: clients
    # stop picking this member before it leaves (jobs.ShutdownDelay).
    shutdown_delay = "[[ template "etcd.shutdown_delay" . ]]"

    network {
      port "client" {}
[[- if var "peer_port" . ]]
      # Static (nomad { peer_port }): the peer URL stays the same across
      # stops, so members that all stopped find each other again.
      port "peer" {
        static = [[ var "peer_port" . ]]
      }
[[- else ]]
      port "peer" {}
[[- end ]]
      port "status" {}
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
      lost_after = "[[ template "etcd.lost_after" . ]]"
      replace    = true
      reconcile  = "keep_original"
    }
[[ if var "host_volume" . ]]
    volume "data" {
      type   = "host"
      source = "[[ var "host_volume" . ]]"
    }
[[ else ]]
    # Data stays with the allocation and follows it to its replacement.
    # Twice quota_backend_bytes plus 1 GiB, in MiB (jobs.EphemeralDiskMB).
    ephemeral_disk {
      sticky  = true
      migrate = true
      size    = [[ template "etcd.disk_mb" . ]]
    }
[[ end ]]
    service {
      name     = "[[ var "cluster_name" . ]]"
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
[[- if var "user" . ]]
      user         = "[[ var "user" . ]]"
[[- end ]]
      kill_timeout = "[[ var "kill_timeout" . ]]"
[[ if eq (var "driver" .) "docker" ]]
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
        image        = "[[ var "image" . ]]"
        network_mode = "host"
        args         = ["member", "-config", "${NOMAD_TASK_DIR}/cluster.hcl"]
      }
[[ else ]]
      config {
        command = "[[ template "etcd.binary" . ]]"
        args    = ["member", "-config", "${NOMAD_TASK_DIR}/cluster.hcl"]
      }
[[ end ]]
[[- if var "artifact_source" . ]]
      # The release, unpacked into the task directory and checked against
      # its checksum (Nomad refuses a mismatch). A new release is a change
      # of this job: Nomad rolls it out one member at a time.
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

      # Nomad: the client's task API socket, which needs no address, no
      # TLS settings and no agent port; NOMAD_UNIX_ADDR ("unix://...") is
      # set because the identity below is in the environment. Consul: the
      # definition's nomad { consul { } }, all six set so that nothing is
      # inherited from the client agent's environment.
      env {
        NOMAD_ADDR             = "${NOMAD_UNIX_ADDR}"
        CONSUL_HTTP_ADDR       = "[[ var "consul_address" . ]]"
        CONSUL_HTTP_SSL        = "[[ template "etcd.consul_tls" . ]]"
        CONSUL_CACERT          = "[[ var "consul_ca_file" . ]]"
        CONSUL_TLS_SERVER_NAME = "[[ var "consul_tls_server_name" . ]]"
        CONSUL_CLIENT_CERT     = "[[ var "consul_cert_file" . ]]"
        CONSUL_CLIENT_KEY      = "[[ var "consul_key_file" . ]]"
      }

      # The member reads its job's allocations with its workload identity
      # (NOMAD_TOKEN), which the task API requires even without ACLs; under
      # Nomad ACLs the job needs a policy granting read-job ('etcd-nomad job
      # run' attaches one).
      identity {
        env = true
      }

      # Under Consul ACLs the member's CONSUL_HTTP_TOKEN comes from the
      # Nomad variable [[ template "etcd.variable_path" . ]] (key consul_token), never from
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
{{ range nomadVarList "[[ template "etcd.variable_path" . ]]" }}{{ if eq .Path "[[ template "etcd.variable_path" . ]]" }}{{ with nomadVar .Path }}{{ range $k, $v := . }}{{ if eq $k "consul_token" }}CONSUL_HTTP_TOKEN={{ $v }}
{{ end }}{{ if eq $k "ca_kek" }}ETCD_NOMAD_CA_KEK={{ $v }}
{{ end }}{{ end }}{{ end }}{{ end }}{{ end }}
EOT
      }

      # The cluster definition, as validated by etcd-nomad.
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
