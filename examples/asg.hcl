# Members are the InService instances of an AWS auto-scaling group, as with
# etcd-cloud-operator: every instance runs
#   etcd-nomad member --config asg.hcl
# (its instance id comes from the instance metadata service). Credentials
# come from the SDK's chain (instance role); docs/asg.md has the IAM policy.
cluster "asg" {
  size     = 3
  data_dir = "/var/lib/etcd-nomad"

  provider "asg" {
    name   = "etcd-asg"
    region = "eu-west-1"

    # A member missing from the group this long is removed.
    stale_after = "30s"
    # A voter unhealthy this long gets its instance replaced
    # (SetInstanceHealth Unhealthy), one at a time, never below quorum.
    replace_after = "10m"
    # Complete this lifecycle hook (CONTINUE) once a terminating member
    # has left the cluster.
    lifecycle_hook = "etcd-drain"
  }

  coordination "consul" {}
}
