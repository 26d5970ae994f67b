package config

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
)

// Access is etcd's authorization as the definition declares it: roles
// granting key prefixes, users bound to roles. The member holding the lock
// makes etcd match it (auth on, exactly these roles and users besides
// root): a rule removed here is revoked there. Users authenticate by the
// CN of their client certificate, never by password.
type Access struct {
	Roles []Role
	Users []User
	// CertificateTTL is the validity of the certificates the members'
	// exchange endpoint issues to workloads (DefaultCertificateTTL); the
	// creds sidecar renews at two thirds of it.
	CertificateTTL time.Duration
}

// Bounds of access.certificate_ttl.
const (
	DefaultCertificateTTL = time.Hour
	MinCertificateTTL     = 10 * time.Second
	MaxCertificateTTL     = 30 * 24 * time.Hour
)

// Role grants key prefixes: each entry is a prefix, every key that starts
// with it is covered.
type Role struct {
	Name      string
	ReadWrite []string
	Read      []string
	Write     []string
}

// User is an etcd user, bound to roles.
type User struct {
	Name  string
	Roles []string
	// NomadJobs are the Nomad jobs, "job" (namespace default) or
	// "namespace/job", whose workloads may obtain a certificate as this
	// user from the members' exchange endpoint with their workload
	// identity.
	NomadJobs []string
}

// User returns the declared user name, or nil.
func (a *Access) User(name string) *User {
	for i := range a.Users {
		if a.Users[i].Name == name {
			return &a.Users[i]
		}
	}
	return nil
}

// UserForJob returns the user whose nomad_jobs name namespace/job, or nil.
func (a *Access) UserForJob(namespace, job string) *User {
	if namespace == "" {
		namespace = "default"
	}
	for i := range a.Users {
		for _, j := range a.Users[i].NomadJobs {
			ns, name := SplitNomadJob(j)
			if ns == namespace && name == job {
				return &a.Users[i]
			}
		}
	}
	return nil
}

// SplitNomadJob splits "namespace/job"; a bare "job" is in namespace
// default.
func SplitNomadJob(s string) (namespace, job string) {
	if ns, j, ok := strings.Cut(s, "/"); ok {
		return ns, j
	}
	return "default", s
}

type accessSchema struct {
	CertificateTTL *string      `hcl:"certificate_ttl,optional"`
	Roles          []roleSchema `hcl:"role,block"`
	Users          []userSchema `hcl:"user,block"`
}

type roleSchema struct {
	Name      string    `hcl:"name,label"`
	ReadWrite *[]string `hcl:"read_write,optional"`
	Read      *[]string `hcl:"read,optional"`
	Write     *[]string `hcl:"write,optional"`
}

type userSchema struct {
	Name      string    `hcl:"name,label"`
	Roles     *[]string `hcl:"roles,optional"`
	NomadJobs *[]string `hcl:"nomad_jobs,optional"`
}

func list(p *[]string) []string {
	if p == nil {
		return nil
	}
	return *p
}

func (d *decoder) access(body hcl.Body) *Access {
	var s accessSchema
	d.diags = append(d.diags, gohcl.DecodeBody(body, nil, &s)...)
	a := &Access{CertificateTTL: d.duration(s.CertificateTTL, DefaultCertificateTTL, "access", "certificate_ttl")}
	for _, r := range s.Roles {
		a.Roles = append(a.Roles, Role{Name: r.Name, ReadWrite: list(r.ReadWrite), Read: list(r.Read), Write: list(r.Write)})
	}
	for _, u := range s.Users {
		a.Users = append(a.Users, User{Name: u.Name, Roles: list(u.Roles), NomadJobs: list(u.NomadJobs)})
	}
	return a
}

// accessNameRE bounds role and user names: they become certificate CNs
// and appear in etcdctl commands.
var accessNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// nomadJobRE is a Nomad job id, optionally after "namespace/".
var nomadJobRE = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (d *decoder) validateAccess(c *Cluster) {
	a := c.Access
	if a == nil {
		return
	}
	if c.TLS.Mode != TLSAuto {
		d.errorf(d.rangeOf("access"), "Access rules need TLS auto",
			"etcd names a client by its certificate's CN; with tls mode %q the members hold no CA to issue themselves a root certificate (to apply the rules) nor applications theirs. Use mode = \"auto\" or remove the access block.", c.TLS.Mode)
	}
	if a.CertificateTTL < MinCertificateTTL || a.CertificateTTL > MaxCertificateTTL {
		d.errorf(d.rangeOf("access", "certificate_ttl"), "Invalid certificate_ttl", "certificate_ttl must be between %s and %s, got %s.", MinCertificateTTL, MaxCertificateTTL, a.CertificateTTL)
	}
	roles := map[string]bool{}
	for i, r := range a.Roles {
		rng := d.accessRange("role", i, "")
		switch {
		case r.Name == "root":
			d.errorf(rng, "Reserved role name", "Role \"root\" is etcd's administrator role; the members use it themselves. Choose another name.")
		case !accessNameRE.MatchString(r.Name):
			d.errorf(rng, "Invalid role name", "Role name %q must be 1-64 letters, digits, dots, dashes or underscores.", r.Name)
		case roles[r.Name]:
			d.errorf(rng, "Duplicate role", "Role %q is declared twice.", r.Name)
		}
		roles[r.Name] = true
		seen := map[string]string{}
		for _, g := range []struct {
			attr     string
			prefixes []string
		}{{"read_write", r.ReadWrite}, {"read", r.Read}, {"write", r.Write}} {
			for _, p := range g.prefixes {
				if p == "" {
					d.errorf(d.accessRange("role", i, g.attr), "Empty key prefix", "Role %q: %s has an empty prefix; name the keys' common beginning, such as \"/app/\".", r.Name, g.attr)
					continue
				}
				if other, ok := seen[p]; ok {
					d.errorf(d.accessRange("role", i, g.attr), "Prefix granted twice", "Role %q grants %q in %s and in %s: keep it in one (read_write covers both).", r.Name, p, other, g.attr)
				}
				seen[p] = g.attr
			}
		}
		if len(seen) == 0 {
			d.warnf(rng, "Role grants nothing", "Role %q has no read_write, read or write prefix: its users may touch no key.", r.Name)
		}
	}
	users := map[string]bool{}
	jobs := map[string]string{}
	for i, u := range a.Users {
		rng := d.accessRange("user", i, "")
		switch {
		case u.Name == "root":
			d.errorf(rng, "Reserved user name", "User \"root\" is etcd's administrator; the members and `etcd-nomad env` use it. Choose another name.")
		case !accessNameRE.MatchString(u.Name):
			d.errorf(rng, "Invalid user name", "User name %q must be 1-64 letters, digits, dots, dashes or underscores (it is the CN of the user's certificates).", u.Name)
		case users[u.Name]:
			d.errorf(rng, "Duplicate user", "User %q is declared twice.", u.Name)
		}
		users[u.Name] = true
		bound := map[string]bool{}
		for _, r := range u.Roles {
			switch {
			case r == "root":
				d.errorf(d.accessRange("user", i, "roles"), "Root role not grantable", "User %q: role \"root\" is not granted from the definition; applications never act as etcd's administrator.", u.Name)
			case !roles[r]:
				d.errorf(d.accessRange("user", i, "roles"), "Unknown role", "User %q names role %q, which no role block declares%s.", u.Name, r, known(roles))
			case bound[r]:
				d.errorf(d.accessRange("user", i, "roles"), "Role listed twice", "User %q lists role %q twice.", u.Name, r)
			}
			bound[r] = true
		}
		for _, j := range u.NomadJobs {
			rng := d.accessRange("user", i, "nomad_jobs")
			if !nomadJobRE.MatchString(j) {
				d.errorf(rng, "Invalid Nomad job", "User %q: %q is not a Nomad job id, or \"namespace/job\".", u.Name, j)
				continue
			}
			ns, name := SplitNomadJob(j)
			key := ns + "/" + name
			if other, ok := jobs[key]; ok {
				d.errorf(rng, "Nomad job mapped twice", "Job %q is mapped to user %q and to user %q: a workload gets one identity.", key, other, u.Name)
			}
			jobs[key] = u.Name
		}
	}
	if c.Nomad.Job != "" {
		if u, ok := jobs[nomadNamespace(c)+"/"+c.Nomad.Job]; ok {
			d.errorf(d.rangeOf("access"), "The cluster's own job mapped to a user", "User %q lists the cluster's own job %q in nomad_jobs: the members act as root and need no user.", u, c.Nomad.Job)
		}
	}
}

func nomadNamespace(c *Cluster) string {
	if c.Nomad.Namespace == "" {
		return "default"
	}
	return c.Nomad.Namespace
}

// known lists declared names for a diagnostic.
func known(names map[string]bool) string {
	if len(names) == 0 {
		return " (none is declared)"
	}
	var out []string
	for n := range names {
		out = append(out, fmt.Sprintf("%q", n))
	}
	sort.Strings(out)
	return " (declared: " + strings.Join(out, ", ") + ")"
}

// accessRange finds the i-th block of typ in the access block, and attr
// in it when given.
func (d *decoder) accessRange(typ string, i int, attr string) *hcl.Range {
	return d.nthBlockRange("access", typ, i, attr)
}

// nthBlockRange finds attr (or the block itself when attr is "" or
// absent) of the i-th block of typ inside the cluster's first parent
// block, falling back to the parent's range.
func (d *decoder) nthBlockRange(parent, typ string, i int, attr string) *hcl.Range {
	p := firstBlock(d.body, parent)
	if p == nil {
		return d.rangeOf(parent)
	}
	n := 0
	for _, b := range p.Body.Blocks {
		if b.Type != typ {
			continue
		}
		if n == i {
			if at, ok := b.Body.Attributes[attr]; ok && attr != "" {
				r := at.Expr.Range()
				return &r
			}
			r := b.DefRange()
			return &r
		}
		n++
	}
	return d.rangeOf(parent)
}
