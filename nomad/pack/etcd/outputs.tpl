etcd cluster "[[ var "cluster_name" . ]]" submitted as job "[[ template "etcd.job_name" . ]]" ([[ var "size" . ]] members).

The members seed the cluster once, then each passes its Consul check when it
is a caught-up voter of a cluster with quorum:

  nomad job status [[ template "etcd.job_name" . ]]
  consul catalog nodes -service [[ var "cluster_name" . ]]

Clients find the members as the Consul service "[[ var "cluster_name" . ]]"
([[ var "cluster_name" . ]].service.consul, SRV _[[ var "cluster_name" . ]]._tcp.service.consul).
[[- if ne (var "tls_mode" .) "off" ]]

The endpoints are mutual TLS. With the same settings in a cluster definition
(cluster.hcl), an operator's etcdctl gets a short-lived certificate:

  eval $(etcd-nomad env -config cluster.hcl)
  etcdctl member list -w table

Applications on Nomad trade their workload identity for a certificate with
'etcd-nomad creds' (access { } rules in extra_definition; etcd-nomad's
docs/clients.md).
[[- end ]]
[[- if eq (var "tls_mode" .) "auto" ]]

The key that seals the cluster CA lives in the Nomad variable
nomad/jobs/[[ template "etcd.job_name" . ]] (key ca_kek). Without Nomad ACLs the first member
creates it there. Under Nomad ACLs the members may only read it, and refuse
to start until it is there: if you have not put it there before this run,

  nomad var put -check-index 0 nomad/jobs/[[ template "etcd.job_name" . ]] ca_kek=$(openssl rand -base64 32)
[[- end ]]
