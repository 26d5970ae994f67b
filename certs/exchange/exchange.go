// Package exchange holds the wire types of the certificate exchange: an
// application's task on the same Nomad cluster trades its workload
// identity (a JWT Nomad signed, audience identity.ClusterAudience of this
// cluster) for a short-lived client certificate from the cluster CA, whose
// CN is the user the access rules map its job to (user { nomad_jobs =
// [...] }). The caller sends a certificate request and keeps its key; the
// CA key never leaves the member.
//
// The member serves it (task/trust); `etcd-nomad creds` is the client.
// This package holds only what both sides share, so that the client links
// neither the supervisor nor the embedded etcd.
package exchange

import "time"

// Path is the member's exchange endpoint, on its status port.
const Path = "/v1/client-certificate"

// Request is what a workload posts to Path.
type Request struct {
	// Identity is the workload identity JWT.
	Identity string `json:"identity"`
	// CSR is a PEM certificate request; only its key is used.
	CSR string `json:"csr"`
}

// Response is the exchange's answer.
type Response struct {
	User        string    `json:"user"`
	Certificate string    `json:"certificate"`
	CA          string    `json:"ca"`
	NotAfter    time.Time `json:"not_after"`
	// Warning, when set, is for the application's operator: creds logs
	// it (the token's audience is the bare one of earlier versions).
	Warning string `json:"warning,omitempty"`
}

// CACertKey is the coordinator key where the leader publishes the cluster
// CA's certificate (never its key), for the exchange's clients to verify
// the members they call.
const CACertKey = "ca.crt"
