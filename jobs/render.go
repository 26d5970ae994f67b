// Package jobs turns a cluster definition into the Nomad job that runs it
// (HCL2 jobspec text, accepted by `nomad job validate` and `nomad job run`)
// and registers it through the API, following the deployment. It holds no
// state and never touches etcd.
package jobs

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/nomad/pack"
)

// Options complete what the definition does not say. Nothing of the
// renderer's environment reaches the job: the members find Nomad through
// their client's task API socket and Consul at the definition's
// nomad { consul { } } (the client's local agent by default).
type Options struct {
	// Binary is the etcd-nomad path on the clients; overrides the
	// definition's nomad.binary and nomad.artifact. The definition or
	// this must name what the clients run: Render never falls back to
	// its own path.
	Binary string
	// Image is the container image of driver "docker"; overrides the
	// definition's nomad.image.
	Image string
}

// Where the members find their secrets: the Nomad variable
// TokenVariable(job) (readable by the job's own tasks through their
// workload identity), key TokenKey for CONSUL_HTTP_TOKEN and key CAKEKKey
// for the cluster CA's key encryption key (certs.KEKEnv). The rendered job
// never holds a secret.
const (
	TokenKey = "consul_token"
	CAKEKKey = "ca_kek"
)

// TokenVariable is the path of the job's Nomad variable.
func TokenVariable(job string) string { return "nomad/jobs/" + job }

// Render returns the jobspec for cl: the pack's job template
// (nomad/pack/etcd/templates/etcd.nomad.tpl) with cl's values.
func Render(cl *config.Cluster, o Options) (string, error) {
	if cl.Provider.Kind != config.ProviderNomad {
		return "", fmt.Errorf("%s: job render needs provider \"nomad\", the definition uses %q", cl.File, cl.Provider.Kind)
	}
	if cl.Coordination.Kind != config.CoordConsul {
		return "", fmt.Errorf("%s: members on Nomad coordinate through Consul: use coordination \"consul\", not %q", cl.File, cl.Coordination.Kind)
	}
	bin, artifact, img, err := whatRuns(cl, o)
	if err != nil {
		return "", err
	}
	healthy := JoinDeadline(cl.Etcd.QuotaBackendBytes)
	n := cl.Nomad
	var artSource, artChecksum string
	if artifact != nil {
		artSource, artChecksum = artifact.Source, artifact.Checksum
	}
	// The pack's job template (nomad/pack/etcd), with the definition's
	// values where nomad-pack puts the pack's variables and helpers.
	spec, err := pack.Job(map[string]any{
		"header":                 fmt.Sprintf("# Rendered by etcd-nomad from %s. Submit with: nomad job run <this file>", cl.File),
		"job_name":               n.Job,
		"variable_path":          TokenVariable(n.Job),
		"cluster_name":           cl.Name,
		"datacenters":            anys(n.Datacenters),
		"namespace":              n.Namespace,
		"region":                 n.Region,
		"group":                  cl.Provider.Nomad.Group,
		"size":                   cl.Size,
		"distinct_hosts":         n.DistinctHosts,
		"healthy_deadline":       minutes(healthy),
		"progress_deadline":      minutes(ProgressDeadline(healthy)),
		"shutdown_delay":         ShutdownDelay.String(),
		"lost_after":             config.NomadLostAfter.String(),
		"peer_port":              n.PeerPort,
		"host_volume":            n.HostVolume,
		"disk_mb":                EphemeralDiskMB(cl.Etcd.QuotaBackendBytes),
		"tls_mode":               cl.TLS.Mode,
		"driver":                 n.Driver,
		"user":                   n.User,
		"kill_timeout":           fmt.Sprintf("%ds", int(n.KillTimeout.Seconds())),
		"image":                  img,
		"binary":                 bin,
		"artifact_source":        artSource,
		"artifact_checksum":      artChecksum,
		"consul_address":         n.Consul.Address,
		"consul_tls":             n.Consul.TLS(),
		"consul_ca_file":         n.Consul.CAFile,
		"consul_tls_server_name": n.Consul.TLSServerName,
		"consul_cert_file":       n.Consul.CertFile,
		"consul_key_file":        n.Consul.KeyFile,
		"definition":             escapeHeredoc(string(cl.Source)),
		"cpu":                    n.CPU,
		"memory_mb":              n.MemoryMB,
	})
	if err != nil {
		return "", fmt.Errorf("render job: %w", err)
	}
	return spec, nil
}

// whatRuns is what the clients run: the binary's path (absolute, or in
// the task directory when an artifact brings it), or, with driver docker,
// the image.
func whatRuns(cl *config.Cluster, o Options) (bin string, art *config.NomadArtifact, img string, err error) {
	where := firstOf(cl.Nomad.Where, cl.File)
	if cl.Nomad.Driver == "docker" {
		img = firstOf(o.Image, cl.Nomad.Image)
		switch {
		case o.Binary != "":
			return "", nil, "", fmt.Errorf("%s: nomad: driver \"docker\" runs an image: -binary names a path on the clients, for drivers \"raw_exec\" and \"exec\"; pass -image REF or set nomad { image }", where)
		case img == "":
			return "", nil, "", fmt.Errorf("%s: nomad: driver \"docker\" and no image: set nomad { image = \"registry.example.com/etcd-nomad:<version>\" } ('make image' builds it) or pass -image REF", where)
		}
		if err := config.CheckImage(img); err != nil {
			return "", nil, "", fmt.Errorf("%s: nomad: %w", where, err)
		}
		return "", nil, img, nil
	}
	if o.Image != "" {
		return "", nil, "", fmt.Errorf("%s: nomad: -image is for driver \"docker\"; this job uses driver %q, which runs a binary (-binary PATH)", where, cl.Nomad.Driver)
	}
	bin = firstOf(o.Binary, cl.Nomad.Binary)
	art = cl.Nomad.Artifact
	switch {
	case o.Binary != "":
		art = nil // the caller's binary wins (tests, the demo)
	case art != nil:
		return "${NOMAD_TASK_DIR}/" + art.Path, art, "", nil
	case bin == "":
		return "", nil, "", fmt.Errorf("%s: nomad: neither binary nor artifact is set: name what the Nomad clients run, nomad { artifact { source = \"<release archive URL>\", checksum = \"sha256:<hex>\" } } or nomad { binary = \"/usr/local/bin/etcd-nomad\" }, or pass -binary PATH (a dev or demo cluster)", where)
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", nil, "", err
	}
	return abs, nil, "", nil
}

// EphemeralDiskMB is the sticky ephemeral disk a member needs for a
// backend quota of quota bytes: twice the quota, since a second copy of the
// database is written while a member receives a snapshot from the leader,
// spools a scheduled snapshot, or defragments; plus 1 GiB for the WAL (etcd
// keeps 5 segments of 64 MiB), its .snap files and the task's logs. Nomad
// counts MB (MiB); rounded up.
func EphemeralDiskMB(quota int64) int64 {
	const mib = 1 << 20
	return (2*quota + 1<<30 + mib - 1) / mib
}

// JoinDeadline is the update block's healthy_deadline (and the migrate
// block's) for a backend quota of quota bytes: how long a new allocation
// may take to pass its check. A member placed without its data (a new
// node, a lost disk) joins as a learner and receives the whole database
// from the leader before it is promoted: joinBase for the start, the
// learner add (etcd's 5 s strict reconfiguration) and the catch-up, plus
// the quota at joinThroughput, rounded up to the minute. 3m, the old
// fixed value, left 2 GiB about a minute: a real join missed it, and
// auto_revert rolled the job back.
func JoinDeadline(quota int64) time.Duration {
	d := joinBase + time.Duration(float64(quota)/joinThroughput*float64(time.Second))
	return (d + time.Minute - 1).Truncate(time.Minute)
}

// ProgressDeadline is the update block's progress_deadline: Nomad wants it
// above healthy_deadline; the margin leaves room to place the allocation
// (and download its artifact) before the member's own deadline starts.
func ProgressDeadline(healthy time.Duration) time.Duration {
	return max(10*time.Minute, healthy+5*time.Minute)
}

const (
	// joinBase covers a join's fixed costs: process and etcd start, the
	// learner add under the lock, the catch-up and promotion, and the
	// check's interval and min_healthy_time.
	joinBase = 3 * time.Minute
	// joinThroughput is a conservative rate for the leader's snapshot
	// to a new learner, in bytes per second (20 MiB/s: a busy 1 Gbit
	// network and disks shared with the serving members).
	joinThroughput = 20 << 20
)

// ShutdownDelay is the group's shutdown_delay: Nomad deregisters the
// member's Consul service, waits this long, then sends SIGTERM, so that
// clients resolving the service stop choosing the member before it hands
// leadership away and leaves. It comes before kill_timeout, not out of it.
const ShutdownDelay = 5 * time.Second

// escapeHeredoc keeps HCL2 and consul-template from interpolating the
// embedded definition.
func escapeHeredoc(s string) string {
	s = strings.ReplaceAll(s, "${", "$${")
	s = strings.ReplaceAll(s, "%{", "%%{")
	return s
}

// minutes formats a whole number of minutes as "5m".
func minutes(d time.Duration) string { return fmt.Sprintf("%dm", int(d/time.Minute)) }

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// anys is xs as the []any a pack variable's list is.
func anys(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}
