# Members are the InService instances of an AWS auto-scaling group, as with
# etcd-cloud-operator. (Not in this build yet: validate warns.)
cluster "asg" {
  size     = 3
  data_dir = "/var/lib/etcd-nomad"

  provider "asg" {
    name   = "etcd-asg"
    region = "eu-west-1"
  }

  coordination "consul" {}
}
