# Rendered by etcd-nomad from examples/nomad-artifact.hcl. Submit with: nomad job run <this file>
job "etcd" {
  datacenters = ["dc1"]
  type        = "service"

  meta {
    etcd-nomad-cluster = "etcd"
  }

  # One member at a time, and only once the previous one passes its Consul
  # check: a started, caught-up voting member of a cluster with quorum.
  update {
    max_parallel      = 1
    health_check      = "checks"
    min_healthy_time  = "3s"
    healthy_deadline  = "5m"
    progress_deadline = "10m"
    auto_revert       = true
  }

  group "etcd" {
    count = 3

    # One member per Nomad client: a host's failure, drain or reboot costs
    # one member, never the quorum (nomad { distinct_hosts }).
    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

    # A node drain moves one member at a time, and the next only once the
    # replacement passes its Consul check (a caught-up voter of a cluster
    # with quorum): a drained member hands leadership away and leaves, its
    # replacement joins as a learner elsewhere, given as long to pass its
    # check as a rolling update gives it (jobs.JoinDeadline).
    migrate {
      max_parallel     = 1
      health_check     = "checks"
      min_healthy_time = "3s"
      healthy_deadline = "5m"
    }

    # On stop, the Consul service goes first and SIGTERM follows: clients
    # stop picking this member before it leaves (jobs.ShutdownDelay).
    shutdown_delay = "5s"

    network {
      port "client" {}
      port "peer" {}
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
      lost_after = "2m0s"
      replace    = true
      reconcile  = "keep_original"
    }

    # Data stays with the allocation and follows it to its replacement.
    # Twice quota_backend_bytes plus 1 GiB, in MiB (jobs.EphemeralDiskMB).
    ephemeral_disk {
      sticky  = true
      migrate = true
      size    = 5120
    }

    service {
      name     = "etcd"
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
        protocol        = "https"
        tls_skip_verify = true
        port            = "status"
        path            = "/health"
        interval        = "2s"
        timeout         = "2s"
      }
    }

    task "etcd" {
      driver       = "raw_exec"
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      config {
        command = "${NOMAD_TASK_DIR}/etcd-nomad"
        args    = ["member", "-config", "${NOMAD_TASK_DIR}/cluster.hcl"]
      }

      # The release, unpacked into the task directory and checked against
      # its checksum (Nomad refuses a mismatch). A new release is a change
      # of this job: Nomad rolls it out one member at a time.
      artifact {
        source      = "https://releases.example.com/etcd-nomad_0.1.0_linux_amd64.tar.gz"
        destination = "local/"
        options {
          checksum = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        }
      }

      # Nomad: the client's task API socket, which needs no address, no
      # TLS settings and no agent port; NOMAD_UNIX_ADDR ("unix://...") is
      # set because the identity below is in the environment. Consul: the
      # definition's nomad { consul { } }, all six set so that nothing is
      # inherited from the client agent's environment.
      env {
        NOMAD_ADDR             = "${NOMAD_UNIX_ADDR}"
        CONSUL_HTTP_ADDR       = "127.0.0.1:8500"
        CONSUL_HTTP_SSL        = "false"
        CONSUL_CACERT          = ""
        CONSUL_TLS_SERVER_NAME = ""
        CONSUL_CLIENT_CERT     = ""
        CONSUL_CLIENT_KEY      = ""
      }

      # The member reads its job's allocations with its workload identity
      # (NOMAD_TOKEN), which the task API requires even without ACLs; under
      # Nomad ACLs the job needs a policy granting read-job ('etcd-nomad job
      # run' attaches one).
      identity {
        env = true
      }

      # Under Consul ACLs the member's CONSUL_HTTP_TOKEN comes from the
      # Nomad variable nomad/jobs/etcd (key consul_token), never from
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
{{ range nomadVarList "nomad/jobs/etcd" }}{{ if eq .Path "nomad/jobs/etcd" }}{{ with nomadVar .Path }}{{ range $k, $v := . }}{{ if eq $k "consul_token" }}CONSUL_HTTP_TOKEN={{ $v }}
{{ end }}{{ if eq $k "ca_kek" }}ETCD_NOMAD_CA_KEK={{ $v }}
{{ end }}{{ end }}{{ end }}{{ end }}{{ end }}
EOT
      }

      # The cluster definition, as validated by etcd-nomad.
      template {
        destination = "local/cluster.hcl"
        change_mode = "noop"
        data        = <<EOT
# A three-member cluster as a Nomad job, coordinated through Consul:
#   etcd-nomad validate examples/nomad.hcl
#   etcd-nomad job run examples/nomad.hcl    # or: job render, then nomad job run
# Members and the CLI find Nomad and Consul through NOMAD_ADDR, NOMAD_TOKEN,
# CONSUL_HTTP_ADDR and CONSUL_HTTP_TOKEN (see docs/security.md).
cluster "etcd" {
  size = 3

  # Quorum lost this long (every instance answering, none healthy) is
  # recovered automatically; "0s" turns that off. Shorter than a restart
  # plus a few elections (16s with election_timeout = "1s") warns.
  recovery_grace = "5m"

  # Inside Nomad, data lives by default in the allocation's directory, on
  # its sticky ephemeral disk, which follows the allocation to its
  # replacement. To write that default yourself, double the "$": HCL reads
  # "$${" as an interpolation.
  # data_dir = "$$${NOMAD_ALLOC_DIR}/data"

  ports {
    client = 2379
    peer   = 2380
    status = 2381
  }

  tls {
    mode = "auto"
  }

  provider "nomad" {
    group = "etcd"
    # A member gone from the job's running allocations this long is removed
    # from etcd. Default and minimum without a warning: 2m, the job's
    # disconnect { lost_after }, so that a member on a client that lost
    # contact is not removed while Nomad may still bring it back.
    stale_after = "2m"
  }

  coordination "consul" {
    prefix      = "etcd-nomad"
    session_ttl = "15s"
  }

  snapshot {
    interval     = "30m"
    retain_count = 24
    retain_age   = "168h"
    store "s3" {
      bucket     = "etcd-backups"
      path_style = true
    }
  }

  # The rendered job. The driver defaults to "raw_exec" (enable it on the
  # clients: plugin "raw_exec" { config { enabled = true } }); "exec" runs
  # the member in a chroot of /bin, /etc, /lib*, /sbin and /usr.
  nomad {
    datacenters = ["dc1"]

    # What the clients run: a binary installed on every client, or instead
    # a release archive each allocation downloads and checks. With the
    # artifact, a new release is a change of the job, which Nomad rolls out
    # one member at a time, each waiting for the previous one's check:
    #   artifact {
    #     source   = "https://releases.example.com/etcd-nomad_0.1.0_linux_amd64.tar.gz"
    #     checksum = "sha256:<the archive's sha256sum>"
    #     path     = "etcd-nomad"   # the binary inside the archive
    #   }
    artifact {
      source   = "https://releases.example.com/etcd-nomad_0.1.0_linux_amd64.tar.gz"
      checksum = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
      path     = "etcd-nomad"
    }
    cpu         = 500
    memory_mb   = 512
    # Between 15s (the member's graceful stop, 10s, plus a margin) and 30s
    # (Nomad clients cap kill_timeout at their max_kill_timeout, 30s by
    # default), in whole seconds.
    kill_timeout = "30s"

    # To keep data on a Nomad host volume instead of the ephemeral disk,
    # use driver "exec" or "docker" (raw_exec mounts no volumes); data_dir
    # then defaults to the volume's mount, /var/lib/etcd-nomad.
    # driver      = "exec"
    # host_volume = "etcd"
  }
}

EOT
      }

      resources {
        cpu    = 500
        memory = 512
      }
    }
  }
}
