app {
  url = "https://github.com/etcd-nomad/etcd-nomad"
}

pack {
  name        = "etcd"
  description = "A self-managing etcd cluster: etcd-nomad members seed, join, replace and recover themselves, coordinated through Consul."
  version     = "0.1.0"
}
