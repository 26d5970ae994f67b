// Package clusterca keeps the cluster CA (TLS auto) in the coordinator:
// it loads it (sealed or, for the local coordinator and earlier versions,
// in the clear), offers a member's CA create-only, and hands read-only
// clients the status CA. It never creates a CA and never decides which CA
// a member runs with: members do (task), where no cluster exists yet.
//
// The cluster CA lives in two places: the coordinator, where members that
// start without one get it, and each member's data dir (tls/ca.bundle),
// where it survives the coordinator losing its state.
package clusterca

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
)

// Coordinator keys of the cluster CA (TLS auto).
const (
	// SealedKey holds the CA certificate and its key sealed with the
	// cluster's key encryption key (certs.Seal): members with a KEK.
	SealedKey = "ca-sealed"
	// PlainKey holds the CA certificate and key in the clear (certs.Bundle):
	// members without a KEK (the local coordinator, whose directory is as
	// private as the members' data dirs, which hold the same key), and
	// every member of versions before the sealed CA. A member with a KEK
	// retires it once the sealed CA holds the same CA.
	PlainKey = "ca"
	// StatusKey holds the status CA (certs.StatusCA) in the clear, for
	// read-only clients: its certificates open /status and nothing else.
	StatusKey = "status-ca"
)

// Sentinel errors.
var (
	// ErrNoClusterCA: the coordinator holds no cluster CA.
	ErrNoClusterCA = errors.New("the cluster CA is not in the coordinator")
	// ErrCASealed: the coordinator holds the cluster CA sealed, and no key
	// encryption key was given to open it.
	ErrCASealed = errors.New("the cluster CA's key is sealed and no key encryption key (" + certs.KEKEnv + ") is set")
	// ErrPlaintextCA: a key encryption key was given, the coordinator
	// holds no sealed CA but a plaintext one. Anyone who may write the
	// coordinator's keys can store that: with a KEK it is never taken
	// (only compared with the sealed one, to retire it).
	ErrPlaintextCA = errors.New(`the coordinator holds no sealed cluster CA (key "` + SealedKey + `") but one in the clear (key "` + PlainKey + `"): ` +
		`refused, as with a key encryption key the cluster CA is taken from "` + SealedKey + `" only (anyone who may write the coordinator's keys can store "` + PlainKey + `"). ` +
		`If the cluster ran an earlier version, start a member that has its saved CA (<data_dir>/<member>/tls/ca.bundle) with the key encryption key: ` +
		`it stores its CA sealed, and deletes "` + PlainKey + `" if it holds the same CA; otherwise delete "` + PlainKey + `" and find who wrote it`)
)

// KV is the part of the coordinator (coord.Coordinator) the CA is kept in.
type KV interface {
	LoadOrStore(ctx context.Context, key string, value []byte) ([]byte, error)
	Load(ctx context.Context, key string) ([]byte, error)
}

// KEKFromEnv reads the key encryption key from certs.KEKEnv: nil when unset,
// an error naming the variable when it is not a key.
func KEKFromEnv() ([]byte, error) {
	v := os.Getenv(certs.KEKEnv)
	if v == "" {
		return nil, nil
	}
	k, err := certs.ParseKEK(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certs.KEKEnv, err)
	}
	return k, nil
}

// Same reports whether a and b are the same CA.
func Same(a, b certs.Pair) bool { return certs.Fingerprint(a.Cert) == certs.Fingerprint(b.Cert) }

// Load reads the cluster CA, key included, from c: the sealed one, opened
// with kek (ErrCASealed without one); without a kek, else the plaintext one
// of the local coordinator or of earlier versions; ErrNoClusterCA (wrapped)
// when neither is stored. With a kek a plaintext CA is never taken
// (ErrPlaintextCA when it is the only one stored): whoever holds the KEK
// trusts only a CA sealed with it. It never stores one.
func Load(ctx context.Context, c KV, kek []byte) (certs.Pair, error) {
	b, err := c.Load(ctx, SealedKey)
	switch {
	case err == nil && kek == nil:
		return certs.Pair{}, ErrCASealed
	case err == nil:
		p, err := certs.OpenSealed(b, kek)
		if err != nil {
			return certs.Pair{}, fmt.Errorf("cluster CA in the coordinator: %w", err)
		}
		return p, nil
	case !errors.Is(err, coord.ErrNotStored):
		return certs.Pair{}, fmt.Errorf("read cluster CA: %w", err)
	}
	b, err = c.Load(ctx, PlainKey)
	if errors.Is(err, coord.ErrNotStored) {
		return certs.Pair{}, fmt.Errorf("%w: %w", ErrNoClusterCA, err)
	}
	if err != nil {
		return certs.Pair{}, fmt.Errorf("read cluster CA: %w", err)
	}
	if kek != nil {
		return certs.Pair{}, ErrPlaintextCA
	}
	p, err := certs.ParseBundle(b)
	if err != nil {
		return certs.Pair{}, fmt.Errorf("cluster CA in the coordinator: %w", err)
	}
	return p, nil
}

// Read returns the cluster's CA, key included, as the coordinator holds
// it, for clients that need etcd access (`snapshot save`, tests): the
// sealed CA opens with kek only (ErrCASealed without one). It only reads:
// a missing CA is an error (ErrNoClusterCA) saying what to do, never a
// reason to create one — a CA created by a client would be adopted by the
// members that start next and trusted by no running one.
func Read(ctx context.Context, c KV, cluster string, kek []byte) (certs.Pair, error) {
	ca, err := Load(ctx, c, kek)
	return ca, explainMissing(cluster, err)
}

// explainMissing says what to do about ErrNoClusterCA; other errors pass.
func explainMissing(cluster string, err error) error {
	if !errors.Is(err, ErrNoClusterCA) {
		return err
	}
	return fmt.Errorf("cluster %s: %w: no member has started yet, or the coordinator lost its state "+
		"(running members store the CA again within seconds of seeing the cluster record gone, a member that starts with "+
		"its saved <data_dir>/<member>/tls/ca.bundle stores it at once)", cluster, err)
}

// StatusIssuer returns what a read-only client needs to ask members'
// /status: an issuer for its client certificate and the cluster CA
// certificate to trust. The issuer is the status CA (certs.StatusCA), which
// opens /status and nothing else; only where the coordinator holds no
// status CA but the plaintext cluster CA (members of earlier versions,
// which trust nothing else) is it that CA. It needs no sealed key and
// never stores anything.
func StatusIssuer(ctx context.Context, c KV, cluster string) (issuer certs.Pair, caCert []byte, err error) {
	b, err := c.Load(ctx, StatusKey)
	if errors.Is(err, coord.ErrNotStored) {
		legacy, err := Load(ctx, c, nil)
		if errors.Is(err, ErrCASealed) {
			err = fmt.Errorf("%w: the status CA is not stored (a member stores it at start and at every CA check)", ErrNoClusterCA)
		}
		return legacy, legacy.Cert, explainMissing(cluster, err)
	}
	if err != nil {
		return certs.Pair{}, nil, fmt.Errorf("read status CA: %w", err)
	}
	if issuer, err = certs.ParseBundle(b); err != nil {
		return certs.Pair{}, nil, fmt.Errorf("status CA in the coordinator: %w", err)
	}
	b, err = c.Load(ctx, SealedKey)
	switch {
	case err == nil:
		caCert, err = certs.SealedCert(b)
	case errors.Is(err, coord.ErrNotStored):
		// The local coordinator's plaintext CA: its certificate only.
		var p certs.Pair
		p, err = Load(ctx, c, nil)
		caCert = p.Cert
	}
	if err != nil {
		return certs.Pair{}, nil, fmt.Errorf("cluster CA certificate: %w", err)
	}
	return issuer, caCert, nil
}

// Offer stores ca as the cluster CA unless the coordinator holds one,
// sealed with kek when given (in the clear without), and the status CA
// of the CA it holds; it returns the cluster CA the coordinator holds.
// Only members call it, with the CA they saved or one created where no
// cluster exists.
func Offer(ctx context.Context, c KV, ca certs.Pair, kek []byte) (certs.Pair, error) {
	var held certs.Pair
	if kek != nil {
		sealed, err := certs.Seal(ca, kek)
		if err != nil {
			return certs.Pair{}, err
		}
		b, err := c.LoadOrStore(ctx, SealedKey, sealed)
		if err != nil {
			return certs.Pair{}, fmt.Errorf("store CA: %w", err)
		}
		if held, err = certs.OpenSealed(b, kek); err != nil {
			return certs.Pair{}, fmt.Errorf("cluster CA in the coordinator: %w", err)
		}
	} else {
		b, err := c.LoadOrStore(ctx, PlainKey, ca.Bundle())
		if err != nil {
			return certs.Pair{}, fmt.Errorf("store CA: %w", err)
		}
		if held, err = certs.ParseBundle(b); err != nil {
			return certs.Pair{}, fmt.Errorf("cluster CA in the coordinator: %w", err)
		}
	}
	st, err := certs.StatusCA(held)
	if err != nil {
		return certs.Pair{}, err
	}
	if _, err := c.LoadOrStore(ctx, StatusKey, st.Bundle()); err != nil {
		return certs.Pair{}, fmt.Errorf("store status CA: %w", err)
	}
	return held, nil
}

// Location names where the coordinator of cl keeps key, for operators.
func Location(cl *config.Cluster, key string) string {
	switch cl.Coordination.Kind {
	case config.CoordConsul:
		return fmt.Sprintf("Consul KV %s/%s/kv/%s", cl.Coordination.Prefix, cl.Name, key)
	case config.CoordLocal:
		return filepath.Join(cl.Coordination.Dir, "kv-"+key)
	}
	return "the coordinator's key " + key
}
