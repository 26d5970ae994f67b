package backends

// The snapshot store and its encryption. They fail closed: asked to
// encrypt without a key, Encryption refuses rather than write plaintext.

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
	"github.com/etcd-nomad/etcd-nomad/snapshot/s3"
)

// Store opens the snapshot store of cl; what a listing skips is reported
// nowhere (StoreWithLog).
func Store(ctx context.Context, cl *config.Cluster) (snapshot.Store, error) {
	return StoreWithLog(ctx, cl, nil)
}

// StoreWithLog opens the snapshot store of cl, reporting to log (may be
// nil) what a listing skips: corrupt or orphaned metadata.
func StoreWithLog(ctx context.Context, cl *config.Cluster, log hclog.Logger) (snapshot.Store, error) {
	sn := cl.Snapshot
	if sn == nil {
		return nil, fmt.Errorf("%s: no snapshot block: add snapshot { store \"file\" { path = ... } }", cl.File)
	}
	switch sn.StoreKind {
	case "file":
		s, err := file.New(sn.Path, cl.Name)
		if err != nil {
			return nil, err
		}
		s.Log = log
		return s, nil
	case "s3":
		prefix := sn.Prefix
		if prefix == "" {
			prefix = cl.Name + "/"
		}
		o := s3.Options{Bucket: sn.Bucket, Prefix: prefix, Endpoint: sn.Endpoint, Region: sn.Region, PathStyle: sn.PathStyle, Log: log}
		if sn.CAFile != "" {
			hc, err := s3.TrustCAFile(sn.CAFile)
			if err != nil {
				return nil, fmt.Errorf("%s: snapshot store ca_file: %w", cl.File, err)
			}
			o.HTTPClient = hc
		}
		return s3.New(ctx, o)
	}
	return nil, fmt.Errorf("%s: unknown snapshot store %q", cl.File, sn.StoreKind)
}

// Encryption returns the encryption and authentication of cl's snapshots:
// age (none without an encryption block) and the MAC key (Authentication).
func Encryption(cl *config.Cluster) (snapshot.Encryption, error) {
	e, err := encryption(cl)
	if err != nil {
		return snapshot.Encryption{}, err
	}
	if e.MACKey, err = Authentication(cl); err != nil {
		return snapshot.Encryption{}, err
	}
	return e, nil
}

// Authentication returns the key that authenticates cl's snapshots,
// derived from the cluster CA's key encryption key in the environment
// (certs.KEKEnv, which the rendered job sets on every member from the
// job's Nomad variable, and which operators export): the one secret
// members and operators already hold, and the store's writers do not. nil
// without it (TLS not auto, or the local coordinator, or an operator's
// shell without it): snapshots are then written without a MAC and read
// unchecked, which validate and the member's start say (Unauthenticated).
func Authentication(cl *config.Cluster) ([]byte, error) {
	kek, err := clusterca.KEKFromEnv()
	if err != nil {
		return nil, fmt.Errorf("snapshot authentication: %w", err)
	}
	return snapshot.DeriveMACKey(kek, cl.Name)
}

// Unauthenticated says why cl's snapshots are not authenticated, "" when
// they are (a KEK in the environment) or there are none: whoever can
// write the store can then forge a snapshot a recovery restores.
func Unauthenticated(cl *config.Cluster, kek []byte) string {
	if cl.Snapshot == nil || len(kek) > 0 {
		return ""
	}
	return fmt.Sprintf("snapshots are not authenticated: %s is not set (tls mode %q), so they are written without a MAC and restored unchecked; "+
		"anyone who can write the snapshot store can forge one that a recovery restores. With tls auto the job sets it on every member", certs.KEKEnv, cl.TLS.Mode)
}

func encryption(cl *config.Cluster) (snapshot.Encryption, error) {
	sn := cl.Snapshot
	if sn == nil || (sn.PassphraseEnv == "" && len(sn.Recipients) == 0) {
		return snapshot.Encryption{}, nil
	}
	if sn.PassphraseEnv != "" {
		p := os.Getenv(sn.PassphraseEnv)
		if p == "" {
			return snapshot.Encryption{}, fmt.Errorf("snapshot encryption: environment variable %s (passphrase_env) is empty; refusing to write or read snapshots without it", sn.PassphraseEnv)
		}
		return snapshot.Passphrase(p)
	}
	e, err := snapshot.X25519(sn.Recipients, sn.IdentityFile)
	if err != nil {
		return snapshot.Encryption{}, fmt.Errorf("snapshot encryption: %w", err)
	}
	if !e.Enabled() {
		return snapshot.Encryption{}, errors.New("snapshot encryption: no recipient")
	}
	return e, nil
}
