package task

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"golang.org/x/time/rate"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/exchange"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/status"
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
	e := m.etcd
	starting := m.starting
	st.CAMismatch = m.trust.Mismatch()
	st.SnapshotError = m.snapshotErr
	found := m.known.found
	m.mu.Unlock()
	st.FoundVoters = m.foundVoters(found, m.opts.Clock.Now())
	st.Asides, st.AsidesMore = m.asides.list(m.dir.AsideDir(), m.log)
	now := time.Now()
	st.Time = now.UTC().Format(time.RFC3339)
	if name, at := m.trust.Earliest(); name != "" {
		st.CertName, st.CertExpiry = name, at.UTC().Format(time.RFC3339)
	}
	st.CertWarning = m.trust.CertWarning(now)
	st.CA = m.trust.RotationView()
	st.CAKeyExposed = m.trust.KeyExposed()
	if meta, err := m.dir.ReadMeta(); err == nil {
		if e != nil || starting || m.dir.HasEtcdData() {
			// Metadata written before etcd created any data (a crash
			// between the two) names an incarnation this member does not
			// hold: peers must not wait for it to re-record (it sees
			// itself empty).
			st.Token, st.Epoch = meta.Token, meta.Epoch
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
	learner, member := selfRole(srv)
	if !member {
		return st, fmt.Errorf("removed from the cluster")
	}
	st.Learner = learner
	st.Leader = srv.Leader() == srv.MemberID()
	st.Revision = srv.KV().Rev()
	st.DBSize = srv.Backend().Size()
	st.NoSpace = noSpace(e)
	for _, id := range corruptAlarms(e) {
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

// The status port's limits. It answers the network without a client
// certificate (/health, /metrics, the exchange) from the process that runs
// etcd: whatever a stranger can hold open here (descriptors, goroutines,
// memory) it takes from etcd. Each limit is far above what the port's
// legitimate clients need: the Consul check (one request every 2 s), the
// other members' observations (one keep-alive connection each), a
// Prometheus scraper, `etcd-nomad creds` at start and at each renewal.
const (
	// statusMaxConns caps the connections the member holds open on the
	// status port (statusListener). At the cap a new connection takes
	// the place of the one idle longest; with none idle it waits in the
	// kernel's backlog until one closes (at worst statusHeaderTimeout,
	// for a connection that sends nothing, or statusWriteTimeout for one
	// in a request). 256 is many times the legitimate clients and a
	// small share of the process's descriptor limit, which etcd needs.
	statusMaxConns = 256
	// statusMaxConnsPerSource caps the connections of one source address
	// (an IPv6 /64), closing the ones over it at once: one peer alone
	// cannot fill statusMaxConns. 32 is far above what one host's
	// legitimate clients hold (a Consul agent's check, a member's
	// observations, the creds of the allocations on one Nomad client,
	// each connection closed at statusIdleTimeout).
	statusMaxConnsPerSource = 32
	// statusHeaderTimeout bounds the TLS handshake and a request's
	// headers: a connection that sends nothing is closed after it.
	statusHeaderTimeout = 5 * time.Second
	// statusReadTimeout bounds a whole request, headers and body,
	// however slowly the client trickles it: the largest body is the
	// exchange's (exchangeMaxBody, a few KiB in practice).
	statusReadTimeout = 10 * time.Second
	// statusWriteTimeout bounds a request from its headers to the end of
	// its answer: above /health's linearizable read (rpcTimeout), the
	// exchange's JWKS read (identity.FetchTimeout) and a /metrics scrape.
	statusWriteTimeout = 30 * time.Second
	// statusIdleTimeout closes a keep-alive connection that sends no
	// request for this long: above the Consul check's interval and the
	// members' observations, short enough that a client that never closes
	// its connections gives them back soon.
	statusIdleTimeout = 10 * time.Second
	// statusMaxHeaderBytes bounds a request's header lines (Go's default
	// is 1 MiB): beyond it the member answers 431 and closes. The
	// legitimate clients send a few hundred bytes; 16 KiB bounds what the
	// connection cap's worth of stalled headers holds to a few MiB.
	statusMaxHeaderBytes = 16 << 10
	// exchangeMaxBody bounds a certificate request: a JWT and a PEM CSR
	// are a few KiB.
	exchangeMaxBody = 64 << 10
	// The exchange is paced before anything is read (exchangeLimiter):
	// each answer costs a signature (and a JWKS read on an unknown key
	// id). An application asks once at start and then at two thirds of
	// certificate_ttl.
	//
	// exchangeSourceRate and exchangeSourceBurst pace each source (a
	// Nomad client's address): 20 allocations starting at once on one
	// node are served in the burst, more at 2 a second (creds retries
	// with backoff). A source's flood is refused with 429 and delays
	// only that source's exchanges.
	exchangeSourceRate  = rate.Limit(2)
	exchangeSourceBurst = 20
	// exchangeRate and exchangeBurst pace the requests the sources'
	// buckets let through, all sources together: they bound the
	// member's signing work, far above what a cluster's applications
	// ask, and take exchangeRate/exchangeSourceRate (25) flooding
	// sources to spend.
	exchangeRate  = rate.Limit(50)
	exchangeBurst = 200
	// exchangeMaxSources bounds the sources whose buckets are kept (a
	// few hundred KiB); past it the one seen least recently is
	// forgotten.
	exchangeMaxSources = 4096
)

func (m *Member) serveStatus() error {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		st, err := m.health(r.Context())
		code, body := statusport.HealthAnswer(st, err, m.opts.Cluster.Etcd.QuotaBackendBytes)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	})
	// statusCA is the status CA of the member's CA at start (a CA
	// rotation adds the next one's: trust.Trust.StatusCAs).
	var statusCA []byte
	readers := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if code, why := m.statusReader(r, statusCA); code != 0 {
				http.Error(w, why, code)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	mux.Handle("/status", readers(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st, _ := m.health(r.Context())
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})))
	if m.opts.Cluster.Access != nil {
		// Without an access block no workload maps to a user: the
		// exchange is not served at all (404), so a stranger gets nothing
		// decoded or verified.
		lim := newExchangeLimiter(exchangeRate, exchangeBurst, exchangeSourceRate, exchangeSourceBurst, exchangeMaxSources)
		mux.HandleFunc(exchange.Path, func(w http.ResponseWriter, r *http.Request) {
			if !lim.allow(sourceOf(r.RemoteAddr), time.Now()) {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "too many certificate requests to this member: retry", http.StatusTooManyRequests)
				return
			}
			m.trust.Handler().ServeHTTP(w, r)
		})
	}
	mux.Handle("/metrics", readers(promhttp.HandlerFor(prometheus.Gatherers{prometheus.DefaultGatherer, m.metrics.reg}, promhttp.HandlerOpts{})))
	addr := net.JoinHostPort(m.self.Address, strconv.Itoa(m.self.StatusPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on status address %s: %w", addr, err)
	}
	sl := newStatusListener(ln, statusMaxConns, statusMaxConnsPerSource)
	ln = sl
	// HTTP/1.1 only: one request at a time per connection, so the
	// connection caps bound the requests in flight too. The port's
	// clients (Consul's check, members, Prometheus, creds) gain nothing
	// from HTTP/2, which would need its own limits.
	var http1 http.Protocols
	http1.SetHTTP1(true)
	m.http = &http.Server{Handler: mux, ConnState: sl.connState, ReadHeaderTimeout: statusHeaderTimeout, ReadTimeout: statusReadTimeout,
		WriteTimeout: statusWriteTimeout, IdleTimeout: statusIdleTimeout, MaxHeaderBytes: statusMaxHeaderBytes,
		Protocols: &http1}
	if m.trust.Scheme() == "https" {
		cfg, err := certs.ServerConfig(m.trust.Files())
		if err == nil {
			// Read at each handshake, as etcd does: renewal replaces
			// the file.
			cfg.Certificates, cfg.GetCertificate = nil, m.trust.ServerCertificate
			// Named here, not left to ServeTLS: GetConfigForClient
			// below returns copies of this config.
			cfg.NextProtos = []string{"http/1.1"}
		}
		if err == nil && m.trust.CA() != nil {
			// /status also takes the status CA's clients (read-only
			// clients, certs.StatusCA); etcd's ports never do.
			var st certs.Pair
			if st, err = certs.StatusCA(*m.trust.CA()); err == nil {
				cfg.ClientCAs.AppendCertsFromPEM(st.Cert)
				statusCA = st.Cert
			}
		}
		if err != nil {
			ln.Close()
			return err
		}
		if m.trust.CA() != nil {
			// The CAs accepted change with a CA rotation: built again
			// at each handshake from what the member trusts now.
			base := cfg
			cfg = base.Clone()
			cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return m.trust.StatusServerConfig(base), nil }
		}
		m.http.TLSConfig = cfg
		go func() { _ = m.http.ServeTLS(ln, "", "") }()
	} else {
		go func() { _ = m.http.Serve(ln) }()
	}
	return nil
}

// statusReader decides whether r may read /status and /metrics: 0, or
// the refusal's HTTP status and text. Both name every member and its ids,
// revision and decisions, and etcd's metrics raft's terms and indexes:
// what forging raft messages takes. With TLS auto they are served to a
// client certificate of a status CA this member accepts (statusCA, and
// during a CA rotation the next CA's), which `status` and `tls
// status-cert` present, or to etcd's root user's from a cluster CA (the
// members' own clients, `env`, `snapshot`); an application's certificate
// from the exchange is refused. With TLS files, to any certificate of the
// definition's CA: there is no status CA, and that CA opens the peer port
// too. With TLS off, to everyone, as etcd's own ports.
func (m *Member) statusReader(r *http.Request, statusCA []byte) (int, string) {
	switch {
	case r.TLS == nil:
		return 0, ""
	case len(r.TLS.VerifiedChains) == 0:
		return http.StatusUnauthorized, "this needs a client certificate from the cluster's status CA (etcd-nomad tls status-cert) or etcd's root user's"
	case m.trust.CA() == nil:
		return 0, ""
	}
	accepted := certs.ParseCertificates(statusCA)
	accepted = append(accepted, certs.ParseCertificates(m.trust.StatusCAs())...)
	for _, chain := range r.TLS.VerifiedChains {
		if chain[0].Subject.CommonName == certs.RootUser {
			return 0, ""
		}
		for _, ca := range accepted {
			if chain[len(chain)-1].Equal(ca) {
				return 0, ""
			}
		}
	}
	return http.StatusForbidden, fmt.Sprintf("the client certificate of %q is neither from the cluster's status CA (etcd-nomad tls status-cert) nor etcd's root user's", r.TLS.PeerCertificates[0].Subject.CommonName)
}

// selfRole reports whether this server is a learner and whether it is a
// member at all. etcd's own IsLearner panics once the member is removed.
func selfRole(srv *etcdserver.EtcdServer) (learner, member bool) {
	mem := srv.Cluster().Member(srv.MemberID())
	if mem == nil {
		return false, false
	}
	return mem.IsLearner, true
}
