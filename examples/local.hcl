# A three-member cluster on one machine, without Nomad: what
# `etcd-nomad local up` writes for you. Each member runs as
#   etcd-nomad member --config examples/local.hcl --name m0
cluster "demo" {
  # Number of voting members. Odd sizes are recommended (1, 3, 5, ...).
  size = 3

  # Each member keeps its data in data_dir/<member name>. Relative paths are
  # resolved against this file's directory.
  data_dir = "./data"

  etcd {
    quota_backend_bytes       = "2GiB"
    auto_compaction_mode      = "periodic"
    auto_compaction_retention = "1h"
    heartbeat_interval        = "100ms"
    election_timeout          = "1s"
  }

  # auto: one CA per cluster, created once and shared through the
  # coordinator; each member gets its own peer and client certificates.
  tls {
    mode = "auto"
  }

  # A fixed list of members. On one machine each needs its own ports.
  provider "static" {
    member "m0" {
      address     = "127.0.0.1"
      client_port = 22379
      peer_port   = 22380
      status_port = 22381
    }
    member "m1" {
      address     = "127.0.0.1"
      client_port = 22479
      peer_port   = 22480
      status_port = 22481
    }
    member "m2" {
      address     = "127.0.0.1"
      client_port = 22579
      peer_port   = 22580
      status_port = 22581
    }
  }

  # Seeding and membership changes are serialized by a file lock in a
  # directory all members share; it also holds the cluster record and CA.
  coordination "local" {
    dir = "./coord"
  }
}
