package statusport

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"golang.org/x/time/rate"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/exchange"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// The status port's limits. It answers the network without a client
// certificate (/health, /metrics, the exchange) from the process that runs
// etcd: whatever a stranger can hold open here (descriptors, goroutines,
// memory) it takes from etcd. Each limit is far above what the port's
// legitimate clients need: the Consul check (one request every 2 s), the
// other members' observations (one keep-alive connection each), a
// Prometheus scraper, `etcd-nomad creds` at start and at each renewal.
const (
	// MaxConns caps the connections the member holds open on the
	// status port (statusListener). At the cap a new connection takes
	// the place of the one idle longest; with none idle it waits in the
	// kernel's backlog until one closes (at worst HeaderTimeout,
	// for a connection that sends nothing, or WriteTimeout for one
	// in a request). 256 is many times the legitimate clients and a
	// small share of the process's descriptor limit, which etcd needs.
	MaxConns = 256
	// MaxConnsPerSource caps the connections of one source address
	// (an IPv6 /64), closing the ones over it at once: one peer alone
	// cannot fill MaxConns. 32 is far above what one host's
	// legitimate clients hold (a Consul agent's check, a member's
	// observations, the creds of the allocations on one Nomad client,
	// each connection closed at IdleTimeout).
	MaxConnsPerSource = 32
	// HeaderTimeout bounds the TLS handshake and a request's
	// headers: a connection that sends nothing is closed after it.
	HeaderTimeout = 5 * time.Second
	// ReadTimeout bounds a whole request, headers and body,
	// however slowly the client trickles it: the largest body is the
	// exchange's (task/trust's exchangeMaxBody, a few KiB in practice).
	ReadTimeout = 10 * time.Second
	// WriteTimeout bounds a request from its headers to the end of
	// its answer: above /health's linearizable read (task's rpcTimeout), the
	// exchange's JWKS read (identity.FetchTimeout) and a /metrics scrape.
	WriteTimeout = 30 * time.Second
	// IdleTimeout closes a keep-alive connection that sends no
	// request for this long: above the Consul check's interval and the
	// members' observations, short enough that a client that never closes
	// its connections gives them back soon.
	IdleTimeout = 10 * time.Second
	// MaxHeaderBytes bounds a request's header lines (Go's default
	// is 1 MiB): beyond it the member answers 431 and closes. The
	// legitimate clients send a few hundred bytes; 16 KiB bounds what the
	// connection cap's worth of stalled headers holds to a few MiB.
	MaxHeaderBytes = 16 << 10
	// The exchange is paced before anything is read (exchangeLimiter):
	// each answer costs a signature (and a JWKS read on an unknown key
	// id). An application asks once at start and then at two thirds of
	// certificate_ttl.
	//
	// exchangeSourceRate and ExchangeSourceBurst pace each source (a
	// Nomad client's address): 20 allocations starting at once on one
	// node are served in the burst, more at 2 a second (creds retries
	// with backoff). A source's flood is refused with 429 and delays
	// only that source's exchanges.
	exchangeSourceRate  = rate.Limit(2)
	ExchangeSourceBurst = 20
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

// Config is what the status port serves, handed in by the member loop.
type Config struct {
	// Addr is the member's address and status port (host:port).
	Addr string
	// TLS is the server side of TLS (trust.Trust.StatusServerTLS); nil:
	// TLS off, plain HTTP.
	TLS *tls.Config
	// StatusCA is the status CA /status and /metrics accept (TLS auto:
	// the status CA of the member's CA at start); StatusCAs, read at
	// each request, the ones a CA rotation adds. StatusCAs nil (TLS
	// files): every certificate the TLS config verifies reads them.
	StatusCA  []byte
	StatusCAs func() []byte
	// Health is the member's status and its health verdict (nil:
	// healthy), for /health and /status.
	Health func(ctx context.Context) (status.Member, error)
	// Quota is the cluster's quota_backend_bytes (HealthAnswer).
	Quota   int64
	Metrics http.Handler
	// Exchange, when set, is served at exchange.Path behind the
	// exchange's limiter.
	Exchange http.Handler
}

// Server is the member's status port.
type Server struct{ http *http.Server }

// Serve listens on c.Addr and serves the status port until Shutdown.
func Serve(c Config) (*Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		st, err := c.Health(r.Context())
		code, body := HealthAnswer(st, err, c.Quota)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	})
	readers := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if code, why := c.reader(r); code != 0 {
				http.Error(w, why, code)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	mux.Handle("/status", readers(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st, _ := c.Health(r.Context())
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})))
	if c.Exchange != nil {
		lim := newExchangeLimiter(exchangeRate, exchangeBurst, exchangeSourceRate, ExchangeSourceBurst, exchangeMaxSources)
		mux.HandleFunc(exchange.Path, func(w http.ResponseWriter, r *http.Request) {
			if !lim.allow(sourceOf(r.RemoteAddr), time.Now()) {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "too many certificate requests to this member: retry", http.StatusTooManyRequests)
				return
			}
			c.Exchange.ServeHTTP(w, r)
		})
	}
	mux.Handle("/metrics", readers(c.Metrics))
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on status address %s: %w", c.Addr, err)
	}
	sl := newStatusListener(ln, MaxConns, MaxConnsPerSource)
	ln = sl
	// HTTP/1.1 only: one request at a time per connection, so the
	// connection caps bound the requests in flight too. The port's
	// clients (Consul's check, members, Prometheus, creds) gain nothing
	// from HTTP/2, which would need its own limits.
	var http1 http.Protocols
	http1.SetHTTP1(true)
	srv := &http.Server{Handler: mux, ConnState: sl.connState, ReadHeaderTimeout: HeaderTimeout, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout, MaxHeaderBytes: MaxHeaderBytes,
		Protocols: &http1}
	if c.TLS != nil {
		srv.TLSConfig = c.TLS
		go func() { _ = srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { _ = srv.Serve(ln) }()
	}
	return &Server{http: srv}, nil
}

// Shutdown stops the status port (http.Server.Shutdown).
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }

// reader decides whether r may read /status and /metrics: 0, or
// the refusal's HTTP status and text. Both name every member and its ids,
// revision and decisions, and etcd's metrics raft's terms and indexes:
// what forging raft messages takes. With TLS auto they are served to a
// client certificate of a status CA this member accepts (StatusCA, and
// during a CA rotation the next CA's), which `status` and `tls
// status-cert` present, or to etcd's root user's from a cluster CA (the
// members' own clients, `env`, `snapshot`); an application's certificate
// from the exchange is refused. With TLS files, to any certificate of the
// definition's CA: there is no status CA, and that CA opens the peer port
// too. With TLS off, to everyone, as etcd's own ports.
func (c Config) reader(r *http.Request) (int, string) {
	switch {
	case r.TLS == nil:
		return 0, ""
	case len(r.TLS.VerifiedChains) == 0:
		return http.StatusUnauthorized, "this needs a client certificate from the cluster's status CA (etcd-nomad tls status-cert) or etcd's root user's"
	case c.StatusCAs == nil:
		return 0, ""
	}
	accepted := certs.ParseCertificates(c.StatusCA)
	accepted = append(accepted, certs.ParseCertificates(c.StatusCAs())...)
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
