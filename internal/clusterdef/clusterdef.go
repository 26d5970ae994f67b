// Package clusterdef writes the HCL of a cluster on Nomad for the
// programs that start one themselves: the suites on real agents (e2e,
// chaos, the testbeds), the bench and the demo. It is the one writer of
// that text; TestDefinitionLoads reads every variant back through config.
package clusterdef

import (
	"cmp"
	"fmt"
	"os"
	"strings"
)

// Definition is a cluster definition with a Nomad provider and Consul
// coordination: etcd's default election timing, written out, and small
// members. A zero field takes the default named on it.
type Definition struct {
	Name string
	Size int
	// Group is the provider's group ("": "etcd").
	Group string
	// TLSMode, when set, is tls { mode }; else the default.
	TLSMode string
	// StaleAfter, when set, is the provider's stale_after; else the
	// default (lost_after's).
	StaleAfter string
	// Prefix is the Consul prefix; SessionTTL, when set, its session_ttl.
	Prefix, SessionTTL string
	// Quota, when set, is etcd's quota_backend_bytes. The sticky disk of
	// each member is twice that plus 1 GiB (5 GiB at the default 2 GiB),
	// which a dev agent counts against the disk space free when it
	// started: tests running several clusters on one client set a small
	// quota so that every member is placed.
	Quota string
	// Job, when set, is the Nomad job's name (else the cluster's).
	Job string
	// CPU is each member's cpu in MHz (0: 100), MemoryMB its memory_mb
	// (0: 128).
	CPU, MemoryMB int
	// Nomad is HCL added inside the nomad block (distinct_hosts, the
	// members' consul { address }: SingleClient).
	Nomad string
	// Extra is HCL added inside the cluster block (recovery_grace,
	// snapshot, ...).
	Extra string
	// Header, when set, is a comment line that starts the file.
	Header string
	// Comment, when set, ends the file: a change of the file that
	// changes nothing in the cluster.
	Comment string
}

// SingleClient is Definition.Nomad for one Nomad client whose Consul
// agent is at consulAddr (http://host:port): every member on it.
func SingleClient(consulAddr string) string {
	return SingleClientTLS(consulAddr, "", "", "")
}

// SingleClientTLS is SingleClient for a Consul agent served over TLS:
// the members trust caFile and present certFile and keyFile.
func SingleClientTLS(consulAddr, caFile, certFile, keyFile string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# One Nomad client: every member on it.\n    distinct_hosts = false\n    consul {\n      address = %q", strings.TrimPrefix(consulAddr, "http://"))
	for _, f := range [][2]string{{"ca_file", caFile}, {"cert_file", certFile}, {"key_file", keyFile}} {
		if f[1] != "" {
			fmt.Fprintf(&b, "\n      %s = %q", f[0], f[1])
		}
	}
	b.WriteString("\n    }")
	return b.String()
}

// HCL returns the definition's text.
func (d Definition) HCL() string {
	var header, tls, ttl, quota, stale, job, comment string
	if d.Header != "" {
		header = "# " + d.Header + "\n"
	}
	if d.Job != "" {
		job = fmt.Sprintf("\n    job          = %q", d.Job)
	}
	if d.Quota != "" {
		quota = fmt.Sprintf("\n    quota_backend_bytes = %q", d.Quota)
	}
	if d.TLSMode != "" {
		tls = fmt.Sprintf("\n  tls {\n    mode = %q\n  }\n", d.TLSMode)
	}
	if d.SessionTTL != "" {
		ttl = fmt.Sprintf("\n    session_ttl = %q", d.SessionTTL)
	}
	if d.StaleAfter != "" {
		stale = fmt.Sprintf("\n    stale_after = %q", d.StaleAfter)
	}
	if d.Comment != "" {
		comment = "# " + d.Comment + "\n"
	}
	group := cmp.Or(d.Group, "etcd")
	cpu, memory := cmp.Or(d.CPU, 100), cmp.Or(d.MemoryMB, 128)
	return fmt.Sprintf(`%scluster %q {
  size = %d

  etcd {
    heartbeat_interval = "100ms"
    election_timeout   = "1s"%s
  }
%s
  provider "nomad" {
    group = %q%s
  }

  coordination "consul" {
    prefix = %q%s
  }

  nomad {%s
    cpu          = %d
    memory_mb    = %d
    kill_timeout = "20s"
    %s
  }
%s
}
%s`, header, d.Name, d.Size, quota, tls, group, stale, d.Prefix, ttl, job, cpu, memory, d.Nomad, d.Extra, comment)
}

// Write writes the definition to path.
func (d Definition) Write(path string) error {
	if err := os.WriteFile(path, []byte(d.HCL()), 0o600); err != nil {
		return fmt.Errorf("write the cluster definition: %w", err)
	}
	return nil
}
