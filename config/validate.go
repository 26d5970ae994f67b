package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func (d *decoder) validate(c *Cluster, baseDir string) {
	if !nameRE.MatchString(c.Name) {
		d.errorf(d.rangeOf(), "Invalid cluster name", "Cluster name %q must be 1-63 lowercase letters, digits or dashes, starting and ending with a letter or digit.", c.Name)
	}
	if c.Provider.Kind == ProviderStatic && len(c.Provider.Static) > 0 {
		if c.Size == 0 {
			c.Size = len(c.Provider.Static)
		} else if c.Size != len(c.Provider.Static) {
			d.errorf(d.rangeOf("size"), "Size does not match the static members", "size = %d but the static provider lists %d members; a static cluster's size is its member count.", c.Size, len(c.Provider.Static))
		}
	}
	if c.Size == 0 {
		c.Size = DefaultSize
	}
	switch {
	case c.Size < 1 || c.Size > 9:
		d.errorf(d.rangeOf("size"), "Invalid size", "size must be between 1 and 9, got %d.", c.Size)
	case c.Size%2 == 0:
		d.warnf(d.rangeOf("size"), "Even cluster size", "size = %d tolerates no more failures than size = %d and needs one more vote for every write; an odd size is recommended.", c.Size, c.Size-1)
	}
	if c.DataDir == "" {
		if c.Provider.Kind == ProviderNomad {
			c.DataDir = "${NOMAD_ALLOC_DIR}/data"
		} else {
			d.errorf(d.rangeOf(), "Missing data_dir", "data_dir is required: the directory under which each member keeps its data (one sub-directory per member).")
		}
	} else if c.Provider.Kind != ProviderNomad && !filepath.IsAbs(c.DataDir) {
		c.DataDir = filepath.Join(baseDir, c.DataDir)
	}
	d.validatePorts("ports", c.Ports.Client, c.Ports.Peer, c.Ports.Status)
	switch c.Etcd.AutoCompactionMode {
	case "periodic", "revision":
	default:
		d.errorf(d.rangeOf("etcd", "auto_compaction_mode"), "Invalid auto_compaction_mode", "auto_compaction_mode must be \"periodic\" or \"revision\", got %q.", c.Etcd.AutoCompactionMode)
	}
	if c.Etcd.HeartbeatInterval <= 0 {
		d.errorf(d.rangeOf("etcd", "heartbeat_interval"), "Invalid heartbeat_interval", "heartbeat_interval must be positive.")
	} else if c.Etcd.ElectionTimeout < 5*c.Etcd.HeartbeatInterval {
		d.errorf(d.rangeOf("etcd", "election_timeout"), "Election timeout too short", "election_timeout (%s) must be at least 5 times heartbeat_interval (%s), as etcd requires.", c.Etcd.ElectionTimeout, c.Etcd.HeartbeatInterval)
	}
	switch c.TLS.Mode {
	case TLSAuto, TLSOff:
		for _, f := range []struct{ name, v string }{{"ca_file", c.TLS.CAFile}, {"cert_file", c.TLS.CertFile}, {"key_file", c.TLS.KeyFile}} {
			if f.v != "" {
				d.errorf(d.rangeOf("tls", f.name), "TLS file with mode "+c.TLS.Mode, "%s is only used with mode = \"files\"; remove it or set mode = \"files\".", f.name)
			}
		}
	case TLSFiles:
		for _, f := range []struct {
			name string
			v    *string
		}{{"ca_file", &c.TLS.CAFile}, {"cert_file", &c.TLS.CertFile}, {"key_file", &c.TLS.KeyFile}} {
			if *f.v == "" {
				d.errorf(d.rangeOf("tls"), "Missing TLS file", "mode = \"files\" needs %s.", f.name)
				continue
			}
			if !filepath.IsAbs(*f.v) {
				*f.v = filepath.Join(baseDir, *f.v)
			}
			if _, err := os.Stat(*f.v); err != nil {
				d.errorf(d.rangeOf("tls", f.name), "TLS file not readable", "%s: %s.", f.name, err)
			}
		}
	default:
		d.errorf(d.rangeOf("tls", "mode"), "Invalid TLS mode", "mode must be \"auto\", \"files\" or \"off\", got %q.", c.TLS.Mode)
	}
	d.validateProvider(c)
	d.validateCoordination(c, baseDir)
	if s := c.Snapshot; s != nil {
		switch s.StoreKind {
		case "file":
			if s.Path == "" {
				d.errorf(d.rangeOf("snapshot", "store"), "Missing path", "store \"file\" needs path.")
			}
		case "s3":
			if s.Bucket == "" {
				d.errorf(d.rangeOf("snapshot", "store"), "Missing bucket", "store \"s3\" needs bucket.")
			}
			if s.CAFile != "" {
				if strings.HasPrefix(s.Endpoint, "http://") {
					d.errorf(d.rangeOf("snapshot", "store", "ca_file"), "ca_file without TLS", "ca_file is for an https endpoint, but endpoint %q is plain http.", s.Endpoint)
				}
				if !filepath.IsAbs(s.CAFile) {
					s.CAFile = filepath.Join(baseDir, s.CAFile)
				}
				if _, err := os.Stat(s.CAFile); err != nil {
					d.errorf(d.rangeOf("snapshot", "store", "ca_file"), "CA file not readable", "ca_file: %s.", err)
				}
			}
		case "":
		default:
			d.errorf(d.rangeOf("snapshot", "store"), "Unknown snapshot store", "store %q is not one of \"file\", \"s3\".", s.StoreKind)
		}
		if s.RetainCount < 1 {
			d.errorf(d.rangeOf("snapshot", "retain_count"), "Invalid retain_count", "retain_count must be at least 1: the newest snapshot is never deleted.")
		}
		if s.StoreKind == "file" && s.Path != "" && !filepath.IsAbs(s.Path) {
			s.Path = filepath.Join(baseDir, s.Path)
		}
	}
	switch c.Nomad.Driver {
	case "raw_exec", "exec", "docker":
	default:
		d.errorf(d.rangeOf("nomad", "driver"), "Invalid driver", "driver must be \"raw_exec\", \"exec\" or \"docker\", got %q.", c.Nomad.Driver)
	}
}

func (d *decoder) validatePorts(block string, client, peer, status int) {
	ports := []struct {
		name string
		v    int
	}{{"client", client}, {"peer", peer}, {"status", status}}
	seen := map[int]string{}
	for _, p := range ports {
		rng := d.rangeOf(block, p.name)
		if p.v < 1 || p.v > 65535 {
			d.errorf(rng, "Invalid port", "%s port %d is not between 1 and 65535.", p.name, p.v)
			continue
		}
		if other, ok := seen[p.v]; ok {
			d.errorf(rng, "Duplicate port", "%s and %s ports are both %d; each needs its own port.", other, p.name, p.v)
		}
		seen[p.v] = p.name
	}
}

func (d *decoder) validateProvider(c *Cluster) {
	p := &c.Provider
	if p.StaleAfter <= 0 && p.Kind != "" {
		d.errorf(d.rangeOf("provider", "stale_after"), "Invalid stale_after", "stale_after must be positive.")
	}
	switch p.Kind {
	case ProviderStatic:
		if len(p.Static) == 0 {
			d.errorf(d.rangeOf("provider"), "No static members", "provider \"static\" needs at least one member block.")
		}
		names := map[string]bool{}
		endpoints := map[string]string{}
		for i := range p.Static {
			m := &p.Static[i]
			if m.ClientPort == 0 {
				m.ClientPort = c.Ports.Client
			}
			if m.PeerPort == 0 {
				m.PeerPort = c.Ports.Peer
			}
			if m.StatusPort == 0 {
				m.StatusPort = c.Ports.Status
			}
			rng := d.memberRange(i)
			if !nameRE.MatchString(m.Name) {
				d.errorf(rng, "Invalid member name", "Member name %q must be lowercase letters, digits or dashes.", m.Name)
			}
			if names[m.Name] {
				d.errorf(rng, "Duplicate member name", "Member %q is listed twice.", m.Name)
			}
			names[m.Name] = true
			if m.Address == "" {
				d.errorf(rng, "Missing address", "Member %q needs an address.", m.Name)
			}
			for _, port := range []int{m.ClientPort, m.PeerPort, m.StatusPort} {
				ep := fmt.Sprintf("%s:%d", m.Address, port)
				if other, ok := endpoints[ep]; ok {
					d.errorf(rng, "Port clash", "Member %q uses %s, which member %q uses already.", m.Name, ep, other)
				}
				endpoints[ep] = m.Name
			}
		}
	case ProviderASG:
		if p.ReplaceAfter > 0 && p.ReplaceAfter < p.StaleAfter {
			d.errorf(d.rangeOf("provider", "replace_after"), "replace_after too short", "replace_after (%s) must not be shorter than stale_after (%s): a member must get the chance to come back before its instance is replaced.", p.ReplaceAfter, p.StaleAfter)
		}
		if p.ASG.Name == "" {
			d.errorf(d.rangeOf("provider", "name"), "Missing name", "provider \"asg\" needs the auto-scaling group's name.")
		}
	}
}

func (d *decoder) memberRange(i int) *hcl.Range {
	if p := firstBlock(d.body, "provider"); p != nil {
		n := 0
		for _, b := range p.Body.Blocks {
			if b.Type == "member" {
				if n == i {
					r := b.DefRange()
					return &r
				}
				n++
			}
		}
	}
	return d.rangeOf("provider")
}

func (d *decoder) validateCoordination(c *Cluster, baseDir string) {
	switch c.Coordination.Kind {
	case CoordLocal:
		if c.Coordination.Dir == "" {
			d.errorf(d.rangeOf("coordination", "dir"), "Missing dir", "coordination \"local\" needs dir, a directory shared by all members.")
		} else if !filepath.IsAbs(c.Coordination.Dir) {
			c.Coordination.Dir = filepath.Join(baseDir, c.Coordination.Dir)
		}
	case CoordConsul:
		if c.Coordination.SessionTTL < 10*1e9 || c.Coordination.SessionTTL > 86400*1e9 {
			d.errorf(d.rangeOf("coordination", "session_ttl"), "Invalid session_ttl", "Consul accepts session TTLs between 10s and 24h, got %s.", c.Coordination.SessionTTL)
		}
	}
}
