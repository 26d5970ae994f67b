package task

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/status"
	"github.com/etcd-nomad/etcd-nomad/task/etcdproc"
	"github.com/etcd-nomad/etcd-nomad/task/statusport"
)

func (m *Member) setDecision(d planner.Decision) {
	m.mu.Lock()
	m.status.Decision = string(d.Kind)
	m.status.Reason = d.Reason
	m.mu.Unlock()
}

// health is the /health verdict: a started, caught-up voting member of a
// cluster with quorum. A linearizable read proves quorum.
func (m *Member) health(ctx context.Context) (status.Member, error) {
	m.mu.Lock()
	st := m.status
	e := m.proc.Server()
	starting := m.starting
	st.CAMismatch = m.trust.Mismatch()
	st.SnapshotError = m.backups.SnapshotErr()
	found, held := m.known.found, m.known.held
	st.HoldersError = m.known.holdersUnsaved
	m.mu.Unlock()
	st.FoundVoters = m.foundVoters(found, m.opts.Clock.Now())
	st.Holders = m.sharedHolders(held, m.opts.Clock.Now())
	st.Asides, st.AsidesMore = m.backups.Asides()
	now := time.Now()
	st.Time = now.UTC().Format(time.RFC3339)
	if name, at := m.trust.Earliest(); name != "" {
		st.CertName, st.CertExpiry = name, at.UTC().Format(time.RFC3339)
	}
	st.CertWarning = m.trust.CertWarning(now)
	st.CA = m.trust.RotationView()
	st.CAKeyExposed = m.trust.KeyExposed()
	meta, merr := m.dir.ReadMeta()
	if merr != nil && (!errors.Is(merr, os.ErrNotExist) || e != nil || m.dir.HasEtcdData()) {
		// Its token and cluster id are unknown, not empty: peers that
		// took this answer as "no data" forgot this member as a data
		// holder (review rev19b F); they take it as silent.
		st.MetaError = merr.Error()
	}
	if _, derr := m.dir.EtcdData(); derr != nil && st.MetaError == "" {
		// The same for a WAL directory that cannot be read: whether
		// this member holds data is unknown (review rev19f 4).
		st.MetaError = derr.Error()
	}
	if merr == nil {
		if e != nil || starting || m.dir.HasEtcdData() {
			// Metadata written before etcd created any data (a crash
			// between the two) names an incarnation this member does not
			// hold: peers must not wait for it to re-record (it sees
			// itself empty).
			st.Token, st.Epoch = meta.Token, meta.Epoch
		} else if meta.Cluster == "" || meta.Cluster == st.Cluster {
			// But it names an epoch whose record existed: whichever
			// member chooses a new epoch goes above it (review rev18c
			// N3; planner.PeerStatus.MetaEpoch).
			st.MetaEpoch = meta.Epoch
		}
		if meta.Name != "" {
			st.Name = meta.Name // the persisted identity
		}
		st.MemberID, st.ClusterID = meta.MemberID, meta.ClusterID
	}
	if e == nil {
		if m.dir.HasEtcdData() {
			st.Revision = m.dir.Revision()
			// Peers must know a stopped learner's data is a learner's:
			// it never seeds a recovery (invariant 4).
			st.Learner = m.dir.Learner(st.MemberID)
			if meta, err := m.dir.ReadMeta(); err == nil {
				st.ForceNewPending, st.Unstarted = meta.ForceNewPending(), meta.Unstarted()
			}
		}
		// The decision's reason may name member ids: it is on /status,
		// not in /health's answer to anyone.
		return st, fmt.Errorf("etcd not running (decision %s; its reason on /status)", st.Decision)
	}
	srv := e.Server
	st.Running = true
	st.MemberID = uint64(srv.MemberID())
	st.ClusterID = uint64(srv.Cluster().ID())
	learner, member := etcdproc.SelfRole(srv)
	if !member {
		return st, fmt.Errorf("removed from the cluster")
	}
	st.Learner = learner
	st.Leader = srv.Leader() == srv.MemberID()
	st.Revision = srv.KV().Rev()
	st.DBSize = srv.Backend().Size()
	st.NoSpace = etcdproc.NoSpace(e)
	for _, id := range etcdproc.CorruptAlarms(e) {
		st.Corrupt = append(st.Corrupt, fmt.Sprintf("%x", id))
	}
	select {
	case <-srv.ReadyNotify():
	default:
		return st, fmt.Errorf("etcd started but not ready")
	}
	if st.Learner {
		return st, fmt.Errorf("learner, not yet a voter")
	}
	if srv.Leader() == 0 {
		return st, fmt.Errorf("no leader: cluster has no quorum")
	}
	if lag := int64(srv.CommittedIndex()) - int64(srv.AppliedIndex()); lag > 1000 {
		return st, fmt.Errorf("catching up: %d entries behind", lag)
	}
	cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	if err := srv.LinearizableReadNotify(cctx); err != nil {
		return st, fmt.Errorf("linearizable read failed: %w", err)
	}
	st.Healthy = true
	return st, nil
}

// serveStatus starts the status port (statusport.Serve) with this
// member's health, TLS, metrics and, with an access block, the exchange.
func (m *Member) serveStatus() error {
	cfg, statusCA, err := m.trust.StatusServerTLS()
	if err != nil {
		return err
	}
	c := statusport.Config{
		Addr:     net.JoinHostPort(m.self.Address, strconv.Itoa(m.self.StatusPort)),
		TLS:      cfg,
		StatusCA: statusCA,
		Health:   m.health,
		Quota:    m.opts.Cluster.Etcd.QuotaBackendBytes,
		Metrics:  promhttp.HandlerFor(prometheus.Gatherers{prometheus.DefaultGatherer, m.metrics.reg}, promhttp.HandlerOpts{}),
	}
	if m.trust.CA() != nil {
		c.StatusCAs = m.trust.StatusCAs
	}
	if m.opts.Cluster.Access != nil {
		// Without an access block no workload maps to a user: the
		// exchange is not served at all (404), so a stranger gets nothing
		// decoded or verified.
		c.Exchange = m.trust.Handler()
	}
	port, err := statusport.Serve(c)
	if err != nil {
		return err
	}
	m.port = port
	return nil
}
