// Package creds keeps an application's etcd client certificate fresh: it
// trades the task's Nomad workload identity for a short-lived certificate
// at a member's exchange endpoint (exchange.Path) and writes it, with
// the cluster CA's certificate, where the application reads it. The key
// is made here and never sent; the CA key is never seen.
package creds

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/exchange"
	"github.com/etcd-nomad/etcd-nomad/provider"
)

// StatusPortMeta is the Consul service meta key under which the rendered
// job registers each member's status port (where the exchange is served).
const StatusPortMeta = "status_port"

// Options say where the cluster and the identity are.
type Options struct {
	// Catalog says where the members are and which CA they publish:
	// ConsulCatalog. Whoever may write Consul's keys or register its
	// services decides what it returns, hence CAFingerprint.
	Catalog Catalog
	// CAFingerprint pins the cluster CA (ParseFingerprint's form). With
	// it, the identity goes only to a member whose TLS chain verifies
	// under the pinned CA (directly, or through a cross certificate the
	// pinned CA signed during a CA rotation), and nothing is sent when
	// the CA Consul publishes is not the pinned one. Empty: the CA Consul
	// publishes is trusted as it is, with a warning.
	CAFingerprint string
	// IdentityFile holds the workload identity JWT (Nomad writes and
	// renews it: identity { aud = ["etcd-nomad:<cluster>"] file = true }).
	IdentityFile string
	// Dir receives ca.crt, client.crt and client.key (0600, dir 0700).
	Dir string
	// Logger, optional.
	Logger hclog.Logger
}

// Result is one fetched certificate.
type Result struct {
	Files    certs.Files
	User     string
	NotAfter time.Time
	// Member is the exchange endpoint that answered.
	Member string
}

// Catalog is what creds reads from Consul. Both answers are whatever a
// writer of Consul's keys or catalog made them.
type Catalog interface {
	// CACert returns the CA certificates the leader publishes (PEM) and
	// where they were read, for messages.
	CACert(ctx context.Context) (pem []byte, where string, err error)
	// Endpoints returns the exchange base URLs (https://host:port) of the
	// passing members.
	Endpoints(ctx context.Context) ([]string, error)
}

// Fetch obtains a certificate once and writes it.
func Fetch(ctx context.Context, o Options) (Result, error) {
	caPEM, where, err := o.Catalog.CACert(ctx)
	if err != nil {
		return Result{}, err
	}
	// With a pin the members must prove themselves to the pinned CA
	// alone, and that is settled before anything is sent.
	var pinned *x509.Certificate
	roots := caPEM
	if o.CAFingerprint == "" && o.Logger != nil {
		o.Logger.Warn("the cluster CA is not pinned: trusting the CA certificate Consul holds, so whoever may write it can receive this task's workload identity and have the application trust its CA; set -ca-fingerprint ("+FingerprintEnv+") to the fingerprint `etcd-nomad tls fingerprint` prints",
			"ca", certFingerprints(caPEM), "source", where)
	}
	if o.CAFingerprint != "" {
		pin, err := ParseFingerprint(o.CAFingerprint)
		if err != nil {
			return Result{}, err
		}
		var retired bool
		if pinned, retired, err = pinnedCA(pin, caPEM, o.Dir, where); err != nil {
			return Result{}, err
		}
		if retired && o.Logger != nil {
			// Not refused: a sidecar pinned before a rotation must keep
			// its application running (docs/clients.md: Pin the cluster CA). Said
			// at every fetch until the pin is updated.
			o.Logger.Warn("RE-PIN: the pinned cluster CA is no longer published (a CA rotation retired it, or a writer of Consul's keys replaced it): this task still trusts it, from the ca.crt it wrote before, so whoever holds the retired CA's key can receive this task's workload identity and have the application trust it; set -ca-fingerprint ("+FingerprintEnv+") to the new fingerprint (`etcd-nomad tls fingerprint`, or the last line of `etcd-nomad tls rotate-ca`) and redeploy",
				"pin", pin, "published", certFingerprints(caPEM), "source", where)
		}
		roots = encodeCert(pinned)
	}
	pool, err := certs.Pool(roots)
	if err != nil {
		return Result{}, fmt.Errorf("CA certificate at %s: %w", where, err)
	}
	eps, err := o.Catalog.Endpoints(ctx)
	if err != nil {
		return Result{}, err
	}
	jwt, err := os.ReadFile(o.IdentityFile)
	if err != nil {
		return Result{}, fmt.Errorf("workload identity: %w", err)
	}
	csr, key, err := certs.NewCSR()
	if err != nil {
		return Result{}, err
	}
	body, _ := json.Marshal(exchange.Request{Identity: strings.TrimSpace(string(jwt)), CSR: string(csr)})
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	var errs []error
	for _, ep := range eps {
		resp, chains, err := post(ctx, hc, ep, body)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		trust := caPEM
		if pinned != nil {
			trust = vouched(pinned, caPEM, chains)
		}
		if resp.Warning != "" && o.Logger != nil {
			o.Logger.Warn(resp.Warning, "member", ep)
		}
		f, err := certs.Write(o.Dir, "client", trust, certs.Pair{Cert: []byte(resp.Certificate), Key: key})
		if err != nil {
			return Result{}, fmt.Errorf("write %s: %w", o.Dir, err)
		}
		return Result{Files: f, User: resp.User, NotAfter: notAfter([]byte(resp.Certificate), resp.NotAfter), Member: ep}, nil
	}
	return Result{}, fmt.Errorf("no member issued a certificate: %w", errors.Join(errs...))
}

// post sends the exchange request to ep; it returns the answer and the
// chains the member's certificate verified with.
func post(ctx context.Context, hc *http.Client, ep string, body []byte) (exchange.Response, [][]*x509.Certificate, error) {
	var out exchange.Response
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep+exchange.Path, bytes.NewReader(body))
	if err != nil {
		return out, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return out, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return out, nil, fmt.Errorf("%s: %s: %s", ep, resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, nil, fmt.Errorf("%s: decode: %w", ep, err)
	}
	var chains [][]*x509.Certificate
	if resp.TLS != nil {
		chains = resp.TLS.VerifiedChains
	}
	return out, chains, nil
}

// notAfter reads the certificate's expiry, or falls back to the one the
// member reported.
func notAfter(certPEM []byte, reported time.Time) time.Time {
	if blk, _ := pem.Decode(certPEM); blk != nil {
		if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
			return c.NotAfter
		}
	}
	return reported
}

// ConsulCatalog reads the cluster's Consul service and the CA certificate
// its leader publishes at PREFIX/CLUSTER/ca.crt (exchange.CACertKey).
type ConsulCatalog struct {
	Client *consulapi.Client
	// Prefix is the coordination prefix (coordination "consul" { prefix }).
	Prefix string
	// Cluster is the cluster's name: its Consul service's.
	Cluster string
}

var _ Catalog = ConsulCatalog{}

// CACert reads the published CA certificate.
func (c ConsulCatalog) CACert(ctx context.Context) ([]byte, string, error) {
	key := c.Prefix + "/" + c.Cluster + "/" + exchange.CACertKey
	where := "Consul key " + key
	kv, _, err := c.Client.KV().Get(key, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, where, fmt.Errorf("read the cluster CA certificate at %s: %w", where, err)
	}
	if kv == nil {
		return nil, where, fmt.Errorf("no CA certificate at %s yet (the leader publishes it when the definition has an access block)", where)
	}
	return kv.Value, where, nil
}

// Endpoints lists the exchange URLs of the passing members.
func (c ConsulCatalog) Endpoints(ctx context.Context) ([]string, error) {
	entries, _, err := c.Client.Health().Service(c.Cluster, "", true, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("consul service %s: %w", c.Cluster, err)
	}
	var out []string
	for _, e := range entries {
		port := e.Service.Meta[StatusPortMeta]
		addr := e.Service.Address
		if addr == "" {
			addr = e.Node.Address
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			continue // no status port named, or not a number
		}
		out = append(out, provider.URL("https", addr, p))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no passing instance of Consul service %s names its %s", c.Cluster, StatusPortMeta)
	}
	sort.Strings(out)
	return out, nil
}

// Retry pacing when a fetch fails.
const (
	retryMin = time.Second
	retryMax = 30 * time.Second
)

// Run fetches a certificate and renews it at two thirds of its validity
// until ctx ends. Failures are retried with backoff, and never remove the
// files already written: a certificate still valid keeps serving.
func Run(ctx context.Context, o Options) error {
	log := o.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	wait := retryMin
	for {
		r, err := Fetch(ctx, o)
		next := wait
		if err != nil {
			log.Warn("certificate not renewed", "error", err, "retry_in", wait)
			wait = min(2*wait, retryMax)
		} else {
			wait = retryMin
			next = time.Until(r.NotAfter) * 2 / 3
			log.Info("certificate written", "user", r.User, "not_after", r.NotAfter.UTC().Format(time.RFC3339), "member", r.Member, "renew_in", next.Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}
