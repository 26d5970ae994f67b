package identity

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// A token replayed at another cluster's members: cluster main takes a
// token whose audiences name etcd-nomad:main, and the bare etcd-nomad
// of earlier versions (flagged legacy), and only when no other cluster's
// audience is named beside either; a token for etcd-nomad:other, a prefix
// look-alike, an empty cluster or a verifier asked for no cluster is
// refused.
func TestVerifyTakesOnlyThisClustersAudience(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	v := &Verifier{Keys: &staticKeys{doc: jwks(t, "k1", &key.PublicKey)}}
	tok := func(aud ...string) string {
		return sign(t, key, "k1", Claims{Namespace: "default", Job: "billing",
			RegisteredClaims: jwt.RegisteredClaims{Audience: aud, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
	}
	for _, c := range []struct {
		aud    []string
		ok     bool
		legacy bool
	}{
		{[]string{"etcd-nomad:main"}, true, false},
		{[]string{"etcd-nomad", "etcd-nomad:main"}, true, false},
		// A token naming two clusters is sent to both clusters' members:
		// each could replay it at the other (security review, session 11).
		{[]string{"etcd-nomad:other", "etcd-nomad:main"}, false, false},
		{[]string{"etcd-nomad:main", "etcd-nomad:other"}, false, false},
		{[]string{"etcd-nomad"}, true, true},
		{[]string{"nomadproject.io", "etcd-nomad"}, true, true},
		{[]string{"etcd-nomad:other"}, false, false},
		{[]string{"etcd-nomad", "etcd-nomad:other"}, false, false},
		{[]string{"etcd-nomad:main2"}, false, false},
		{[]string{"etcd-nomad:"}, false, false},
		{[]string{"etcd-nomad:Main"}, false, false},
		{[]string{"main"}, false, false},
		{nil, false, false},
	} {
		got, err := v.Verify(context.Background(), tok(c.aud...), "main")
		switch {
		case c.ok && err != nil:
			t.Errorf("audience %q refused: %v", c.aud, err)
		case !c.ok && !errors.Is(err, ErrInvalid):
			t.Errorf("audience %q: %v, want ErrInvalid", c.aud, err)
		case c.ok && got.LegacyAudience != c.legacy:
			t.Errorf("audience %q: legacy %v, want %v", c.aud, got.LegacyAudience, c.legacy)
		}
	}
	if _, err := v.Verify(context.Background(), tok("etcd-nomad", "etcd-nomad:"), ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("verified for no cluster: %v, want ErrInvalid", err)
	}
}
