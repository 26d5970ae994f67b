package backends

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/provider/asg"
	"github.com/etcd-nomad/etcd-nomad/provider/nomad"
	"github.com/etcd-nomad/etcd-nomad/provider/static"
)

// opener says for whom a provider is opened.
type opener struct {
	// member: for the member running here, in its Nomad allocation or
	// on its instance; false for a client, which has no self.
	member bool
	// name is the member's -name: its static name, or its EC2 instance
	// id ("" reads it from IMDS).
	name string
	// getenv reads the allocation's NOMAD_* variables (members only).
	getenv func(string) string
	log    hclog.Logger
}

// slots is an opened provider and what opening it found.
type slots struct {
	provider.Provider
	// self is the member running here (members of the nomad and asg
	// providers); nil otherwise.
	self *provider.Instance
	// static is the list a member replaces when the definition changes.
	static *static.Provider
	// nomad is the Nomad API client (nomad provider).
	nomad *nomadapi.Client
	// watch keeps a Nomad provider's allocations current until its
	// context ends; nil for the others.
	watch func(context.Context)
}

// openProvider is the one factory of a cluster's provider, for members and
// clients alike. A Nomad provider's watch is not started (slots.watch).
//
// A member on Nomad clients in an auto-scaling group wraps its allocations
// with the group's lifecycle (asg.OnNomad), which needs AWS access; a
// client lists the allocations as Nomad has them and needs none.
func openProvider(ctx context.Context, cl *config.Cluster, o opener) (slots, error) {
	switch cl.Provider.Kind {
	case config.ProviderStatic:
		if o.member && o.name == "" {
			return slots{}, fmt.Errorf("the static provider needs -name")
		}
		p := static.New(cl.Provider.Static)
		return slots{Provider: p, static: p}, nil
	case config.ProviderNomad:
		return openNomad(ctx, cl, o)
	case config.ProviderASG:
		self := "-"
		if o.member {
			self = o.name
		}
		p, err := asg.New(ctx, asgOptions(cl, &cl.Provider.ASG, self))
		if err != nil {
			return slots{}, err
		}
		out := slots{Provider: p}
		if o.member {
			in, err := p.Self(ctx)
			if err != nil {
				return slots{}, err
			}
			out.self = &in
		}
		return out, nil
	}
	if o.member {
		return slots{}, fmt.Errorf("provider %q cannot run members in this build", cl.Provider.Kind)
	}
	return slots{}, fmt.Errorf("provider %q cannot list members in this build", cl.Provider.Kind)
}

// openNomad opens the nomad provider: the job's allocations of the group,
// read from the definition and, for a member, its allocation's env.
func openNomad(ctx context.Context, cl *config.Cluster, o opener) (slots, error) {
	env := func(string) string { return "" }
	var out slots
	var alloc string
	if o.member {
		env = o.getenv
		s, err := nomadglue.SelfFromEnv()
		if err != nil {
			return slots{}, err
		}
		out.self = &provider.Instance{Name: s.Name, Address: s.Address, ClientPort: s.ClientPort, PeerPort: s.PeerPort, StatusPort: s.StatusPort}
		alloc = s.Alloc
	}
	cli, err := nomadglue.Client()
	if err != nil {
		return slots{}, err
	}
	pn := cl.Provider.Nomad
	opts := nomadOptions(cl, env)
	opts.Client, opts.SelfAlloc = cli, alloc
	if o.log != nil {
		opts.Logger = o.log.Named("nomad")
	}
	p := nomad.New(opts)
	out.Provider, out.nomad, out.watch = p, cli, p.Watch
	if a := pn.ASG; a != nil && o.member {
		group, err := asg.New(ctx, asgOptions(cl, a, "-"))
		if err != nil {
			return slots{}, err
		}
		out.Provider = &asg.OnNomad{Allocs: p, Group: group, Nodes: &asg.NomadNodes{Client: cli, Attribute: pn.NodeAttribute}}
	}
	return out, nil
}

// nomadOptions are the nomad provider's job, group and namespace: the
// definition's, and where it leaves them out, those env (the allocation's
// NOMAD_* variables; none for a client) names.
func nomadOptions(cl *config.Cluster, env func(string) string) nomad.Options {
	pn := cl.Provider.Nomad
	return nomad.Options{
		Namespace: firstOf(pn.Namespace, env("NOMAD_NAMESPACE")),
		Job:       firstOf(pn.Job, env("NOMAD_JOB_ID"), cl.Nomad.Job),
		Group:     firstOf(env("NOMAD_GROUP_NAME"), pn.Group),
	}
}

// asgOptions are the options of cl's auto-scaling group a (provider asg,
// or the group of Nomad clients of provider nomad); self is the instance
// id ("" reads it from IMDS, "-" is none).
func asgOptions(cl *config.Cluster, a *config.ASGProvider, self string) asg.Options {
	return asg.Options{Group: a.Name, Region: a.Region, Endpoint: a.Endpoint, IMDSEndpoint: a.IMDSEndpoint, SelfID: self,
		LifecycleHook: a.LifecycleHook, ClientPort: cl.Ports.Client, PeerPort: cl.Ports.Peer, StatusPort: cl.Ports.Status}
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
