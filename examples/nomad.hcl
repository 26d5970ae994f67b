# A three-member cluster as a Nomad job, coordinated through Consul.
# (The nomad provider and Consul coordination are not in this build yet:
# `etcd-nomad validate` says so with a warning.)
cluster "etcd" {
  size = 3

  # Inside Nomad, data lives in the allocation's sticky ephemeral disk
  # unless a host volume is configured.
  # data_dir = "${NOMAD_ALLOC_DIR}/data"

  ports {
    client = 2379
    peer   = 2380
    status = 2381
  }

  tls {
    mode = "auto"
  }

  provider "nomad" {
    group       = "etcd"
    stale_after = "30s"
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

  nomad {
    datacenters = ["dc1"]
    driver      = "raw_exec"
    cpu         = 500
    memory_mb   = 512
  }
}
