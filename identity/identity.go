// Package identity verifies Nomad workload identities: the JWTs Nomad
// signs for each task, whose claims name the task's namespace, job, group,
// task and allocation. Keys come from the Nomad cluster's JWKS
// (/.well-known/jwks.json). It never issues anything and holds no secret.
package identity

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Audience is the prefix of the "aud" a workload identity must carry to
// be exchanged for an etcd client certificate: cluster main's members take
// ClusterAudience("main"), "etcd-nomad:main", which the app's job asks
// for in its identity block (aud = ["etcd-nomad:main"]). No token minted
// for another service (Nomad's default identity, Vault's, Consul's) is
// accepted, nor one minted for another etcd-nomad cluster: a token an
// application sent to cluster B's members buys nothing from cluster A's.
//
// Audience alone, the one every cluster took before per-cluster
// audiences, is still taken, with Claims.LegacyAudience set so that the
// exchange warns, unless the token also names another cluster's audience:
// refusing it would stop every application at the members' rolling
// update, and an application can ask for both (aud = ["etcd-nomad",
// "etcd-nomad:main"]) to be served by members of either version.
const Audience = "etcd-nomad"

// ClusterAudience is the audience cluster's exchange takes.
func ClusterAudience(cluster string) string { return Audience + ":" + cluster }

// Claims are a workload identity's claims that matter here.
type Claims struct {
	Namespace    string `json:"nomad_namespace"`
	Job          string `json:"nomad_job_id"`
	Task         string `json:"nomad_task"`
	AllocationID string `json:"nomad_allocation_id"`
	jwt.RegisteredClaims
	// LegacyAudience is set when the token was taken for the bare
	// Audience of earlier versions, not its cluster's own.
	LegacyAudience bool `json:"-"`
}

// KeySource returns a JWKS document.
type KeySource interface {
	JWKS(ctx context.Context) ([]byte, error)
}

// ErrInvalid wraps every refusal of a token.
var ErrInvalid = errors.New("invalid workload identity")

// ErrUnavailable wraps a refusal because the Nomad cluster's keys could
// not be read (Nomad's API down or hung): the token may be good, retry.
var ErrUnavailable = errors.New("the Nomad cluster's keys cannot be read")

// refetchEvery bounds how often an unknown key id makes the verifier read
// the JWKS again (Nomad rotates its keys; a flood of bad tokens must not
// become a flood of JWKS reads). A failed read counts: a token that comes
// within refetchEvery of it is refused with the same error.
const refetchEvery = 10 * time.Second

// keysMaxAge bounds how long keys from one JWKS read are trusted: the
// first token after it reads the JWKS again, and the keys that read no
// longer lists stop verifying. Without it a key Nomad rotated out (or
// removed after a leak) would verify tokens until the process restarts.
// An hour bounds that, at the cost of one JWKS read an hour per member.
const keysMaxAge = time.Hour

// FetchTimeout bounds one JWKS read. The read runs on its own, under no
// caller's context and holding no lock, so a Nomad API that never answers
// costs one goroutine for this long, never a caller's request: each
// caller waits for it only as long as its own context allows. Nomad
// answers from its local task API socket in milliseconds; 5 s leaves room
// for a loaded agent and stays under the status port's read timeout.
const FetchTimeout = 5 * time.Second

// Verifier checks workload identities against a Nomad cluster's keys.
type Verifier struct {
	Keys KeySource
	// Now, optional, defaults to time.Now: the clock for tokens' expiry,
	// keysMaxAge and refetchEvery.
	Now func() time.Time

	mu      sync.Mutex
	keys    map[string]crypto.PublicKey // exactly those of the last good read
	fetched time.Time                   // the last good read's start
	tried   time.Time                   // the last read's start; zero before the first
	err     error                       // the last read's error
	reading *read                       // the read under way, shared by concurrent misses
}

// read is one JWKS read; done closes once keys or err is set.
type read struct {
	done  chan struct{}
	start time.Time
	keys  map[string]crypto.PublicKey
	err   error
}

// Verify checks token's signature and expiry, and that its audience is
// cluster's (ClusterAudience; Audience, see there), and returns its
// claims. Refusals wrap ErrInvalid; those for want of the cluster's keys
// wrap ErrUnavailable too.
func (v *Verifier) Verify(ctx context.Context, token, cluster string) (Claims, error) {
	if cluster == "" {
		return Claims{}, fmt.Errorf("%w: no cluster to verify the audience for", ErrInvalid)
	}
	var c Claims
	p := jwt.NewParser(jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "EdDSA"}),
		jwt.WithExpirationRequired(), jwt.WithTimeFunc(v.now), jwt.WithLeeway(5*time.Second))
	_, err := p.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return v.key(ctx, kid)
	})
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if c.LegacyAudience, err = audienceFor(c.Audience, cluster); err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if c.Job == "" || c.Namespace == "" {
		return Claims{}, fmt.Errorf("%w: no nomad_job_id or nomad_namespace claim", ErrInvalid)
	}
	return c, nil
}

// audienceFor checks that a token for the audiences aud is for cluster:
// it names ClusterAudience(cluster), or the bare Audience (legacy), and no
// other cluster's: a token naming two clusters goes to both clusters'
// members, and each could replay it at the other (an application that
// uses two clusters takes one identity per cluster).
func audienceFor(aud []string, cluster string) (legacy bool, err error) {
	own := ClusterAudience(cluster)
	var others []string
	mine := false
	for _, a := range aud {
		switch {
		case a == own:
			mine = true
		case a == Audience:
			legacy = true
		case strings.HasPrefix(a, Audience+":"):
			others = append(others, a)
		}
	}
	switch {
	case len(others) > 0 && mine:
		return false, fmt.Errorf("token for %s besides this cluster's %s: the other cluster's members could replay it here; give the application one identity per cluster", strings.Join(others, ", "), own)
	case len(others) > 0:
		return false, fmt.Errorf("token for %s, not for this cluster (%s)", strings.Join(others, ", "), own)
	case mine:
		return false, nil
	case !legacy:
		return false, fmt.Errorf("token audience %q does not name %s", aud, own)
	}
	return true, nil
}

func (v *Verifier) key(ctx context.Context, kid string) (crypto.PublicKey, error) {
	now := v.now()
	v.mu.Lock()
	fresh := now.Sub(v.fetched) < keysMaxAge
	if k, ok := v.keys[kid]; ok && fresh {
		v.mu.Unlock()
		return k, nil
	}
	r := v.reading
	if r == nil {
		if !v.tried.IsZero() && now.Sub(v.tried) < refetchEvery {
			// Keys past keysMaxAge are not used even then: the read
			// that failed was the one meant to confirm them.
			err := v.err
			v.mu.Unlock()
			if err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("unknown key id %q", kid)
		}
		r = &read{done: make(chan struct{}), start: now}
		v.reading, v.tried = r, now
		go v.read(r)
	}
	v.mu.Unlock()
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for the JWKS: %w", ErrUnavailable, ctx.Err())
	}
	if r.err != nil {
		return nil, r.err
	}
	if k, ok := r.keys[kid]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("unknown key id %q", kid)
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// read carries out r and publishes its outcome: on success its keys
// replace the cached ones, so a key the JWKS no longer lists is dropped.
func (v *Verifier) read(r *read) {
	ctx, cancel := context.WithTimeout(context.Background(), FetchTimeout)
	defer cancel()
	b, err := v.Keys.JWKS(ctx)
	if err != nil {
		r.err = fmt.Errorf("%w: read the Nomad cluster's JWKS: %w", ErrUnavailable, err)
	} else if r.keys, err = ParseJWKS(b); err != nil {
		r.err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	v.mu.Lock()
	if r.err == nil {
		v.keys, v.fetched = r.keys, r.start
	}
	v.err, v.reading = r.err, nil
	v.mu.Unlock()
	close(r.done)
}

// ParseJWKS reads the RSA and Ed25519 public keys of a JWKS document, by
// key id.
func ParseJWKS(b []byte) (map[string]crypto.PublicKey, error) {
	var doc struct {
		Keys []struct {
			Kid string `json:"kid"`
			Kty string `json:"kty"`
			Crv string `json:"crv"`
			N   string `json:"n"`
			E   string `json:"e"`
			X   string `json:"x"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("decode JWKS: %w", err)
	}
	out := map[string]crypto.PublicKey{}
	dec := base64.RawURLEncoding
	for _, k := range doc.Keys {
		switch {
		case k.Kty == "RSA":
			n, err1 := dec.DecodeString(k.N)
			e, err2 := dec.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(e) > 4 {
				return nil, fmt.Errorf("JWKS key %q: bad RSA modulus or exponent", k.Kid)
			}
			out[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		case k.Kty == "OKP" && k.Crv == "Ed25519":
			x, err := dec.DecodeString(k.X)
			if err != nil || len(x) != ed25519.PublicKeySize {
				return nil, fmt.Errorf("JWKS key %q: bad Ed25519 key", k.Kid)
			}
			out[k.Kid] = ed25519.PublicKey(x)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("JWKS holds no RSA or Ed25519 key")
	}
	return out, nil
}
