# Three members on three hosts with fixed addresses, coordinated through
# Consul, without Nomad. Every member runs
#   etcd-nomad member --config static.hcl --name <its name>
cluster "static" {
  data_dir = "/var/lib/etcd-nomad"

  provider "static" {
    member "etcd-a" { address = "10.0.1.10" }
    member "etcd-b" { address = "10.0.2.10" }
    member "etcd-c" { address = "10.0.3.10" }
  }

  coordination "consul" {}
}
