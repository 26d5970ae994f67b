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
  # "${" as an interpolation.
  # data_dir = "$${NOMAD_ALLOC_DIR}/data"

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
    binary = "/usr/local/bin/etcd-nomad"
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
