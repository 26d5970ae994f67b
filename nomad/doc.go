// Package nomadglue is etcd-nomad's glue to HashiCorp Nomad: the API client
// from the standard environment (NOMAD_ADDR, NOMAD_TOKEN), the port labels
// of the rendered job, a member's identity from the NOMAD_* variables of
// its allocation, the cluster's workload-identity keys, and the wording of
// Nomad's ACL refusals (what the token lacks). It holds no etcd logic:
// the provider (provider/nomad) and the job (jobs) build on it.
//
// The folder is nomad/, one of the design card's fixed top-level folders;
// the package is named nomadglue so that importers need no alias beside
// Nomad's own api package and provider/nomad.
package nomadglue
