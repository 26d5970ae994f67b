// Package creds keeps an application's etcd client certificate fresh: it
// trades the task's Nomad workload identity for a short-lived certificate
// at a member's exchange endpoint (task.ExchangePath) and writes it, with
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
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/task"
)

// StatusPortMeta is the Consul service meta key under which the rendered
// job registers each member's status port (where the exchange is served).
const StatusPortMeta = "status_port"

// Options say where the cluster and the identity are.
type Options struct {
	// Cluster is the cluster's name: its Consul service's.
	Cluster string
	// Prefix is the coordination prefix (coordination "consul" { prefix }),
	// under which the leader publishes the CA certificate.
	Prefix string
	// Consul reads the service catalog and the CA certificate.
	Consul *consulapi.Client
	// IdentityFile holds the workload identity JWT (Nomad writes and
	// renews it: identity { aud = ["etcd-nomad"] file = true }).
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

// Fetch obtains a certificate once and writes it.
func Fetch(ctx context.Context, o Options) (Result, error) {
	caPEM, err := caCert(ctx, o)
	if err != nil {
		return Result{}, err
	}
	pool, err := certs.Pool(caPEM)
	if err != nil {
		return Result{}, fmt.Errorf("CA certificate in Consul: %w", err)
	}
	eps, err := endpoints(ctx, o)
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
	body, _ := json.Marshal(task.CertRequest{Identity: strings.TrimSpace(string(jwt)), CSR: string(csr)})
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	var errs []error
	for _, ep := range eps {
		resp, err := post(ctx, hc, ep, body)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f, err := certs.Write(o.Dir, "client", caPEM, certs.Pair{Cert: []byte(resp.Certificate), Key: key})
		if err != nil {
			return Result{}, fmt.Errorf("write %s: %w", o.Dir, err)
		}
		return Result{Files: f, User: resp.User, NotAfter: notAfter([]byte(resp.Certificate), resp.NotAfter), Member: ep}, nil
	}
	return Result{}, fmt.Errorf("no member issued a certificate: %w", errors.Join(errs...))
}

func post(ctx context.Context, hc *http.Client, ep string, body []byte) (task.CertResponse, error) {
	var out task.CertResponse
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep+task.ExchangePath, bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return out, fmt.Errorf("%s: %s: %s", ep, resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("%s: decode: %w", ep, err)
	}
	return out, nil
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

func caCert(ctx context.Context, o Options) ([]byte, error) {
	key := o.Prefix + "/" + o.Cluster + "/" + task.CACertKey
	kv, _, err := o.Consul.KV().Get(key, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("read the cluster CA certificate at Consul key %s: %w", key, err)
	}
	if kv == nil {
		return nil, fmt.Errorf("no CA certificate at Consul key %s yet (the leader publishes it when the definition has an access block)", key)
	}
	return kv.Value, nil
}

// endpoints lists the exchange URLs of the passing members.
func endpoints(ctx context.Context, o Options) ([]string, error) {
	entries, _, err := o.Consul.Health().Service(o.Cluster, "", true, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("consul service %s: %w", o.Cluster, err)
	}
	var out []string
	for _, e := range entries {
		port := e.Service.Meta[StatusPortMeta]
		addr := e.Service.Address
		if addr == "" {
			addr = e.Node.Address
		}
		if port == "" {
			continue
		}
		out = append(out, "https://"+net.JoinHostPort(addr, port))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no passing instance of Consul service %s names its %s", o.Cluster, StatusPortMeta)
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
