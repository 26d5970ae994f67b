// Package backends opens a cluster's parts from its definition: the
// coordinator, the provider of member slots, the snapshot store and its
// encryption, and the TLS that clients present to members. Members
// (OpenMember) and every CLI command (OpenClient) open them here, so that
// a setting of the definition means the same thing to both.
//
// It only opens: it decides nothing, starts no member, and never creates a
// cluster CA (a missing one is clusterca.ErrNoClusterCA); members decide
// that in task.
package backends

import (
	"fmt"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/coord/consul"
	"github.com/etcd-nomad/etcd-nomad/coord/local"
)

// Coordinator opens the cluster's coordinator: the local directory, or
// Consul at CONSUL_HTTP_ADDR with CONSUL_HTTP_TOKEN.
func Coordinator(cl *config.Cluster) (coord.Coordinator, error) {
	switch cl.Coordination.Kind {
	case config.CoordLocal:
		return local.New(cl.Coordination.Dir)
	case config.CoordConsul:
		o, err := consul.EnvClient()
		if err != nil {
			return nil, err
		}
		o.Prefix, o.SessionTTL = cl.Coordination.Prefix+"/"+cl.Name, cl.Coordination.SessionTTL
		return consul.New(o)
	}
	return nil, fmt.Errorf("unknown coordination %q", cl.Coordination.Kind)
}
