// Package status gathers a cluster's state for the CLI and tests: the
// cluster record and every member's /status, asked over mutual TLS with a
// client certificate from the cluster CA. It only reads.
package status

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/coord/consul"
	"github.com/etcd-nomad/etcd-nomad/coord/local"
	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/provider/asg"
	"github.com/etcd-nomad/etcd-nomad/provider/nomad"
	"github.com/etcd-nomad/etcd-nomad/provider/static"
	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
)

// Cluster is the state of a cluster.
type Cluster struct {
	Cluster   string `json:"cluster"`
	ClusterID string `json:"cluster_id"`
	Epoch     uint64 `json:"epoch"`
	// Paused names the operator's pause ('etcd-nomad pause'), if any.
	Paused  string   `json:"paused,omitempty"`
	Members []Member `json:"members"`
	Errors  []string `json:"errors,omitempty"`
}

// Coordinator opens the cluster's coordinator.
func Coordinator(cl *config.Cluster) (coord.Coordinator, error) {
	switch cl.Coordination.Kind {
	case config.CoordLocal:
		return local.New(cl.Coordination.Dir)
	case config.CoordConsul:
		// Address and token from CONSUL_HTTP_ADDR / CONSUL_HTTP_TOKEN.
		o, err := consul.EnvClient()
		if err != nil {
			return nil, err
		}
		o.Prefix, o.SessionTTL = cl.Coordination.Prefix+"/"+cl.Name, cl.Coordination.SessionTTL
		return consul.New(o)
	}
	return nil, fmt.Errorf("unknown coordination %q", cl.Coordination.Kind)
}

// Instances lists the cluster's member slots from its provider.
func Instances(ctx context.Context, cl *config.Cluster) ([]provider.Instance, error) {
	switch cl.Provider.Kind {
	case config.ProviderStatic:
		return static.New(cl.Provider.Static).Instances(ctx)
	case config.ProviderNomad:
		cli, err := nomadapi.NewClient(nomadapi.DefaultConfig())
		if err != nil {
			return nil, fmt.Errorf("nomad client: %w", err)
		}
		job := cl.Provider.Nomad.Job
		if job == "" {
			job = cl.Nomad.Job
		}
		p := nomad.New(nomad.Options{Client: cli, Namespace: cl.Provider.Nomad.Namespace, Job: job, Group: cl.Provider.Nomad.Group})
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go p.Watch(wctx)
		return p.Instances(ctx)
	case config.ProviderASG:
		p, err := asg.New(ctx, ASGOptions(cl, "-"))
		if err != nil {
			return nil, err
		}
		return p.Instances(ctx)
	}
	return nil, fmt.Errorf("provider %q cannot list members in this build", cl.Provider.Kind)
}

// ASGOptions are the asg provider's options for cl; self is the instance
// id ("" reads it from IMDS).
func ASGOptions(cl *config.Cluster, self string) asg.Options {
	a := cl.Provider.ASG
	return asg.Options{Group: a.Name, Region: a.Region, Endpoint: a.Endpoint, IMDSEndpoint: a.IMDSEndpoint, SelfID: self,
		LifecycleHook: a.LifecycleHook, ClientPort: cl.Ports.Client, PeerPort: cl.Ports.Peer, StatusPort: cl.Ports.Status}
}

// Gather reads the cluster record and asks every member's /status, with a
// client certificate from the cluster CA the coordinator holds.
func Gather(ctx context.Context, cl *config.Cluster) (Cluster, error) {
	return GatherWithCA(ctx, cl, nil)
}

// GatherWithCA is Gather with a CA the operator holds (TLS auto), e.g. a
// member's <data_dir>/<member>/tls/ca.bundle when the coordinator lost the
// CA; nil reads it from the coordinator.
func GatherWithCA(ctx context.Context, cl *config.Cluster, ca *certs.Pair) (Cluster, error) {
	out := Cluster{Cluster: cl.Name}
	co, err := Coordinator(cl)
	if err != nil {
		return out, err
	}
	if rec, err := co.Record(ctx); err == nil {
		out.ClusterID, out.Epoch = fmt.Sprintf("%x", rec.ClusterID), rec.Epoch
	} else if errors.Is(err, coord.ErrNoRecord) {
		out.ClusterID = "(none yet)"
	} else {
		return out, fmt.Errorf("read cluster record: %w", err)
	}
	if p, err := co.Pause(ctx); err == nil {
		out.Paused = p.String()
	} else if !errors.Is(err, coord.ErrNotPaused) {
		return out, fmt.Errorf("read pause: %w", err)
	}
	// The provider first: its refusals (a missing NOMAD_TOKEN) say what
	// the operator lacks before anything about the CA.
	insts, err := Instances(ctx, cl)
	if err != nil {
		return out, err
	}
	var tc *tls.Config
	scheme := "https"
	if ca != nil && cl.TLS.Mode == config.TLSAuto {
		tc, err = ClientTLSFromCA(*ca)
	} else {
		tc, scheme, err = ClientTLS(ctx, cl, co)
	}
	if err != nil {
		return out, fmt.Errorf("client TLS: %w", err)
	}
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	// Gather is polled by tests, the demo and the bench: leave no
	// connection open on the members behind.
	defer hc.CloseIdleConnections()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out.Members = make([]Member, len(insts))
	for i, m := range insts {
		wg.Add(1)
		go func(i int, m provider.Instance) {
			defer wg.Done()
			base := scheme + "://" + net.JoinHostPort(m.Address, strconv.Itoa(m.StatusPort))
			st, err := Fetch(ctx, hc, base)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				st = Member{Name: m.Name, Reason: "unreachable", Unreachable: true}
				out.Errors = append(out.Errors, fmt.Sprintf("%s: %v", m.Name, err))
			}
			out.Members[i] = st
		}(i, m)
	}
	wg.Wait()
	return out, nil
}

// Format renders st as a table.
func Format(st Cluster) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %s  id %s  epoch %d\n", st.Cluster, st.ClusterID, st.Epoch)
	if st.Paused != "" {
		fmt.Fprintf(&b, "PAUSED: %s (no membership change, recovery or maintenance until 'etcd-nomad resume')\n", st.Paused)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMEMBER ID\tROLE\tREVISION\tDB SIZE\tHEALTHY\tLEARNER\tDECISION")
	for _, m := range st.Members {
		role := "-"
		switch {
		case m.Leader:
			role = "leader"
		case m.Learner:
			role = "learner"
		case m.Running:
			role = "follower"
		}
		id := "-"
		if m.MemberID != 0 {
			id = fmt.Sprintf("%x", m.MemberID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%v\t%v\t%s\n", m.Name, id, role, m.Revision, m.DBSize, m.Healthy, m.Learner, m.Decision)
	}
	tw.Flush()
	for _, m := range st.Members {
		if m.CAMismatch != nil {
			fmt.Fprintf(&b, "\n%s: CA MISMATCH: runs with %s, the coordinator holds %s (members that start without a saved CA cannot join)", m.Name, m.CAMismatch.Member, m.CAMismatch.Coordinator)
		}
	}
	for _, e := range st.Errors {
		fmt.Fprintf(&b, "\n%s", e)
	}
	return strings.TrimRight(b.String(), "\n")
}

// ClientTLS returns the TLS config the CLI uses towards members' /status:
// it trusts the cluster CA and presents a certificate from the status CA
// (clusterca.StatusIssuer), which members accept on /status and etcd never does.
// It needs no sealed key and only reads the coordinator: when the CA is not
// there it fails with clusterca.ErrNoClusterCA (wrapped) and never stores one.
func ClientTLS(ctx context.Context, cl *config.Cluster, co coord.Coordinator) (*tls.Config, string, error) {
	if cfg, scheme, ok, err := notAutoTLS(cl); ok {
		return cfg, scheme, err
	}
	st, caCert, err := clusterca.StatusIssuer(ctx, co, cl.Name)
	if err != nil {
		return nil, "", err
	}
	cfg, err := issuedTLS(caCert, st)
	return cfg, "https", err
}

// EtcdClientTLS returns the TLS config for etcd's client port (and
// /status): a client certificate from the cluster CA itself, which the
// coordinator keeps sealed with the cluster's key encryption key kek
// (clusterca.ErrCASealed without it; the local coordinator's needs none).
func EtcdClientTLS(ctx context.Context, cl *config.Cluster, co coord.Coordinator, kek []byte) (*tls.Config, string, error) {
	if cfg, scheme, ok, err := notAutoTLS(cl); ok {
		return cfg, scheme, err
	}
	ca, err := clusterca.Read(ctx, co, cl.Name, kek)
	if err != nil {
		return nil, "", err
	}
	cfg, err := ClientTLSFromCA(ca)
	return cfg, "https", err
}

// notAutoTLS is the client TLS of modes off and files; ok is false for
// auto.
func notAutoTLS(cl *config.Cluster) (cfg *tls.Config, scheme string, ok bool, err error) {
	switch cl.TLS.Mode {
	case config.TLSOff:
		return nil, "http", true, nil
	case config.TLSFiles:
		cfg, err := certs.ClientConfig(certs.Files{CA: cl.TLS.CAFile, Cert: cl.TLS.CertFile, Key: cl.TLS.KeyFile})
		return cfg, "https", true, err
	}
	return nil, "", false, nil
}

// cliCertValidity bounds the in-memory certificate of one CLI command.
const cliCertValidity = time.Hour

// ClientTLSFromCA returns a client TLS config that trusts ca and presents
// a client certificate issued from it in memory, as etcd's root user: the
// CLI saves and restores snapshots, which etcd's authorization allows only
// to root.
func ClientTLSFromCA(ca certs.Pair) (*tls.Config, error) {
	p, err := certs.IssueClient(ca, certs.RootUser, time.Now(), cliCertValidity)
	if err != nil {
		return nil, err
	}
	return pairTLS(ca.Cert, p)
}

// pairTLS trusts the PEM certificate root and presents p.
func pairTLS(root []byte, p certs.Pair) (*tls.Config, error) {
	kp, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		return nil, err
	}
	pool, err := certs.Pool(root)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}, nil
}

// issuedTLS trusts the PEM certificate root and presents a client
// certificate issued from issuer in memory.
func issuedTLS(root []byte, issuer certs.Pair) (*tls.Config, error) {
	p, err := certs.Issue(issuer, "etcd-nomad-cli", nil, time.Now())
	if err != nil {
		return nil, err
	}
	return pairTLS(root, p)
}

// Checks are the Consul health checks of a cluster's service (the agent's
// own serfHealth left out).
type Checks struct {
	Passing, Total int
	// Lines name each check: service id, status and output.
	Lines []string
}

// ConsulChecks reads the health checks of Consul service name: one per
// member in the rendered job.
func ConsulChecks(ctx context.Context, cli *consulapi.Client, service string) (Checks, error) {
	var out Checks
	entries, _, err := cli.Health().Service(service, "", false, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return out, fmt.Errorf("consul health of service %s: %w", service, err)
	}
	for _, e := range entries {
		for _, ch := range e.Checks {
			if ch.CheckID == "serfHealth" {
				continue
			}
			out.Total++
			if ch.Status == consulapi.HealthPassing {
				out.Passing++
			}
			out.Lines = append(out.Lines, fmt.Sprintf("%s %s: %s", e.Service.ID, ch.Status, strings.TrimSpace(ch.Output)))
		}
	}
	return out, nil
}

// Endpoints are a cluster's etcd client URLs and where they were found.
type Endpoints struct {
	URLs []string
	// Source names where they came from, for the operator.
	Source string
}

// ClientEndpoints finds the cluster's etcd client URLs: the passing
// instances of its Consul service (named after the cluster, registered by
// the rendered job) when the members run on Nomad, otherwise, or when
// Consul lists none passing, the provider's instances.
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
			out.URLs = append(out.URLs, scheme+"://"+net.JoinHostPort(addr, strconv.Itoa(e.Service.Port)))
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
		out.URLs = append(out.URLs, scheme+"://"+net.JoinHostPort(in.Address, strconv.Itoa(in.ClientPort)))
	}
	if len(out.URLs) == 0 {
		return out, fmt.Errorf("cluster %s: no member endpoints from %s", cl.Name, out.Source)
	}
	sort.Strings(out.URLs)
	return out, nil
}
