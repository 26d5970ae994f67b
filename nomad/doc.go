// Package nomad is etcd-nomad's glue to HashiCorp Nomad: the API client
// from the standard environment (NOMAD_ADDR, NOMAD_TOKEN), the port labels
// of the rendered job, a member's identity from the NOMAD_* variables of
// its allocation, the cluster's workload-identity keys, and the wording of
// Nomad's ACL refusals (what the token lacks). It holds no etcd logic:
// the provider (provider/nomad) and the job (jobs) build on it.
package nomad
