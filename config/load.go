package config

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// The raw HCL schema. Optional fields are pointers so that defaults can be
// told apart from explicit values.
type fileSchema struct {
	Clusters []clusterSchema `hcl:"cluster,block"`
}

type clusterSchema struct {
	Name          string              `hcl:"name,label"`
	Size          *int                `hcl:"size,optional"`
	RecoveryGrace *string             `hcl:"recovery_grace,optional"`
	DataDir       *string             `hcl:"data_dir,optional"`
	Ports         *portsSchema        `hcl:"ports,block"`
	Etcd          *etcdSchema         `hcl:"etcd,block"`
	TLS           *tlsSchema          `hcl:"tls,block"`
	Provider      *providerSchema     `hcl:"provider,block"`
	Coordination  *coordinationSchema `hcl:"coordination,block"`
	Snapshot      *snapshotSchema     `hcl:"snapshot,block"`
	Nomad         *nomadSchema        `hcl:"nomad,block"`
	Access        *accessBlock        `hcl:"access,block"`
}

// accessBlock is decoded in a second step (config/access.go).
type accessBlock struct {
	Remain hcl.Body `hcl:",remain"`
}

type portsSchema struct {
	Client *int `hcl:"client,optional"`
	Peer   *int `hcl:"peer,optional"`
	Status *int `hcl:"status,optional"`
}

type etcdSchema struct {
	QuotaBackendBytes       *string  `hcl:"quota_backend_bytes,optional"`
	AutoCompactionMode      *string  `hcl:"auto_compaction_mode,optional"`
	AutoCompactionRetention *string  `hcl:"auto_compaction_retention,optional"`
	HeartbeatInterval       *string  `hcl:"heartbeat_interval,optional"`
	ElectionTimeout         *string  `hcl:"election_timeout,optional"`
	SnapshotCount           *int     `hcl:"snapshot_count,optional"`
	DefragRatio             *float64 `hcl:"defrag_ratio,optional"`
	DefragMinSize           *string  `hcl:"defrag_min_size,optional"`
	CorruptCheckInterval    *string  `hcl:"corrupt_check_interval,optional"`
}

type tlsSchema struct {
	Mode     *string `hcl:"mode,optional"`
	CAFile   *string `hcl:"ca_file,optional"`
	CertFile *string `hcl:"cert_file,optional"`
	KeyFile  *string `hcl:"key_file,optional"`
	// CertificateTTL: mode "auto" only.
	CertificateTTL *string `hcl:"certificate_ttl,optional"`
}

type providerSchema struct {
	Kind   string   `hcl:"kind,label"`
	Remain hcl.Body `hcl:",remain"`
}

type staticSchema struct {
	StaleAfter *string              `hcl:"stale_after,optional"`
	Members    []staticMemberSchema `hcl:"member,block"`
}

type staticMemberSchema struct {
	Name       string `hcl:"name,label"`
	Address    string `hcl:"address"`
	ClientPort *int   `hcl:"client_port,optional"`
	PeerPort   *int   `hcl:"peer_port,optional"`
	StatusPort *int   `hcl:"status_port,optional"`
}

type nomadProviderSchema struct {
	StaleAfter *string         `hcl:"stale_after,optional"`
	Job        *string         `hcl:"job,optional"`
	Group      *string         `hcl:"group,optional"`
	Namespace  *string         `hcl:"namespace,optional"`
	ASG        *nomadASGSchema `hcl:"asg,block"`
}

type nomadASGSchema struct {
	Name          string  `hcl:"name"`
	Region        *string `hcl:"region,optional"`
	Endpoint      *string `hcl:"endpoint,optional"`
	LifecycleHook *string `hcl:"lifecycle_hook,optional"`
	ReplaceAfter  *string `hcl:"replace_after,optional"`
	NodeAttribute *string `hcl:"node_attribute,optional"`
}

type asgProviderSchema struct {
	StaleAfter    *string `hcl:"stale_after,optional"`
	ReplaceAfter  *string `hcl:"replace_after,optional"`
	Name          string  `hcl:"name"`
	Region        *string `hcl:"region,optional"`
	Endpoint      *string `hcl:"endpoint,optional"`
	IMDSEndpoint  *string `hcl:"imds_endpoint,optional"`
	LifecycleHook *string `hcl:"lifecycle_hook,optional"`
}

type coordinationSchema struct {
	Kind   string   `hcl:"kind,label"`
	Remain hcl.Body `hcl:",remain"`
}

type localCoordSchema struct {
	Dir string `hcl:"dir"`
}

type consulCoordSchema struct {
	Prefix     *string `hcl:"prefix,optional"`
	SessionTTL *string `hcl:"session_ttl,optional"`
}

type snapshotSchema struct {
	Interval    *string           `hcl:"interval,optional"`
	Deltas      *string           `hcl:"delta_interval,optional"`
	RetainCount *int              `hcl:"retain_count,optional"`
	RetainAge   *string           `hcl:"retain_age,optional"`
	Store       *snapStoreSchema  `hcl:"store,block"`
	Encryption  *encryptionSchema `hcl:"encryption,block"`
}

type encryptionSchema struct {
	PassphraseEnv *string   `hcl:"passphrase_env,optional"`
	Recipients    *[]string `hcl:"recipients,optional"`
	IdentityFile  *string   `hcl:"identity_file,optional"`
}

type snapStoreSchema struct {
	Kind      string  `hcl:"kind,label"`
	Path      *string `hcl:"path,optional"`
	Bucket    *string `hcl:"bucket,optional"`
	Prefix    *string `hcl:"prefix,optional"`
	Endpoint  *string `hcl:"endpoint,optional"`
	Region    *string `hcl:"region,optional"`
	PathStyle *bool   `hcl:"path_style,optional"`
	CAFile    *string `hcl:"ca_file,optional"`
}

type nomadSchema struct {
	Job         *string              `hcl:"job,optional"`
	Datacenters *[]string            `hcl:"datacenters,optional"`
	Namespace   *string              `hcl:"namespace,optional"`
	Region      *string              `hcl:"region,optional"`
	Driver      *string              `hcl:"driver,optional"`
	CPU         *int                 `hcl:"cpu,optional"`
	MemoryMB    *int                 `hcl:"memory_mb,optional"`
	Binary      *string              `hcl:"binary,optional"`
	Image       *string              `hcl:"image,optional"`
	Artifact    *nomadArtifactSchema `hcl:"artifact,block"`
	HostVolume  *string              `hcl:"host_volume,optional"`
	User        *string              `hcl:"user,optional"`
	KillTimeout *string              `hcl:"kill_timeout,optional"`
	// DistinctHosts: one member per Nomad client (default true).
	DistinctHosts *bool              `hcl:"distinct_hosts,optional"`
	PeerPort      *int               `hcl:"peer_port,optional"`
	Consul        *nomadConsulSchema `hcl:"consul,block"`
}

type nomadArtifactSchema struct {
	Source   string  `hcl:"source"`
	Checksum string  `hcl:"checksum"`
	Path     *string `hcl:"path,optional"`
}

type nomadConsulSchema struct {
	Address       *string `hcl:"address,optional"`
	CAFile        *string `hcl:"ca_file,optional"`
	TLSServerName *string `hcl:"tls_server_name,optional"`
	CertFile      *string `hcl:"cert_file,optional"`
	KeyFile       *string `hcl:"key_file,optional"`
}

// Result is what Load returns besides the cluster: the parser's files, for
// printing diagnostics with source snippets.
type Result struct {
	Files map[string]*hcl.File
}

// WriteDiagnostics prints diags the way Terraform does: file, line and a
// source snippet for each, then one FILE:LINE:COL line per diagnostic (the
// form editors and grep understand; HCL's own text names no column).
func (r Result) WriteDiagnostics(w io.Writer, diags hcl.Diagnostics) error {
	wr := hcl.NewDiagnosticTextWriter(w, r.Files, 100, false)
	if err := wr.WriteDiagnostics(diags); err != nil {
		return err
	}
	for _, d := range diags {
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		loc := "-"
		if d.Subject != nil {
			loc = fmt.Sprintf("%s:%d:%d", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
		}
		if _, err := fmt.Fprintf(w, "%s: %s: %s\n", loc, sev, d.Summary); err != nil {
			return err
		}
	}
	return nil
}

// LoadFile reads and validates the cluster definition at path.
func LoadFile(path string) (*Cluster, Result, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, Result{}, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read cluster definition",
			Detail:   fmt.Sprintf("read %s: %s", path, err),
		}}
	}
	return Load(path, src)
}

// Load parses src (named filename in diagnostics), decodes it, fills
// defaults and validates. It returns all problems at once. The cluster is
// nil when diags has errors.
func Load(filename string, src []byte) (*Cluster, Result, hcl.Diagnostics) {
	p := hclparse.NewParser()
	f, diags := p.ParseHCL(src, filename)
	res := Result{Files: p.Files()}
	if diags.HasErrors() {
		return nil, res, diags
	}
	var fs fileSchema
	diags = append(diags, gohcl.DecodeBody(f.Body, nil, &fs)...)
	if diags.HasErrors() {
		return nil, res, diags
	}
	body := f.Body.(*hclsyntax.Body)
	if len(fs.Clusters) != 1 {
		rng := body.SrcRange
		if len(fs.Clusters) > 1 {
			rng = body.Blocks[1].DefRange()
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Exactly one cluster block required",
			Detail:   fmt.Sprintf("The file defines %d cluster blocks; a cluster definition holds exactly one.", len(fs.Clusters)),
			Subject:  &rng,
		})
		return nil, res, diags
	}
	d := &decoder{body: firstBlock(body, "cluster").Body}
	c := d.cluster(fs.Clusters[0])
	c.File = filename
	c.Source = src
	d.validate(c, filepath.Dir(filename))
	diags = append(diags, d.diags...)
	if diags.HasErrors() {
		return nil, res, diags
	}
	return c, res, diags
}

func firstBlock(b *hclsyntax.Body, typ string) *hclsyntax.Block {
	for _, blk := range b.Blocks {
		if blk.Type == typ {
			return blk
		}
	}
	return nil
}

// decoder turns the schema into a Cluster and remembers where each setting
// came from, so semantic errors can point at it.
type decoder struct {
	body  *hclsyntax.Body
	diags hcl.Diagnostics
	// sizeSet tells an explicit size (which must be valid, 0 included)
	// from an absent one (which takes a default).
	sizeSet bool
}

// rangeOf finds the source range of the attribute at path (block types then
// an attribute name), falling back to the closest enclosing block.
func (d *decoder) rangeOf(path ...string) *hcl.Range {
	b := d.body
	rng := b.SrcRange
	for i, name := range path {
		if i == len(path)-1 {
			if a, ok := b.Attributes[name]; ok {
				r := a.Expr.Range()
				return &r
			}
		}
		blk := firstBlock(b, name)
		if blk == nil {
			break
		}
		rng = blk.DefRange()
		b = blk.Body
	}
	return &rng
}

func (d *decoder) errorf(rng *hcl.Range, summary, format string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail(format, args), Subject: rng})
}

func (d *decoder) warnf(rng *hcl.Range, summary, format string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: summary, Detail: detail(format, args), Subject: rng})
}

// detail formats a diagnostic's text, durations the way people write them
// ("2m", "24h"; not "2m0s", "24h0m0s").
func detail(format string, args []any) string {
	for i, a := range args {
		if v, ok := a.(time.Duration); ok {
			args[i] = short(v)
		}
	}
	return fmt.Sprintf(format, args...)
}

func (d *decoder) duration(s *string, def time.Duration, path ...string) time.Duration {
	if s == nil {
		return def
	}
	v, err := time.ParseDuration(*s)
	if err != nil || v < 0 {
		d.errorf(d.rangeOf(path...), "Invalid duration", "%s: %q is not a duration such as \"500ms\", \"30s\" or \"1h\".", path[len(path)-1], *s)
		return def
	}
	return v
}

func str(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

// taskUser is a user name or a numeric uid, what Nomad's task user takes.
var taskUser = regexp.MustCompile(`^([a-z_][a-z0-9_-]{0,31}|[0-9]{1,10})$`)

func num(n *int, def int) int {
	if n == nil {
		return def
	}
	return *n
}

func (d *decoder) cluster(s clusterSchema) *Cluster {
	c := &Cluster{
		Name:    s.Name,
		Size:    num(s.Size, 0),
		DataDir: str(s.DataDir, ""),
		Ports:   Ports{Client: DefaultClientPort, Peer: DefaultPeerPort, Status: DefaultStatusPort},
		Etcd: Etcd{
			QuotaBackendBytes:       DefaultQuotaBackendBytes,
			AutoCompactionMode:      DefaultCompactionMode,
			AutoCompactionRetention: DefaultCompactionRetain,
			HeartbeatInterval:       DefaultHeartbeat,
			ElectionTimeout:         DefaultElection,
			SnapshotCount:           DefaultSnapshotCount,
			DefragRatio:             DefaultDefragRatio,
			DefragMinSize:           DefaultDefragMinSize,
			CorruptCheckInterval:    DefaultCorruptCheckInterval,
		},
		TLS: TLS{Mode: TLSAuto, CertificateTTL: DefaultMemberCertTTL},
	}
	d.sizeSet = s.Size != nil
	c.RecoveryGrace = d.duration(s.RecoveryGrace, DefaultRecoveryGrace, "recovery_grace")
	if p := s.Ports; p != nil {
		c.Ports.Client = num(p.Client, c.Ports.Client)
		c.Ports.Peer = num(p.Peer, c.Ports.Peer)
		c.Ports.Status = num(p.Status, c.Ports.Status)
	}
	if e := s.Etcd; e != nil {
		if e.QuotaBackendBytes != nil {
			v, err := humanize.ParseBytes(*e.QuotaBackendBytes)
			if err != nil || v == 0 || v > math.MaxInt64 {
				d.errorf(d.rangeOf("etcd", "quota_backend_bytes"), "Invalid size", "quota_backend_bytes: %q is not a size such as \"2GiB\" or \"512MiB\".", *e.QuotaBackendBytes)
			} else {
				c.Etcd.QuotaBackendBytes = int64(v)
			}
		}
		c.Etcd.AutoCompactionMode = str(e.AutoCompactionMode, c.Etcd.AutoCompactionMode)
		c.Etcd.AutoCompactionRetention = str(e.AutoCompactionRetention, c.Etcd.AutoCompactionRetention)
		c.Etcd.HeartbeatInterval = d.duration(e.HeartbeatInterval, c.Etcd.HeartbeatInterval, "etcd", "heartbeat_interval")
		c.Etcd.ElectionTimeout = d.duration(e.ElectionTimeout, c.Etcd.ElectionTimeout, "etcd", "election_timeout")
		c.Etcd.CorruptCheckInterval = d.duration(e.CorruptCheckInterval, c.Etcd.CorruptCheckInterval, "etcd", "corrupt_check_interval")
		if e.SnapshotCount != nil {
			if *e.SnapshotCount <= 0 {
				d.errorf(d.rangeOf("etcd", "snapshot_count"), "Invalid snapshot_count", "snapshot_count must be positive, got %d.", *e.SnapshotCount)
			} else {
				c.Etcd.SnapshotCount = uint64(*e.SnapshotCount)
			}
		}
		if e.DefragRatio != nil {
			if r := *e.DefragRatio; r < 0 || r >= 1 || math.IsNaN(r) {
				d.errorf(d.rangeOf("etcd", "defrag_ratio"), "Invalid defrag_ratio", "defrag_ratio is the share of a member's database that is free pages before it is defragmented: 0 (off) or more, below 1; got %v.", r)
			} else {
				c.Etcd.DefragRatio = r
			}
		}
		if e.DefragMinSize != nil {
			v, err := humanize.ParseBytes(*e.DefragMinSize)
			if err != nil || v > math.MaxInt64 {
				d.errorf(d.rangeOf("etcd", "defrag_min_size"), "Invalid size", "defrag_min_size: %q is not a size such as \"64MiB\".", *e.DefragMinSize)
			} else {
				c.Etcd.DefragMinSize = int64(v)
			}
		}
	}
	if t := s.TLS; t != nil {
		c.TLS.Mode = str(t.Mode, TLSAuto)
		c.TLS.CAFile = str(t.CAFile, "")
		c.TLS.CertFile = str(t.CertFile, "")
		c.TLS.KeyFile = str(t.KeyFile, "")
		c.TLS.CertificateTTL = d.duration(t.CertificateTTL, DefaultMemberCertTTL, "tls", "certificate_ttl")
		if t.CertificateTTL != nil && c.TLS.Mode != TLSAuto {
			d.errorf(d.rangeOf("tls", "certificate_ttl"), "certificate_ttl with mode "+c.TLS.Mode, "certificate_ttl is the validity of the certificates members issue themselves in mode = \"auto\"; with mode %q they issue none: remove it.", c.TLS.Mode)
		} else if c.TLS.CertificateTTL < MinMemberCertTTL {
			d.errorf(d.rangeOf("tls", "certificate_ttl"), "certificate_ttl too short", "certificate_ttl %s is below %s: renewal at two thirds of it would leave no margin.", c.TLS.CertificateTTL, MinMemberCertTTL)
		}
	}
	if s.Provider == nil {
		d.errorf(d.rangeOf(), "Missing provider block", "A cluster needs a provider block: provider \"nomad\", provider \"asg\" or provider \"static\".")
	} else {
		c.Provider = d.provider(*s.Provider, c.Ports)
	}
	if s.Coordination == nil {
		d.errorf(d.rangeOf(), "Missing coordination block", "A cluster needs a coordination block: coordination \"consul\" or coordination \"local\".")
	} else {
		c.Coordination = d.coordination(*s.Coordination)
	}
	if s.Snapshot != nil {
		c.Snapshot = d.snapshot(*s.Snapshot)
	}
	c.Nomad = NomadJob{Job: c.Name, Datacenters: []string{"dc1"}, Driver: "raw_exec", CPU: 500, MemoryMB: 512, KillTimeout: 30 * time.Second, DistinctHosts: true, Consul: NomadConsul{Address: DefaultNomadConsulAddress}}
	if r := d.rangeOf("nomad"); r != nil {
		c.Nomad.Where = fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
	}
	if n := s.Nomad; n != nil {
		c.Nomad.Job = str(n.Job, c.Nomad.Job)
		if n.Datacenters != nil {
			c.Nomad.Datacenters = *n.Datacenters
		}
		c.Nomad.Namespace = str(n.Namespace, "")
		c.Nomad.Region = str(n.Region, "")
		c.Nomad.Driver = str(n.Driver, c.Nomad.Driver)
		c.Nomad.CPU = num(n.CPU, c.Nomad.CPU)
		c.Nomad.MemoryMB = num(n.MemoryMB, c.Nomad.MemoryMB)
		c.Nomad.Binary = str(n.Binary, "")
		c.Nomad.Image = str(n.Image, "")
		if a := n.Artifact; a != nil {
			c.Nomad.Artifact = &NomadArtifact{Source: a.Source, Checksum: a.Checksum, Path: str(a.Path, DefaultArtifactPath)}
		}
		c.Nomad.HostVolume = str(n.HostVolume, "")
		c.Nomad.User = str(n.User, "")
		if c.Nomad.User != "" && !taskUser.MatchString(c.Nomad.User) {
			d.errorf(d.rangeOf("nomad", "user"), "Invalid user", "user = %q is not a user name or a numeric uid (as in \"etcd\" or \"999\").", c.Nomad.User)
		}
		c.Nomad.KillTimeout = d.duration(n.KillTimeout, c.Nomad.KillTimeout, "nomad", "kill_timeout")
		c.Nomad.DistinctHosts = n.DistinctHosts == nil || *n.DistinctHosts
		if c.Nomad.HostVolume != "" && c.Nomad.DistinctHosts {
			c.Nomad.PeerPort = DefaultPeerPort
		}
		c.Nomad.PeerPort = num(n.PeerPort, c.Nomad.PeerPort)
		switch {
		case c.Nomad.PeerPort < 0 || c.Nomad.PeerPort > 65535:
			d.errorf(d.rangeOf("nomad", "peer_port"), "Invalid peer_port", "peer_port = %d is not a port: use 1 to 65535, or 0 for a port Nomad picks.", c.Nomad.PeerPort)
		case c.Nomad.PeerPort > 0 && !c.Nomad.DistinctHosts:
			d.errorf(d.rangeOf("nomad", "peer_port"), "Static peer port on shared clients", "peer_port = %d with distinct_hosts = false: members placed on one Nomad client would all claim that port. Remove peer_port (Nomad then picks one per member), or keep distinct_hosts on.", c.Nomad.PeerPort)
		}
		if cs := n.Consul; cs != nil {
			c.Nomad.Consul = NomadConsul{Address: str(cs.Address, DefaultNomadConsulAddress), CAFile: str(cs.CAFile, ""), TLSServerName: str(cs.TLSServerName, ""), CertFile: str(cs.CertFile, ""), KeyFile: str(cs.KeyFile, "")}
		}
	}
	if s.Access != nil {
		c.Access = d.access(s.Access.Remain)
	}
	if c.Snapshot != nil && c.Snapshot.PassphraseEnv != "" && c.Provider.Kind == ProviderNomad && c.Nomad.MemoryMB < MinMemoryMBScrypt {
		d.errorf(d.rangeOf("nomad", "memory_mb"), "Too little memory for passphrase encryption",
			"snapshot encryption with passphrase_env uses age's scrypt, which needs 256 MiB for every snapshot on top of etcd's own memory; with memory_mb = %d Nomad would kill the member during its first snapshot. Set memory_mb to at least %d, or encrypt to recipients (X25519 keys need no scrypt).",
			c.Nomad.MemoryMB, MinMemoryMBScrypt)
	}
	return c
}

// MinMemoryMBScrypt is the smallest Nomad memory_mb that leaves room for
// age's scrypt (N=2^18, r=8: 256 MiB) beside etcd.
const MinMemoryMBScrypt = 384

// provider decodes the provider block; ports are the cluster's, the
// default of every static member's.
func (d *decoder) provider(s providerSchema, ports Ports) Provider {
	p := Provider{Kind: s.Kind, StaleAfter: DefaultStaleAfter}
	switch s.Kind {
	case ProviderStatic:
		var st staticSchema
		d.diags = append(d.diags, gohcl.DecodeBody(s.Remain, nil, &st)...)
		p.StaleAfter = d.duration(st.StaleAfter, p.StaleAfter, "provider", "stale_after")
		for _, m := range st.Members {
			p.Static = append(p.Static, StaticMember{
				Name: m.Name, Address: m.Address,
				ClientPort: num(m.ClientPort, ports.Client), PeerPort: num(m.PeerPort, ports.Peer), StatusPort: num(m.StatusPort, ports.Status),
			})
		}
	case ProviderNomad:
		var n nomadProviderSchema
		d.diags = append(d.diags, gohcl.DecodeBody(s.Remain, nil, &n)...)
		// Not before Nomad itself gives a disconnected allocation up.
		p.StaleAfter = d.duration(n.StaleAfter, NomadLostAfter, "provider", "stale_after")
		p.Nomad = NomadProvider{Job: str(n.Job, ""), Group: str(n.Group, "etcd"), Namespace: str(n.Namespace, "")}
		if a := n.ASG; a != nil {
			p.ReplaceAfter = d.duration(a.ReplaceAfter, 0, "provider", "asg", "replace_after")
			p.Nomad.ASG = &ASGProvider{Name: a.Name, Region: str(a.Region, ""), Endpoint: str(a.Endpoint, ""), LifecycleHook: str(a.LifecycleHook, "")}
			p.Nomad.NodeAttribute = str(a.NodeAttribute, "unique.platform.aws.instance-id")
		}
	case ProviderASG:
		var a asgProviderSchema
		d.diags = append(d.diags, gohcl.DecodeBody(s.Remain, nil, &a)...)
		p.StaleAfter = d.duration(a.StaleAfter, p.StaleAfter, "provider", "stale_after")
		p.ReplaceAfter = d.duration(a.ReplaceAfter, 0, "provider", "replace_after")
		p.ASG = ASGProvider{Name: a.Name, Region: str(a.Region, ""), Endpoint: str(a.Endpoint, ""), IMDSEndpoint: str(a.IMDSEndpoint, ""), LifecycleHook: str(a.LifecycleHook, "")}
	default:
		d.errorf(d.rangeOf("provider"), "Unknown provider", "Provider %q is not one of \"nomad\", \"asg\", \"static\".", s.Kind)
	}
	return p
}

func (d *decoder) coordination(s coordinationSchema) Coordination {
	c := Coordination{Kind: s.Kind}
	switch s.Kind {
	case CoordLocal:
		var l localCoordSchema
		d.diags = append(d.diags, gohcl.DecodeBody(s.Remain, nil, &l)...)
		c.Dir = l.Dir
	case CoordConsul:
		var cs consulCoordSchema
		d.diags = append(d.diags, gohcl.DecodeBody(s.Remain, nil, &cs)...)
		c.Prefix = str(cs.Prefix, "etcd-nomad")
		c.SessionTTL = d.duration(cs.SessionTTL, 15*time.Second, "coordination", "session_ttl")
	default:
		d.errorf(d.rangeOf("coordination"), "Unknown coordination", "Coordination %q is not one of \"consul\", \"local\".", s.Kind)
	}
	return c
}

func (d *decoder) snapshot(s snapshotSchema) *Snapshot {
	sn := &Snapshot{
		Interval:    d.duration(s.Interval, 30*time.Minute, "snapshot", "interval"),
		RetainCount: num(s.RetainCount, 24),
		RetainAge:   d.duration(s.RetainAge, 7*24*time.Hour, "snapshot", "retain_age"),
	}
	if s.Store == nil {
		d.errorf(d.rangeOf("snapshot"), "Missing snapshot store", "A snapshot block needs a store block: store \"file\" { path = ... } or store \"s3\" { bucket = ... }.")
		return sn
	}
	st := s.Store
	sn.StoreKind = st.Kind
	sn.Path = str(st.Path, "")
	sn.Bucket = str(st.Bucket, "")
	sn.Endpoint = str(st.Endpoint, "")
	sn.Region = str(st.Region, "")
	sn.PathStyle = st.PathStyle != nil && *st.PathStyle
	sn.Prefix = str(st.Prefix, "")
	sn.CAFile = str(st.CAFile, "")
	if e := s.Encryption; e != nil {
		sn.PassphraseEnv = str(e.PassphraseEnv, "")
		if e.Recipients != nil {
			sn.Recipients = *e.Recipients
		}
		sn.IdentityFile = str(e.IdentityFile, "")
		if sn.PassphraseEnv == "" && len(sn.Recipients) == 0 {
			d.errorf(d.rangeOf("snapshot", "encryption"), "Encryption without a key", "An encryption block needs passphrase_env or recipients; snapshots are never written in plaintext when encryption was asked for.")
		}
		if sn.PassphraseEnv != "" && len(sn.Recipients) > 0 {
			d.errorf(d.rangeOf("snapshot", "encryption"), "Two encryption keys", "Give passphrase_env or recipients, not both.")
		}
	}
	// Continuous backup: on by default. A passphrase costs one scrypt
	// derivation (256 MiB, about a second of CPU) per segment, so its
	// default flushes less often.
	deltaDefault := DefaultDeltaInterval
	if sn.PassphraseEnv != "" {
		deltaDefault = DefaultDeltaIntervalScrypt
	}
	sn.DeltaInterval = d.duration(s.Deltas, deltaDefault, "snapshot", "delta_interval")
	return sn
}
