package identity

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

type staticKeys struct {
	doc   []byte
	reads int
}

func (s *staticKeys) JWKS(context.Context) ([]byte, error) { s.reads++; return s.doc, nil }

func jwks(t *testing.T, kid string, k *rsa.PublicKey) []byte {
	t.Helper()
	enc := base64.RawURLEncoding
	b, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kid": kid, "kty": "RSA", "alg": "RS256", "use": "sig",
		"n": enc.EncodeToString(k.N.Bytes()), "e": enc.EncodeToString(big.NewInt(int64(k.E)).Bytes()),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sign(t *testing.T, key *rsa.PrivateKey, kid string, c Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Only a token signed by a key of the cluster's JWKS, unexpired, for our
// audience and naming a job is accepted; a forged, expired, foreign or
// incomplete one is refused with ErrInvalid.
func TestVerifyAcceptsOnlyNomadTokensForUs(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	src := &staticKeys{doc: jwks(t, "k1", &key.PublicKey)}
	v := &Verifier{Keys: src}
	now := time.Now()
	good := Claims{Namespace: "default", Job: "billing", Task: "app", AllocationID: "a1",
		RegisteredClaims: jwt.RegisteredClaims{Audience: jwt.ClaimStrings{ClusterAudience("main")}, ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}}
	c, err := v.Verify(context.Background(), sign(t, key, "k1", good), "main")
	if err != nil {
		t.Fatalf("valid token refused: %v", err)
	}
	if c.Job != "billing" || c.Namespace != "default" || c.Task != "app" {
		t.Errorf("claims %+v", c)
	}
	bad := func(name string, tok string) {
		t.Helper()
		if _, err := v.Verify(context.Background(), tok, "main"); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	wrongAud := good
	wrongAud.Audience = jwt.ClaimStrings{"nomadproject.io"}
	bad("another audience", sign(t, key, "k1", wrongAud))
	expired := good
	expired.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Minute))
	bad("expired", sign(t, key, "k1", expired))
	noExp := good
	noExp.ExpiresAt = nil
	bad("no expiry", sign(t, key, "k1", noExp))
	bad("signed by another key under our key id", sign(t, other, "k1", good))
	noJob := good
	noJob.Job = ""
	bad("no job claim", sign(t, key, "k1", noJob))
	reads := src.reads
	bad("unknown key id", sign(t, other, "k2", good))
	bad("unknown key id again", sign(t, other, "k2", good))
	if src.reads-reads > 1 {
		t.Errorf("unknown key ids read the JWKS %d times in a row, want at most once per %s", src.reads-reads, refetchEvery)
	}
	none := jwt.NewWithClaims(jwt.SigningMethodNone, good)
	s, _ := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	bad("alg none", s)
}

// hungKeys is a Nomad API that accepts the JWKS request and never
// answers: each call blocks until its context ends.
type hungKeys struct {
	mu    sync.Mutex
	calls int
}

func (h *hungKeys) JWKS(ctx context.Context) ([]byte, error) {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (h *hungKeys) n() int { h.mu.Lock(); defer h.mu.Unlock(); return h.calls }

// A JWKS read that hangs holds no lock others wait on: a caller whose own
// context ends returns then, whatever the first caller's read does; the
// read itself gives up at FetchTimeout though its caller set no deadline;
// concurrent misses share that one read (Nomad sees one request); and a
// failed read is not repeated by the next token before refetchEvery.
func TestHungJWKSReadBlocksNoOne(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	now := time.Now()
	tok := sign(t, key, "k1", Claims{Namespace: "default", Job: "billing",
		RegisteredClaims: jwt.RegisteredClaims{Audience: jwt.ClaimStrings{ClusterAudience("main")}, ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}})
	src := &hungKeys{}
	v := &Verifier{Keys: src}
	first := make(chan error, 1)
	start := time.Now()
	go func() { _, err := v.Verify(context.Background(), tok, "main"); first <- err }()
	time.Sleep(100 * time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	second := make(chan error, 1)
	go func() { _, err := v.Verify(ctx, tok, "main"); second <- err }()
	select {
	case err := <-second:
		if err == nil || time.Since(start) > FetchTimeout {
			t.Errorf("second caller: %v after %s", err, time.Since(start))
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("a caller with a 1 s deadline is still waiting after 3 s behind another caller's hung JWKS read")
	}
	select {
	case err := <-first:
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("first caller: %v, want ErrUnavailable", err)
		}
		if d := time.Since(start); d > FetchTimeout+2*time.Second {
			t.Errorf("hung read given up after %s, want about FetchTimeout %s", d, FetchTimeout)
		}
	case <-time.After(FetchTimeout + 3*time.Second):
		t.Fatalf("a caller without a deadline still waits on the hung JWKS read %s after it started (FetchTimeout %s)", time.Since(start), FetchTimeout)
	}
	if n := src.n(); n != 1 {
		t.Errorf("Nomad saw %d JWKS requests from two concurrent misses, want 1", n)
	}
	if _, err := v.Verify(context.Background(), tok, "main"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("after a failed read: %v, want ErrUnavailable", err)
	}
	if n := src.n(); n != 1 {
		t.Errorf("a token right after a failed read read the JWKS again (%d reads), want none before %s", n, refetchEvery)
	}
}

// A fetched key is trusted for keysMaxAge at most: the first token after
// that reads the JWKS again, and a key the new JWKS no longer lists (Nomad
// rotated it out) stops verifying; within keysMaxAge a known key costs no
// read.
func TestKeysOlderThanMaxAgeAreFetchedAgainAndRotatedOutOnesDropped(t *testing.T) {
	old, _ := rsa.GenerateKey(rand.Reader, 2048)
	next, _ := rsa.GenerateKey(rand.Reader, 2048)
	clock := time.Now()
	src := &staticKeys{doc: jwks(t, "k1", &old.PublicKey)}
	v := &Verifier{Keys: src, Now: func() time.Time { return clock }}
	claims := Claims{Namespace: "default", Job: "billing",
		RegisteredClaims: jwt.RegisteredClaims{Audience: jwt.ClaimStrings{ClusterAudience("main")}, ExpiresAt: jwt.NewNumericDate(clock.Add(3 * keysMaxAge))}}
	oldTok, nextTok := sign(t, old, "k1", claims), sign(t, next, "k2", claims)
	if _, err := v.Verify(context.Background(), oldTok, "main"); err != nil {
		t.Fatalf("k1 token with k1 in the JWKS: %v", err)
	}
	src.doc = jwks(t, "k2", &next.PublicKey) // Nomad rotated k1 out

	clock = clock.Add(keysMaxAge - time.Second)
	if _, err := v.Verify(context.Background(), oldTok, "main"); err != nil || src.reads != 1 {
		t.Errorf("within keysMaxAge: %v after %d JWKS reads, want the cached k1 and 1 read", err, src.reads)
	}
	clock = clock.Add(2 * time.Second)
	if _, err := v.Verify(context.Background(), oldTok, "main"); !errors.Is(err, ErrInvalid) {
		t.Errorf("k1 token after keysMaxAge, k1 gone from the JWKS: %v, want ErrInvalid", err)
	}
	if src.reads != 2 {
		t.Errorf("JWKS read %d times, want a second read once the keys are older than keysMaxAge", src.reads)
	}
	if _, err := v.Verify(context.Background(), nextTok, "main"); err != nil || src.reads != 2 {
		t.Errorf("k2 token after the refetch: %v after %d reads, want accepted from the new keys", err, src.reads)
	}
}

// A key absent from the latest successful fetch stops verifying, whatever
// made that fetch happen (here a token with a new key id).
func TestKeyDroppedFromTheJWKSStopsVerifyingAfterTheNextFetch(t *testing.T) {
	old, _ := rsa.GenerateKey(rand.Reader, 2048)
	next, _ := rsa.GenerateKey(rand.Reader, 2048)
	clock := time.Now()
	src := &staticKeys{doc: jwks(t, "k1", &old.PublicKey)}
	v := &Verifier{Keys: src, Now: func() time.Time { return clock }}
	claims := Claims{Namespace: "default", Job: "billing",
		RegisteredClaims: jwt.RegisteredClaims{Audience: jwt.ClaimStrings{ClusterAudience("main")}, ExpiresAt: jwt.NewNumericDate(clock.Add(time.Hour))}}
	oldTok, nextTok := sign(t, old, "k1", claims), sign(t, next, "k2", claims)
	if _, err := v.Verify(context.Background(), oldTok, "main"); err != nil {
		t.Fatal(err)
	}
	src.doc = jwks(t, "k2", &next.PublicKey)
	clock = clock.Add(refetchEvery)
	if _, err := v.Verify(context.Background(), nextTok, "main"); err != nil {
		t.Fatalf("k2 token: %v", err)
	}
	if _, err := v.Verify(context.Background(), oldTok, "main"); !errors.Is(err, ErrInvalid) {
		t.Errorf("k1 token after a fetch that no longer lists k1: %v, want ErrInvalid", err)
	}
}
