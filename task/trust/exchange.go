package trust

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/exchange"
	"github.com/etcd-nomad/etcd-nomad/identity"
)

// The exchange (certs/exchange holds its wire types): a workload's
// identity for a client certificate of the cluster CA.

// exchangeMaxBody bounds a certificate request: a JWT and a PEM CSR
// are a few KiB.
const exchangeMaxBody = 64 << 10

// exchangeError is a refusal with its HTTP status.
type exchangeError struct {
	code int
	msg  string
}

func (e *exchangeError) Error() string { return e.msg }

func refuse(code int, format string, args ...any) error {
	return &exchangeError{code: code, msg: fmt.Sprintf(format, args...)}
}

func (t *Trust) serveExchange(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a CertRequest", http.StatusMethodNotAllowed)
		return
	}
	var req exchange.Request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, exchangeMaxBody)).Decode(&req); err != nil {
		code := http.StatusBadRequest
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			code = http.StatusRequestEntityTooLarge
		}
		http.Error(w, "decode request: "+err.Error(), code)
		return
	}
	resp, err := t.Exchange(r.Context(), req)
	if err != nil {
		code := http.StatusInternalServerError
		var ee *exchangeError
		if errors.As(err, &ee) {
			code = ee.code
		}
		t.log.Warn("client certificate refused", "error", err, "remote", r.RemoteAddr)
		http.Error(w, err.Error(), code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// Exchange verifies req's identity and signs its request for the user its
// job maps to.
func (t *Trust) Exchange(ctx context.Context, req exchange.Request) (exchange.Response, error) {
	a := t.cfg.Cluster.Access
	switch {
	case t.ca == nil:
		return exchange.Response{}, refuse(http.StatusNotImplemented, "this cluster does not run TLS auto: no CA to issue from")
	case a == nil:
		return exchange.Response{}, refuse(http.StatusForbidden, "the cluster definition has no access block: no workload is mapped to a user")
	case t.cfg.Identities == nil:
		return exchange.Response{}, refuse(http.StatusNotImplemented, "this member cannot verify Nomad workload identities (not running on Nomad)")
	}
	claims, err := t.cfg.Identities.Verify(ctx, req.Identity, t.cfg.Cluster.Name)
	if errors.Is(err, identity.ErrUnavailable) {
		return exchange.Response{}, refuse(http.StatusServiceUnavailable, "%v", err)
	}
	if errors.Is(err, identity.ErrInvalid) {
		return exchange.Response{}, refuse(http.StatusUnauthorized, "%v", err)
	}
	if err != nil {
		return exchange.Response{}, err
	}
	u := a.UserForJob(claims.Namespace, claims.Job)
	if u == nil {
		return exchange.Response{}, refuse(http.StatusForbidden, "job %q in namespace %q is in no user's nomad_jobs in the access block", claims.Job, claims.Namespace)
	}
	now := time.Now()
	ttl := certificateTTL(a.CertificateTTL, now, claims.ExpiresAt.Time)
	cert, err := certs.SignClientCSR(*t.currentCA(), []byte(req.CSR), u.Name, now, ttl)
	if err != nil {
		return exchange.Response{}, refuse(http.StatusBadRequest, "%v", err)
	}
	t.log.Info("client certificate issued", "user", u.Name, "namespace", claims.Namespace, "job", claims.Job, "task", claims.Task, "alloc", claims.AllocationID, "valid_for", ttl)
	resp := exchange.Response{User: u.Name, Certificate: string(cert) + string(t.chain()), CA: string(t.rotationTrust()), NotAfter: now.Add(ttl)}
	if claims.LegacyAudience {
		resp.Warning = legacyAudienceWarning(t.cfg.Cluster.Name)
		t.log.Warn(resp.Warning, "namespace", claims.Namespace, "job", claims.Job, "task", claims.Task)
	}
	return resp, nil
}

// legacyAudienceWarning is what the member logs, and the answer tells
// creds, for a token taken for the bare audience identity.Audience.
func legacyAudienceWarning(cluster string) string {
	return fmt.Sprintf("the workload identity's audience is %q, which every etcd-nomad cluster takes: a token sent to another cluster's members buys a certificate here too; "+
		"set the identity block's aud to [%q] (a later version refuses %q)", identity.Audience, identity.ClusterAudience(cluster), identity.Audience)
}

// ExchangeTokenMargin is how long a certificate may outlive the workload
// identity that bought it. Nomad renews a task's identity before it
// expires, and `creds` renews its certificate at two thirds of its life,
// so an application whose token is short-lived exchanges a fresh one in
// time; the minute covers the clocks of the member and Nomad's servers
// disagreeing (the verifier itself allows 5 s of leeway).
const ExchangeTokenMargin = time.Minute

// certificateTTL is the validity of a certificate issued at now for a
// token expiring at exp: access.certificate_ttl, capped so that the
// certificate ends by exp + ExchangeTokenMargin. A stolen or revoked
// token buys no more than its own remaining life (and the margin), not
// certificate_ttl; a token that is about to expire still gets a
// certificate, of at least the margin less the verifier's leeway.
func certificateTTL(ttl time.Duration, now, exp time.Time) time.Duration {
	if left := exp.Add(ExchangeTokenMargin).Sub(now); left < ttl {
		return left
	}
	return ttl
}

// putter is implemented by coordinators that can hold other keys (the
// summary's writer in task): the CA certificate is published beside.
type putter interface {
	Put(ctx context.Context, key string, value []byte) error
}

// caCertRepublish paces the leader's writes of the CA certificate: at
// once when it leads, then again this often (the coordinator may have
// lost its state meanwhile; one small write).
const caCertRepublish = 5 * time.Minute

// PublishCACert carries out SideJobs.PublishCACert: the leader writes the CA
// certificate to the coordinator when the definition lets workloads
// exchange identities for certificates.
func (t *Trust) PublishCACert(ctx context.Context) {
	sw, ok := t.cfg.Coordinator.(putter)
	if !ok || t.ca == nil {
		return
	}
	if err := sw.Put(ctx, exchange.CACertKey, bytes.Clone(t.rotationTrust())); err != nil {
		t.log.Warn("CA certificate not published", "error", err)
		return
	}
	t.caCertPublished = t.cfg.Now()
}

// PublishDue reports whether the leader's write of the CA certificate is
// due at now.
func (t *Trust) PublishDue(now time.Time) bool { return now.Sub(t.caCertPublished) >= caCertRepublish }
