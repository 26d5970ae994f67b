[[- /* The job's name: job_name, else cluster_name. */ -]]
[[- define "etcd.job_name" -]]
[[- if var "job_name" . ]][[ var "job_name" . ]][[ else ]][[ var "cluster_name" . ]][[ end -]]
[[- end -]]

[[- /* The path etcd-nomad runs from: the artifact's inside the task
       directory, or the binary installed on the clients. */ -]]
[[- define "etcd.binary" -]]
[[- if var "artifact_source" . ]]${NOMAD_TASK_DIR}/[[ var "artifact_path" . ]][[ else ]][[ var "binary" . ]][[ end -]]
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
