package config

import (
	"strings"
	"time"
)

// TLS modes.
const (
	TLSAuto  = "auto"
	TLSFiles = "files"
	TLSOff   = "off"
)

// Provider kinds.
const (
	ProviderNomad  = "nomad"
	ProviderASG    = "asg"
	ProviderStatic = "static"
)

// Coordination kinds.
const (
	CoordConsul = "consul"
	CoordLocal  = "local"
)

// Defaults. Ports follow etcd's own (2379 client, 2380 peer); the status
// port is the next one up.
const (
	DefaultSize              = 3
	DefaultClientPort        = 2379
	DefaultPeerPort          = 2380
	DefaultStatusPort        = 2381
	DefaultQuotaBackendBytes = 2 << 30 // etcd's default
	// DefaultDefragRatio and DefaultDefragMinSize: defragment a member
	// when half of a database of at least 64 MiB is free pages.
	DefaultDefragRatio   = 0.5
	DefaultDefragMinSize = 64 << 20
	// DefaultCorruptCheckInterval: the leader compares the members'
	// database hashes this often (etcd's periodic and compaction hash
	// checks).
	DefaultCorruptCheckInterval = 5 * time.Minute
	DefaultHeartbeat            = 100 * time.Millisecond
	DefaultElection             = time.Second
	DefaultCompactionMode       = "periodic"
	DefaultCompactionRetain     = "1h"
	DefaultSnapshotCount        = 10000
	// DefaultDeltaInterval and, with a passphrase (one scrypt per
	// segment), DefaultDeltaIntervalScrypt: how often continuous backup
	// flushes, which bounds what a loss of every data dir costs.
	DefaultDeltaInterval       = 5 * time.Second
	DefaultDeltaIntervalScrypt = 60 * time.Second
	// DefaultStaleAfter is how long a member must be unreachable and absent
	// from the provider before it is removed from the membership.
	DefaultStaleAfter = 30 * time.Second
	// DefaultRecoveryGrace is how long quorum must stay lost, with every
	// instance answering and none healthy, before a member recovers it
	// automatically. Long enough that restarts, rolling updates and agent
	// hiccups never trigger it; "0s" turns recovery off.
	DefaultRecoveryGrace = 5 * time.Minute

	// NomadDataDir is the nomad provider's default data_dir: the
	// allocation's directory, on its sticky ephemeral disk, which follows
	// the allocation to its replacement. The member expands the variable;
	// in a definition it is written "$${NOMAD_ALLOC_DIR}/data", since HCL
	// reads "${" as an interpolation.
	NomadDataDir = "${NOMAD_ALLOC_DIR}/data"
	// HostVolumeDataDir is where the rendered job mounts nomad.host_volume
	// (the job template's volume_mount destination, in
	// nomad/pack/etcd/templates/etcd.nomad.tpl; limits_external_test.go
	// checks they agree), so the default data_dir when a host volume is set.
	HostVolumeDataDir = "/var/lib/etcd-nomad"

	// DefaultNomadConsulAddress is the Consul agent the members use by
	// default: the one on their own Nomad client, at Consul's default
	// HTTP address.
	DefaultNomadConsulAddress = "127.0.0.1:8500"
	// DefaultArtifactPath is where the binary sits in a release archive.
	DefaultArtifactPath = "etcd-nomad"
)

// Cluster is a decoded, defaulted and validated cluster definition.
type Cluster struct {
	Name    string
	Size    int
	DataDir string
	Ports   Ports
	Etcd    Etcd
	TLS     TLS

	Provider     Provider
	Coordination Coordination

	// Snapshot is nil when the definition has no snapshot block.
	Snapshot *Snapshot
	// Nomad holds the job settings; defaults apply when the block is absent.
	Nomad NomadJob
	// RecoveryGrace, when positive, turns on automatic quorum-loss
	// recovery after quorum has been lost this long (DefaultRecoveryGrace;
	// 0 turns it off).
	RecoveryGrace time.Duration
	// Access, when set, is etcd's authorization the members apply: nil
	// leaves etcd's auth as it is.
	Access *Access

	// File is the path the definition was read from, Source its text.
	File   string
	Source []byte
}

// Ports are the default ports of every member.
type Ports struct {
	Client int
	Peer   int
	Status int
}

// Etcd holds the etcd tuning passed to every member.
type Etcd struct {
	QuotaBackendBytes       int64
	AutoCompactionMode      string
	AutoCompactionRetention string
	HeartbeatInterval       time.Duration
	ElectionTimeout         time.Duration
	SnapshotCount           uint64
	// DefragRatio, when positive, defragments a member whose database is
	// at least DefragMinSize and has this share of it free (fragmented);
	// 0 turns fragmentation-based defragmentation off.
	DefragRatio   float64
	DefragMinSize int64
	// CorruptCheckInterval is how often the leader compares every
	// member's database hash with its own (etcd's periodic corruption
	// check and compaction hash check); 0 turns both off. A member also
	// checks its data against its peers' at every start.
	CorruptCheckInterval time.Duration
}

// TLS selects how members and clients are secured.
type TLS struct {
	Mode string
	// Files mode only.
	CAFile   string
	CertFile string
	KeyFile  string
	// CertificateTTL is how long the member and root client certificates
	// of mode "auto" are valid; members renew them while running at two
	// thirds of it (tls.certificate_ttl, default DefaultMemberCertTTL).
	CertificateTTL time.Duration
}

// DefaultMemberCertTTL is the validity of the member certificates of TLS
// mode "auto": renewed while running at two thirds of it.
const DefaultMemberCertTTL = 365 * 24 * time.Hour

// MinMemberCertTTL: shorter validities leave renewal no margin over the
// clock skew members tolerate (certificates are backdated a tenth of it).
const MinMemberCertTTL = 30 * time.Second

// Provider says where members come from.
type Provider struct {
	Kind string
	// StaleAfter is how long a member may be missing before it is removed.
	StaleAfter time.Duration
	// ReplaceAfter, when positive, is how long a voter may stay unhealthy
	// before its instance is replaced (asg only).
	ReplaceAfter time.Duration

	Static []StaticMember
	Nomad  NomadProvider
	ASG    ASGProvider
}

// StaticMember is one member of a static provider.
type StaticMember struct {
	Name       string
	Address    string
	ClientPort int
	PeerPort   int
	StatusPort int
}

// NomadProvider finds members among a job's task group allocations.
type NomadProvider struct {
	Job       string
	Group     string
	Namespace string
	// ASG, when set, maps each allocation's node to its EC2 instance in
	// this auto-scaling group (Nomad clients in an ASG).
	ASG *ASGProvider
	// NodeAttribute holds a node's instance id (asg only).
	NodeAttribute string
}

// ASGProvider finds members among an AWS auto-scaling group's instances.
type ASGProvider struct {
	Name          string
	Region        string
	Endpoint      string
	IMDSEndpoint  string
	LifecycleHook string
}

// Coordination selects the lock and cluster record backend.
type Coordination struct {
	Kind string
	// Local: a directory shared by all members on this machine.
	Dir string
	// Consul: KV prefix and session TTL.
	Prefix     string
	SessionTTL time.Duration
}

// Snapshot configures backups.
type Snapshot struct {
	Interval time.Duration
	// DeltaInterval is how often the leader flushes the changes recorded
	// since the newest full snapshot to the store (continuous backup);
	// 0 turns it off.
	DeltaInterval time.Duration
	RetainCount   int
	RetainAge     time.Duration
	StoreKind     string
	Path          string // file store
	Bucket        string // s3 store
	Prefix        string
	Endpoint      string
	Region        string
	PathStyle     bool
	// CAFile, optional (s3 store): PEM CA certificates trusted for the
	// endpoint's TLS, besides the system's.
	CAFile string
	// Encryption: an age passphrase read from the environment variable
	// PassphraseEnv, or age X25519 recipients (IdentityFile to restore).
	PassphraseEnv string
	Recipients    []string
	IdentityFile  string
}

// NomadJob holds the settings of the rendered Nomad job.
type NomadJob struct {
	Job         string
	Datacenters []string
	Namespace   string
	Region      string
	Driver      string
	CPU         int
	MemoryMB    int
	// Binary is the etcd-nomad binary's path on the Nomad clients
	// (raw_exec, exec). Rendering needs it, an Artifact, or the
	// renderer's -binary flag.
	Binary string
	// Image is the container image driver "docker" runs (`make image`
	// builds one), a reference such as "registry.example.com/etcd-nomad:1.2.3"
	// whose entrypoint is etcd-nomad. Rendering a docker job needs it or
	// the renderer's -image flag.
	Image string
	// Artifact, optional, is the release the clients download for each
	// allocation instead of Binary.
	Artifact *NomadArtifact
	// HostVolume, when set, keeps data on this Nomad host volume instead
	// of the allocation's sticky ephemeral disk.
	HostVolume string
	// User, when set, is the user the member's task runs as (Nomad's
	// task user). exec runs tasks as nobody by default: a host volume's
	// directory must then be writable by that user.
	User string
	// KillTimeout is how long Nomad waits after SIGTERM.
	KillTimeout time.Duration
	// DistinctHosts places at most one member on each Nomad client (a
	// distinct_hosts constraint): losing a host then costs one member,
	// not the quorum. Default true; off only for a demo or test on a
	// single Nomad client.
	DistinctHosts bool
	// PeerPort, when not 0, is a static peer port (Nomad's static port):
	// a member's peer URL is then the same after any stop, and a cluster
	// whose every member stopped ('nomad job stop', then 'nomad job run')
	// finds its quorum again from the data a host volume kept. With
	// dynamic ports each member comes back on a new port, and the others
	// still dial the old one. DefaultPeerPort with a host volume and
	// distinct_hosts, else 0 (Nomad picks).
	PeerPort int
	// Consul is how the members reach Consul from their Nomad client.
	Consul NomadConsul
	// Where is "file:line" of the nomad block (of the cluster block when
	// there is none), for the renderer's messages.
	Where string
}

// NomadArtifact is an etcd-nomad release the Nomad clients download into
// each allocation (Nomad's artifact block), checked against Checksum: a new
// release is a change of the job, which Nomad rolls out one member at a
// time, each waiting for the previous one's check.
type NomadArtifact struct {
	// Source is the archive's URL (go-getter): .tar.gz, .tgz, .tar.xz,
	// .txz, .tar.bz2, .tbz2, .tar.zst, .tzst, .tar or .zip, which Nomad
	// unpacks keeping the executable bit (a bare file would arrive
	// without it).
	Source string
	// Checksum is "sha256:<hex>" or "sha512:<hex>" of the archive.
	Checksum string
	// Path is the binary's path inside the unpacked archive; default
	// "etcd-nomad".
	Path string
}

// NomadConsul is the Consul agent the members use, as seen from the Nomad
// clients they run on. The rendered job passes it to the members as
// CONSUL_HTTP_ADDR, CONSUL_HTTP_SSL, CONSUL_CACERT and
// CONSUL_TLS_SERVER_NAME, never the renderer's own environment: the
// operator's Consul is rarely the clients' local agent.
type NomadConsul struct {
	// Address is host:port, or http://, https:// or unix:// and a path;
	// default DefaultNomadConsulAddress.
	Address string
	// CAFile, optional: the CA that signed the agent's HTTPS certificate,
	// a path on the clients. Setting it turns on TLS.
	CAFile string
	// TLSServerName, optional: the name checked in the agent's certificate
	// when it differs from the address's host.
	TLSServerName string
	// CertFile and KeyFile, optional (both or neither): the client
	// certificate the members present to an agent that verifies HTTPS
	// clients (Consul's tls { https { verify_incoming = true } }), paths
	// on the clients.
	CertFile, KeyFile string
}

// TLS reports whether the members talk to Consul over HTTPS.
func (c NomadConsul) TLS() bool {
	return c.CAFile != "" || c.TLSServerName != "" || c.CertFile != "" || strings.HasPrefix(c.Address, "https://")
}
