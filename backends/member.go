package backends

import (
	"context"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/coord/consul"
	"github.com/etcd-nomad/etcd-nomad/identity"
	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/provider/static"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Member is a cluster's parts opened for the member running here.
type Member struct {
	Coordinator coord.Coordinator
	// Reads is a watched copy of the coordinator's keys (Consul: one
	// blocking query) for the member's idle reads; nil for the local
	// coordinator, whose reads cost no request.
	Reads    *consul.Watched
	Provider provider.Provider
	// Self is this member's slot as its Nomad allocation or instance
	// says; nil with the static provider, whose member is named by -name.
	Self *provider.Instance
	// Name is the member's name: -name, else Self's.
	Name string
	// Static is the static provider's list, to replace when the
	// definition changes; nil for the others.
	Static *static.Provider
	// Identities verifies workload identities against the Nomad cluster's
	// keys (provider nomad); nil for the others.
	Identities *identity.Verifier
	// Store and Encryption are the snapshot block's; Store is nil without
	// one.
	Store      snapshot.Store
	Encryption snapshot.Encryption
}

// OpenMember opens cl's parts for the member named name (-name: the
// static name, or the EC2 instance id; "" takes it from the Nomad
// allocation's env or IMDS). A Nomad provider watches its allocations
// until ctx ends, so ctx is the member's whole run.
func OpenMember(ctx context.Context, cl *config.Cluster, name string, log hclog.Logger) (*Member, error) {
	co, err := Coordinator(cl)
	if err != nil {
		return nil, err
	}
	s, err := openProvider(ctx, cl, opener{member: true, name: name, getenv: os.Getenv, log: log})
	if err != nil {
		return nil, err
	}
	m := &Member{Coordinator: co, Provider: s.Provider, Self: s.self, Name: name, Static: s.static}
	if cc, ok := co.(*consul.Coordinator); ok {
		m.Reads = cc.Watch(ctx)
	}
	if s.watch != nil {
		go s.watch(ctx)
	}
	if s.nomad != nil {
		// Workloads trade their identity for a client certificate
		// (access block): verified against this Nomad cluster's keys.
		m.Identities = &identity.Verifier{Keys: nomadglue.JWKS{Client: s.nomad}}
	}
	if m.Self != nil && (m.Name == "" || cl.Provider.Kind == config.ProviderASG) {
		// An ASG member's name is its instance id as the group reports it.
		m.Name = m.Self.Name
	}
	if cl.Snapshot != nil {
		if m.Store, err = StoreWithLog(ctx, cl, log.Named("snapshots")); err != nil {
			return nil, err
		}
		if m.Encryption, err = Encryption(cl); err != nil {
			return nil, err
		}
	}
	return m, nil
}
