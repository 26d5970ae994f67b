// Package status gathers a cluster's state for the CLI and tests: the
// cluster record and every member's /status, asked over mutual TLS with a
// client certificate from the cluster CA. It only reads.
package status

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/coord/local"
	"github.com/etcd-nomad/etcd-nomad/task"
)

// Cluster is the state of a cluster.
type Cluster struct {
	Cluster   string        `json:"cluster"`
	ClusterID string        `json:"cluster_id"`
	Epoch     uint64        `json:"epoch"`
	Members   []task.Status `json:"members"`
	Errors    []string      `json:"errors,omitempty"`
}

// Coordinator opens the cluster's coordinator.
func Coordinator(cl *config.Cluster) (coord.Coordinator, error) {
	if cl.Coordination.Kind != config.CoordLocal {
		return nil, fmt.Errorf("coordination %q is not available in this build", cl.Coordination.Kind)
	}
	return local.New(cl.Coordination.Dir)
}

// ClientTLS returns the TLS config the CLI uses towards members: a client
// certificate issued in memory from the cluster CA (auto) or the files.
func ClientTLS(ctx context.Context, cl *config.Cluster, co coord.Coordinator) (*tls.Config, string, error) {
	switch cl.TLS.Mode {
	case config.TLSOff:
		return nil, "http", nil
	case config.TLSFiles:
		cfg, err := certs.ClientConfig(certs.Files{CA: cl.TLS.CAFile, Cert: cl.TLS.CertFile, Key: cl.TLS.KeyFile})
		return cfg, "https", err
	}
	ca, err := task.ClusterCA(ctx, co, cl.Name)
	if err != nil {
		return nil, "", err
	}
	p, err := certs.Issue(ca, "etcd-nomad-cli", nil, time.Now())
	if err != nil {
		return nil, "", err
	}
	kp, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		return nil, "", err
	}
	pool, err := certs.Pool(ca.Cert)
	if err != nil {
		return nil, "", err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}, "https", nil
}

// Gather reads the record and every member's status.
func Gather(ctx context.Context, cl *config.Cluster) (Cluster, error) {
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
	tc, scheme, err := ClientTLS(ctx, cl, co)
	if err != nil {
		return out, fmt.Errorf("client TLS: %w", err)
	}
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	out.Members = make([]task.Status, len(cl.Provider.Static))
	for i, m := range cl.Provider.Static {
		wg.Add(1)
		go func(i int, m config.StaticMember) {
			defer wg.Done()
			base := scheme + "://" + net.JoinHostPort(m.Address, strconv.Itoa(m.StatusPort))
			st, err := task.FetchStatus(ctx, hc, base)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				st = task.Status{Name: m.Name, Reason: "unreachable"}
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
	fmt.Fprintf(&b, "cluster %s  id %s  epoch %d\n\n", st.Cluster, st.ClusterID, st.Epoch)
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
	for _, e := range st.Errors {
		fmt.Fprintf(&b, "\n%s", e)
	}
	return strings.TrimRight(b.String(), "\n")
}
