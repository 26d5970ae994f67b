package identity

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
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
		RegisteredClaims: jwt.RegisteredClaims{Audience: jwt.ClaimStrings{Audience}, ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}}
	c, err := v.Verify(context.Background(), sign(t, key, "k1", good))
	if err != nil {
		t.Fatalf("valid token refused: %v", err)
	}
	if c.Job != "billing" || c.Namespace != "default" || c.Task != "app" {
		t.Errorf("claims %+v", c)
	}
	bad := func(name string, tok string) {
		t.Helper()
		if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrInvalid) {
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
