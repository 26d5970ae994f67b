package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/coord/local"
	"github.com/etcd-nomad/etcd-nomad/task"
)

type statusCommand struct{ ui cli.Ui }

func (c *statusCommand) Synopsis() string { return "Show the members of a cluster" }
func (c *statusCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad status [-config FILE | -dir DIR] [-json]

  Asks every member's /status (over mutual TLS) and prints a table: name,
  member id, role, revision, healthy, learner, plus the cluster id and epoch
  from the cluster record.

Options:
  -config FILE   cluster definition
  -dir DIR       a directory made by 'etcd-nomad local up' (uses DIR/cluster.hcl)
  -json          print JSON instead of a table`)
}

type clusterStatus struct {
	Cluster   string        `json:"cluster"`
	ClusterID string        `json:"cluster_id"`
	Epoch     uint64        `json:"epoch"`
	Members   []task.Status `json:"members"`
	Errors    []string      `json:"errors,omitempty"`
}

func (c *statusCommand) Run(args []string) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	path := fs.String("config", "", "")
	dir := fs.String("dir", "", "")
	asJSON := fs.Bool("json", false, "")
	if err := fs.Parse(args); err != nil {
		c.ui.Error(c.Help())
		return 1
	}
	if *dir != "" {
		*path = filepath.Join(*dir, "cluster.hcl")
	}
	if *path == "" {
		c.ui.Error("status needs -config FILE or -dir DIR\n\n" + c.Help())
		return 1
	}
	cl := loadConfig(c.ui, *path)
	if cl == nil {
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := gatherStatus(ctx, cl)
	if err != nil {
		c.ui.Error(err.Error())
		return 1
	}
	if *asJSON {
		b, _ := json.MarshalIndent(st, "", "  ")
		c.ui.Output(string(b))
	} else {
		c.ui.Output(formatStatus(st))
	}
	healthy := 0
	for _, m := range st.Members {
		if m.Healthy {
			healthy++
		}
	}
	if healthy < len(cl.Provider.Static)/2+1 {
		return 2
	}
	return 0
}

func coordinatorFor(cl *config.Cluster) (coord.Coordinator, error) {
	if cl.Coordination.Kind != config.CoordLocal {
		return nil, fmt.Errorf("coordination %q is not available in this build", cl.Coordination.Kind)
	}
	return local.New(cl.Coordination.Dir)
}

// clientTLS returns the TLS config the CLI uses towards members: a client
// certificate issued in memory from the cluster CA (auto) or the files.
func clientTLS(ctx context.Context, cl *config.Cluster, co coord.Coordinator) (*tls.Config, string, error) {
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

func gatherStatus(ctx context.Context, cl *config.Cluster) (clusterStatus, error) {
	out := clusterStatus{Cluster: cl.Name}
	co, err := coordinatorFor(cl)
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
	tc, scheme, err := clientTLS(ctx, cl, co)
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

func formatStatus(st clusterStatus) string {
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
