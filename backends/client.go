package backends

import (
	"context"
	"crypto/tls"
	"fmt"
	"sort"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/coord/consul"
	"github.com/etcd-nomad/etcd-nomad/provider"
)

// Client is a cluster opened for a client (the CLI, tests, the demo): it
// reads the coordinator, lists the provider's instances and issues its
// own certificates in memory; it never stores a CA or a record.
type Client struct {
	Cluster *config.Cluster
	coord.Coordinator
	// CA, when set with TLS auto, is a cluster CA the operator holds
	// (a member's <data_dir>/<member>/tls/ca.bundle), used instead of the
	// coordinator's, e.g. after the coordinator lost it.
	CA *certs.Pair
}

// OpenClient opens cl's coordinator for a client.
func OpenClient(cl *config.Cluster) (*Client, error) {
	co, err := Coordinator(cl)
	if err != nil {
		return nil, err
	}
	return &Client{Cluster: cl, Coordinator: co}, nil
}

// Name is the cluster's name.
func (c *Client) Name() string { return c.Cluster.Name }

// Instances lists the cluster's member slots from its provider.
func (c *Client) Instances(ctx context.Context) ([]provider.Instance, error) {
	return Instances(ctx, c.Cluster)
}

// Instances lists cl's member slots from its provider, as a client.
func Instances(ctx context.Context, cl *config.Cluster) ([]provider.Instance, error) {
	s, err := openProvider(ctx, cl, opener{})
	if err != nil {
		return nil, err
	}
	if s.watch != nil {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go s.watch(wctx)
	}
	return s.Instances(ctx)
}

// StatusTLS is the TLS towards members' /status (package StatusTLS), or
// with c.CA a certificate from that CA.
func (c *Client) StatusTLS(ctx context.Context) (*tls.Config, string, error) {
	if c.CA != nil && c.Cluster.TLS.Mode == config.TLSAuto {
		tc, err := TLSFromCA(*c.CA)
		return tc, "https", err
	}
	return StatusTLS(ctx, c.Cluster, c.Coordinator)
}

// EtcdTLS is the TLS towards etcd's client port (package EtcdTLS).
func (c *Client) EtcdTLS(ctx context.Context, kek []byte) (*tls.Config, string, error) {
	return EtcdTLS(ctx, c.Cluster, c.Coordinator, kek)
}

// Endpoints are a cluster's etcd client URLs and where they were found.
type Endpoints struct {
	URLs []string
	// Source names where they came from, for the operator.
	Source string
}

// ClientEndpoints finds the cluster's etcd client URLs: the passing instances
// of its Consul service (named after the cluster, registered by the
// rendered job) when the members run on Nomad, otherwise, or when Consul
// lists none passing, the provider's instances.
func ClientEndpoints(ctx context.Context, cl *config.Cluster) (Endpoints, error) {
	scheme := "https"
	if cl.TLS.Mode == config.TLSOff {
		scheme = "http"
	}
	if cl.Provider.Kind == config.ProviderNomad && cl.Coordination.Kind == config.CoordConsul {
		o, err := consul.EnvClient()
		if err != nil {
			return Endpoints{}, err
		}
		entries, _, err := o.Client.Health().Service(cl.Name, "", true, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return Endpoints{}, fmt.Errorf("consul service %s: %w", cl.Name, err)
		}
		var out Endpoints
		for _, e := range entries {
			addr := e.Service.Address
			if addr == "" {
				addr = e.Node.Address
			}
			out.URLs = append(out.URLs, provider.URL(scheme, addr, e.Service.Port))
		}
		if len(out.URLs) > 0 {
			sort.Strings(out.URLs)
			out.Source = fmt.Sprintf("Consul service %q (passing)", cl.Name)
			return out, nil
		}
	}
	insts, err := Instances(ctx, cl)
	if err != nil {
		return Endpoints{}, err
	}
	out := Endpoints{Source: fmt.Sprintf("provider %q", cl.Provider.Kind)}
	for _, in := range insts {
		if in.Unknown || in.Address == "" || in.ClientPort == 0 {
			continue
		}
		out.URLs = append(out.URLs, in.ClientURL(scheme))
	}
	if len(out.URLs) == 0 {
		return out, fmt.Errorf("cluster %s: no member endpoints from %s", cl.Name, out.Source)
	}
	sort.Strings(out.URLs)
	return out, nil
}
