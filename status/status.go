// Package status is the cluster view: the /status message every member
// serves (Member), and what the CLI and tests gather of a whole cluster
// from its record and every member's /status (Gather), formatted for
// humans (Format). It only reads, through parts opened elsewhere
// (backends.Client); it opens nothing and never imports the member
// supervisor (task), which imports it.
package status

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/provider"
)

// Cluster is the state of a cluster.
type Cluster struct {
	Cluster   string `json:"cluster"`
	ClusterID string `json:"cluster_id"`
	Epoch     uint64 `json:"epoch"`
	// HighestEpoch is the record's highest_epoch when set: every new
	// epoch is recorded above it.
	HighestEpoch uint64 `json:"highest_epoch,omitempty"`
	// Paused names the operator's pause ('etcd-nomad pause'), if any.
	Paused  string   `json:"paused,omitempty"`
	Members []Member `json:"members"`
	Errors  []string `json:"errors,omitempty"`
}

// Source is what Gather reads a cluster through: its coordinator and
// provider, and the TLS it presents to members (backends.Client).
type Source interface {
	// Name is the cluster's name.
	Name() string
	Record(ctx context.Context) (coord.Record, error)
	Pause(ctx context.Context) (coord.Pause, error)
	// Instances lists the member slots.
	Instances(ctx context.Context) ([]provider.Instance, error)
	// StatusTLS is the client TLS towards members' /status and its URL
	// scheme.
	StatusTLS(ctx context.Context) (*tls.Config, string, error)
}

// Gather reads the cluster record and asks every member's /status, with
// the client certificate src presents.
func Gather(ctx context.Context, src Source) (Cluster, error) {
	out := Cluster{Cluster: src.Name()}
	if rec, err := src.Record(ctx); err == nil {
		out.ClusterID, out.Epoch, out.HighestEpoch = fmt.Sprintf("%x", rec.ClusterID), rec.Epoch, rec.HighestEpoch
	} else if errors.Is(err, coord.ErrNoRecord) {
		out.ClusterID = "(none yet)"
	} else {
		return out, fmt.Errorf("read cluster record: %w", err)
	}
	if p, err := src.Pause(ctx); err == nil {
		out.Paused = p.String()
	} else if !errors.Is(err, coord.ErrNotPaused) {
		return out, fmt.Errorf("read pause: %w", err)
	}
	// The provider first: its refusals (a missing NOMAD_TOKEN) say what
	// the operator lacks before anything about the CA.
	insts, err := src.Instances(ctx)
	if err != nil {
		return out, err
	}
	tc, scheme, err := src.StatusTLS(ctx)
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
			base := m.StatusURL(scheme)
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
	if st.HighestEpoch != 0 {
		fmt.Fprintf(&b, "highest_epoch %d (a replaced record named it: new epochs are recorded above it)\n", st.HighestEpoch)
	}
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
	// Alarms are the cluster's (etcd replicates them): said once, as the
	// first member that reports them sees them.
	for _, m := range st.Members {
		if m.NoSpace {
			fmt.Fprintf(&b, "\nALARM NOSPACE (seen by %s): writes refused until maintenance compacts, defragments and disarms it", m.Name)
			break
		}
	}
	for _, m := range st.Members {
		if len(m.Corrupt) > 0 {
			fmt.Fprintf(&b, "\nALARM CORRUPT for member(s) %s (seen by %s): writes refused until their data is set aside and the alarm disarmed", strings.Join(m.Corrupt, ","), m.Name)
			break
		}
	}
	for _, m := range st.Members {
		if m.CAKeyExposed != "" {
			// The cluster's CA: said once.
			fmt.Fprintf(&b, "\nCA KEY EXPOSED (seen by %s): %s", m.Name, m.CAKeyExposed)
			break
		}
	}
	if name, at, ok := earliestCert(st.Members); ok {
		fmt.Fprintf(&b, "\ncertificates: the first to expire is %s's %s at %s (in %s)", name, at.name, at.when.Format(time.RFC3339), time.Until(at.when).Round(time.Second))
	}
	for _, m := range st.Members {
		if m.CertWarning != "" {
			fmt.Fprintf(&b, "\n%s: CERTIFICATE WARNING: %s", m.Name, m.CertWarning)
		}
		if m.SnapshotError != "" {
			fmt.Fprintf(&b, "\n%s: SNAPSHOT NOT SAVED: %s", m.Name, m.SnapshotError)
		}
		if m.HoldersError != "" {
			fmt.Fprintf(&b, "\n%s: DATA HOLDERS NOT SAVED (no seed without a record until written): %s", m.Name, m.HoldersError)
		}
		if m.MetaError != "" {
			fmt.Fprintf(&b, "\n%s: DATA DIR UNREADABLE (metadata or WAL): %s", m.Name, m.MetaError)
		}
		if m.CAMismatch != nil {
			fmt.Fprintf(&b, "\n%s: CA MISMATCH: runs with %s, the coordinator holds %s (members that start without a saved CA cannot join)", m.Name, m.CAMismatch.Member, m.CAMismatch.Coordinator)
		}
		if m.CA != nil && m.CA.Refused != "" {
			fmt.Fprintf(&b, "\n%s: CA ROTATION REFUSED: %s", m.Name, m.CA.Refused)
		}
	}
	// Data set aside is renamed, never deleted on the spot: a recovery
	// that lost writes may find them there.
	for _, m := range st.Members {
		for _, a := range m.Asides {
			fmt.Fprintf(&b, "\n%s: set aside: %s", m.Name, a)
		}
		if m.AsidesMore > 0 {
			fmt.Fprintf(&b, "\n%s: set aside: %d older cop(ies) not listed", m.Name, m.AsidesMore)
		}
	}
	for _, e := range st.Errors {
		fmt.Fprintf(&b, "\n%s", e)
	}
	return strings.TrimRight(b.String(), "\n")
}

// certExpiry is one member's first certificate to expire.
type certExpiry struct {
	name string
	when time.Time
}

// earliestCert returns the member whose certificate (or trusted CA)
// expires first among members, which one and when; ok is false when no
// member reported one.
func earliestCert(members []Member) (member string, at certExpiry, ok bool) {
	for _, m := range members {
		when, err := time.Parse(time.RFC3339, m.CertExpiry)
		if err != nil {
			continue
		}
		if !ok || when.Before(at.when) {
			member, at, ok = m.Name, certExpiry{name: m.CertName, when: when}, true
		}
	}
	return member, at, ok
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
