[[- /* What the pack derives from its variables, where 'etcd-nomad job
       render' takes the value from the cluster definition (jobs.Render):
       each template below is one value of etcd.nomad.tpl. */ -]]

[[- define "etcd.header" -]]
# Rendered by nomad-pack from the etcd pack: the job 'etcd-nomad job render'
# renders for the same cluster definition. Submit with: nomad-pack run etcd
[[- end -]]

[[- /* The job's name: job_name, else cluster_name. */ -]]
[[- define "etcd.job_name" -]]
[[- if var "job_name" . ]][[ var "job_name" . ]][[ else ]][[ var "cluster_name" . ]][[ end -]]
[[- end -]]

[[- /* The path etcd-nomad runs from: the artifact's inside the task
       directory, or the binary installed on the clients. */ -]]
[[- define "etcd.binary" -]]
[[- if var "artifact_source" . ]]${NOMAD_TASK_DIR}/[[ var "artifact_path" . ]][[ else ]][[ var "binary" . ]][[ end -]]
[[- end -]]

[[- /* The update block's deadlines, in minutes, for the backend quota:
       healthy, 3m for a join's fixed costs plus the quota at 20 MiB/s,
       rounded up to the minute; progress, 5m more and at least 10m
       (jobs.JoinDeadline and ProgressDeadline). Called with
       (list . "healthy") or (list . "progress"). */ -]]
[[- define "etcd.deadline" -]]
[[- $quota := var "quota_backend_bytes" (index . 0) -]]
[[- $rate := 20971520 -]]
[[- $join := div (add (mul 180 $rate) $quota (sub (mul 60 $rate) 1)) (mul 60 $rate) -]]
[[- if eq (index . 1) "progress" ]][[ max 10 (add $join 5) ]][[ else ]][[ $join ]][[ end ]]m
[[- end -]]

[[- define "etcd.healthy_deadline" -]]
[[ template "etcd.deadline" (list . "healthy") ]]
[[- end -]]

[[- define "etcd.progress_deadline" -]]
[[ template "etcd.deadline" (list . "progress") ]]
[[- end -]]

[[- /* The sticky ephemeral disk: twice the quota plus 1 GiB, in MiB,
       rounded up (jobs.EphemeralDiskMB). */ -]]
[[- define "etcd.disk_mb" -]]
[[ div (add (mul 2 (var "quota_backend_bytes" .)) 1073741824 1048575) 1048576 ]]
[[- end -]]

[[- /* The group's shutdown_delay (jobs.ShutdownDelay) and its disconnect
       lost_after (config.NomadLostAfter, which stale_after must reach). */ -]]
[[- define "etcd.shutdown_delay" -]]
5s
[[- end -]]

[[- define "etcd.lost_after" -]]
2m
[[- end -]]

[[- /* Whether the members talk to Consul over HTTPS. */ -]]
[[- define "etcd.consul_tls" -]]
[[- if or (var "consul_ca_file" .) (var "consul_tls_server_name" .) (var "consul_cert_file" .) (hasPrefix "https://" (var "consul_address" .)) ]]true[[ else ]]false[[ end -]]
[[- end -]]

[[- /* The job's Nomad variable: the members' CONSUL_HTTP_TOKEN and the
       key that seals the cluster CA (jobs.TokenVariable). */ -]]
[[- define "etcd.variable_path" -]]
nomad/jobs/[[ template "etcd.job_name" . ]]
[[- end -]]

[[- /* The cluster definition the members read, as etcd-nomad validates
       it. Every setting is written out, defaults too. */ -]]
[[- define "etcd.definition" -]]
cluster "[[ var "cluster_name" . ]]" {
  size           = [[ var "size" . ]]
  recovery_grace = "[[ var "recovery_grace" . ]]"

  etcd {
    quota_backend_bytes       = "[[ var "quota_backend_bytes" . ]]"
    heartbeat_interval        = "[[ var "heartbeat_interval" . ]]"
    election_timeout          = "[[ var "election_timeout" . ]]"
    auto_compaction_mode      = "[[ var "auto_compaction_mode" . ]]"
    auto_compaction_retention = "[[ var "auto_compaction_retention" . ]]"
  }

  tls {
    mode = "[[ var "tls_mode" . ]]"
[[- if eq (var "tls_mode" .) "files" ]]
    ca_file   = "[[ var "tls_ca_file" . ]]"
    cert_file = "[[ var "tls_cert_file" . ]]"
    key_file  = "[[ var "tls_key_file" . ]]"
[[- end ]]
  }

  provider "nomad" {
    group       = "[[ var "group" . ]]"
    stale_after = "[[ var "stale_after" . ]]"
  }

  coordination "consul" {
    prefix      = "[[ var "consul_prefix" . ]]"
    session_ttl = "[[ var "session_ttl" . ]]"
  }
[[- if var "snapshot_store" . ]]

  snapshot {
    interval     = "[[ var "snapshot_interval" . ]]"
    retain_count = [[ var "snapshot_retain_count" . ]]
    retain_age   = "[[ var "snapshot_retain_age" . ]]"
[[- if eq (var "snapshot_store" .) "s3" ]]
    store "s3" {
      bucket     = "[[ var "snapshot_s3_bucket" . ]]"
      prefix     = "[[ var "snapshot_s3_prefix" . ]]"
      endpoint   = "[[ var "snapshot_s3_endpoint" . ]]"
      region     = "[[ var "snapshot_s3_region" . ]]"
      path_style = [[ var "snapshot_s3_path_style" . ]]
    }
[[- else ]]
    store "[[ var "snapshot_store" . ]]" {
      path = "[[ var "snapshot_file_path" . ]]"
    }
[[- end ]]
  }
[[- end ]]

  nomad {
    job            = "[[ template "etcd.job_name" . ]]"
    datacenters    = [[ var "datacenters" . | toStringList ]]
    namespace      = "[[ var "namespace" . ]]"
    region         = "[[ var "region" . ]]"
    driver         = "[[ var "driver" . ]]"
    cpu            = [[ var "cpu" . ]]
    memory_mb      = [[ var "memory_mb" . ]]
    kill_timeout   = "[[ var "kill_timeout" . ]]"
    distinct_hosts = [[ var "distinct_hosts" . ]]
    peer_port      = [[ var "peer_port" . ]]
[[- if var "user" . ]]
    user           = "[[ var "user" . ]]"
[[- end ]]
[[- if eq (var "driver" .) "docker" ]]
    image          = "[[ var "image" . ]]"
[[- else if var "artifact_source" . ]]
    artifact {
      source   = "[[ var "artifact_source" . ]]"
      checksum = "[[ var "artifact_checksum" . ]]"
      path     = "[[ var "artifact_path" . ]]"
    }
[[- else ]]
    binary         = "[[ var "binary" . ]]"
[[- end ]]
[[- if var "host_volume" . ]]
    host_volume    = "[[ var "host_volume" . ]]"
[[- end ]]
    consul {
      address         = "[[ var "consul_address" . ]]"
      ca_file         = "[[ var "consul_ca_file" . ]]"
      tls_server_name = "[[ var "consul_tls_server_name" . ]]"
      cert_file       = "[[ var "consul_cert_file" . ]]"
      key_file        = "[[ var "consul_key_file" . ]]"
    }
  }
[[- if var "extra_definition" . ]]

[[ var "extra_definition" . | replace "${" "$${" | replace "%{" "%%{" ]]
[[- end ]]
}
[[ end -]]
