# Each variable is a setting of the etcd-nomad cluster definition
# (docs/configuration.md); its default is the definition's.

# --- The cluster ------------------------------------------------------------

variable "cluster_name" {
  description = "The cluster's name: the Consul service the members register, and the job's name unless job_name is set."
  type        = string
  default     = "etcd"
}

variable "size" {
  description = "Number of voting members (1, 3 or 5). The job's count."
  type        = number
  default     = 3
}

variable "recovery_grace" {
  description = "How long quorum must stay lost (every instance answering, none healthy) before it is recovered automatically; \"0s\" turns that off."
  type        = string
  default     = "5m"
}

# --- etcd ---------------------------------------------------------------------

variable "quota_backend_bytes" {
  description = "etcd's backend quota in bytes. The sticky ephemeral disk (twice this plus 1 GiB) and the update deadlines follow it."
  type        = number
  default     = 2147483648
}

variable "heartbeat_interval" {
  description = "etcd's raft heartbeat interval."
  type        = string
  default     = "100ms"
}

variable "election_timeout" {
  description = "etcd's raft election timeout."
  type        = string
  default     = "1s"
}

variable "auto_compaction_mode" {
  description = "etcd's auto compaction mode: \"periodic\" or \"revision\"."
  type        = string
  default     = "periodic"
}

variable "auto_compaction_retention" {
  description = "etcd's auto compaction retention (a duration for periodic, a count for revision)."
  type        = string
  default     = "1h"
}

# --- TLS ----------------------------------------------------------------------

variable "tls_mode" {
  description = "\"auto\": one CA per cluster, created by the first member and sealed in Consul; \"files\": certificates from tls_ca_file, tls_cert_file and tls_key_file; \"off\": plaintext (tests only)."
  type        = string
  default     = "auto"
}

variable "tls_ca_file" {
  description = "With tls_mode \"files\": the CA certificate, a path on the Nomad clients."
  type        = string
  default     = ""
}

variable "tls_cert_file" {
  description = "With tls_mode \"files\": the member certificate, a path on the Nomad clients."
  type        = string
  default     = ""
}

variable "tls_key_file" {
  description = "With tls_mode \"files\": the member key, a path on the Nomad clients."
  type        = string
  default     = ""
}

# --- Membership and coordination ---------------------------------------------

variable "group" {
  description = "The job's task group, whose allocations are the members."
  type        = string
  default     = "etcd"
}

variable "stale_after" {
  description = "A member gone from the job's running allocations this long is removed from etcd; at least the job's disconnect lost_after (2m)."
  type        = string
  default     = "2m"
}

variable "consul_prefix" {
  description = "Consul KV prefix of the cluster record, lock and CA."
  type        = string
  default     = "etcd-nomad"
}

variable "session_ttl" {
  description = "TTL of the Consul session that holds the cluster's lock."
  type        = string
  default     = "15s"
}

# --- Snapshots ----------------------------------------------------------------

variable "snapshot_store" {
  description = "Where scheduled snapshots go: \"\" (none), \"s3\" or \"file\"."
  type        = string
  default     = ""
}

variable "snapshot_interval" {
  description = "Time between full snapshots."
  type        = string
  default     = "30m"
}

variable "snapshot_retain_count" {
  description = "Full snapshots kept."
  type        = number
  default     = 24
}

variable "snapshot_retain_age" {
  description = "Full snapshots younger than this are kept."
  type        = string
  default     = "168h"
}

variable "snapshot_s3_bucket" {
  description = "With snapshot_store \"s3\": the bucket. Credentials come from the AWS SDK's chain on the clients."
  type        = string
  default     = ""
}

variable "snapshot_s3_prefix" {
  description = "With snapshot_store \"s3\": the key prefix."
  type        = string
  default     = ""
}

variable "snapshot_s3_endpoint" {
  description = "With snapshot_store \"s3\": an S3-compatible endpoint URL; empty for AWS."
  type        = string
  default     = ""
}

variable "snapshot_s3_region" {
  description = "With snapshot_store \"s3\": the region."
  type        = string
  default     = ""
}

variable "snapshot_s3_path_style" {
  description = "With snapshot_store \"s3\": path-style addressing (MinIO, versitygw)."
  type        = bool
  default     = false
}

variable "snapshot_file_path" {
  description = "With snapshot_store \"file\": a directory every client shares (NFS)."
  type        = string
  default     = ""
}

# --- The Nomad job ------------------------------------------------------------

variable "job_name" {
  description = "The Nomad job's name; empty: cluster_name."
  type        = string
  default     = ""
}

variable "datacenters" {
  description = "The job's datacenters."
  type        = list(string)
  default     = ["dc1"]
}

variable "namespace" {
  description = "The job's Nomad namespace; empty: the default."
  type        = string
  default     = ""
}

variable "region" {
  description = "The job's Nomad region; empty: the agent's."
  type        = string
  default     = ""
}

variable "driver" {
  description = "Task driver: \"raw_exec\", \"exec\" or \"docker\" (which runs image)."
  type        = string
  default     = "raw_exec"
}

variable "binary" {
  description = "etcd-nomad's path on the Nomad clients (raw_exec, exec). Ignored when artifact_source is set or with driver docker."
  type        = string
  default     = "/usr/local/bin/etcd-nomad"
}

variable "image" {
  description = "With driver docker: the image the clients run, e.g. \"registry.example.com/etcd-nomad:1.2.3\" (make image builds it)."
  type        = string
  default     = ""
}

variable "artifact_source" {
  description = "A release archive each allocation downloads (go-getter URL) instead of binary; a new release rolls out one member at a time."
  type        = string
  default     = ""
}

variable "artifact_checksum" {
  description = "The archive's checksum, \"sha256:<hex>\" (required with artifact_source)."
  type        = string
  default     = ""
}

variable "artifact_path" {
  description = "The binary's path inside the archive."
  type        = string
  default     = "etcd-nomad"
}

variable "cpu" {
  description = "CPU per member, MHz."
  type        = number
  default     = 500
}

variable "memory_mb" {
  description = "Memory per member, MiB."
  type        = number
  default     = 512
}

variable "kill_timeout" {
  description = "How long Nomad waits after SIGTERM: between 15s and the clients' max_kill_timeout (30s by default)."
  type        = string
  default     = "30s"
}

variable "host_volume" {
  description = "A Nomad host volume for the data instead of the sticky ephemeral disk (drivers exec and docker)."
  type        = string
  default     = ""
}

variable "user" {
  description = "The user the member's task runs as; empty: the driver's default (exec runs tasks as nobody, which must then be able to write host_volume)."
  type        = string
  default     = ""
}

variable "peer_port" {
  description = "A static peer port, so that a member's peer URL survives every stop (with host_volume: a cluster whose members all stopped finds itself again); needs distinct_hosts. 0: Nomad picks one."
  type        = number
  default     = 0
}

variable "distinct_hosts" {
  description = "At most one member per Nomad client. Turn off only for a demo on one host."
  type        = bool
  default     = true
}

variable "consul_address" {
  description = "The Consul agent the members use, as seen from the clients: host:port, or https://host:port."
  type        = string
  default     = "127.0.0.1:8500"
}

variable "consul_ca_file" {
  description = "The CA of the Consul agent's HTTPS certificate, a path on the clients; setting it turns TLS on."
  type        = string
  default     = ""
}

variable "consul_tls_server_name" {
  description = "The name checked in the Consul agent's certificate when it differs from the address's host."
  type        = string
  default     = ""
}

variable "consul_cert_file" {
  description = "The client certificate the members present to a Consul agent that verifies HTTPS clients (verify_incoming), a path on the clients; with consul_key_file."
  type        = string
  default     = ""
}

variable "consul_key_file" {
  description = "The key of consul_cert_file, a path on the clients."
  type        = string
  default     = ""
}

variable "extra_definition" {
  description = "HCL added verbatim inside the cluster block, for what has no variable of its own: access { } rules, snapshot { encryption { } }, ports."
  type        = string
  default     = ""
}
