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
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Audience is the "aud" a workload identity must carry to be exchanged
// for an etcd client certificate: the app's job declares an identity
// block with aud = ["etcd-nomad"], so that no token minted for another
// service (Nomad's default identity, Vault's, Consul's) is accepted.
const Audience = "etcd-nomad"

// Claims are a workload identity's claims that matter here.
type Claims struct {
	Namespace    string `json:"nomad_namespace"`
	Job          string `json:"nomad_job_id"`
	Task         string `json:"nomad_task"`
	AllocationID string `json:"nomad_allocation_id"`
	jwt.RegisteredClaims
}

// KeySource returns a JWKS document.
type KeySource interface {
	JWKS(ctx context.Context) ([]byte, error)
}

// ErrInvalid wraps every refusal of a token.
var ErrInvalid = errors.New("invalid workload identity")

// refetchEvery bounds how often an unknown key id makes the verifier read
// the JWKS again (Nomad rotates its keys; a flood of bad tokens must not
// become a flood of JWKS reads).
const refetchEvery = 10 * time.Second

// Verifier checks workload identities against a Nomad cluster's keys.
type Verifier struct {
	Keys KeySource
	// Now, optional, defaults to time.Now.
	Now func() time.Time

	mu      sync.Mutex
	keys    map[string]crypto.PublicKey
	fetched time.Time
}

// Verify checks token's signature, expiry and audience, and returns its
// claims. Refusals wrap ErrInvalid.
func (v *Verifier) Verify(ctx context.Context, token string) (Claims, error) {
	var c Claims
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	p := jwt.NewParser(jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "EdDSA"}), jwt.WithAudience(Audience),
		jwt.WithExpirationRequired(), jwt.WithTimeFunc(now), jwt.WithLeeway(5*time.Second))
	_, err := p.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return v.key(ctx, kid)
	})
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if c.Job == "" || c.Namespace == "" {
		return Claims{}, fmt.Errorf("%w: no nomad_job_id or nomad_namespace claim", ErrInvalid)
	}
	return c, nil
}

func (v *Verifier) key(ctx context.Context, kid string) (crypto.PublicKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k, ok := v.keys[kid]; ok {
		return k, nil
	}
	if !v.fetched.IsZero() && time.Since(v.fetched) < refetchEvery {
		return nil, fmt.Errorf("unknown key id %q", kid)
	}
	b, err := v.Keys.JWKS(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the Nomad cluster's JWKS: %w", err)
	}
	keys, err := ParseJWKS(b)
	if err != nil {
		return nil, err
	}
	v.keys, v.fetched = keys, time.Now()
	if k, ok := keys[kid]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("unknown key id %q", kid)
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
