package clusterca

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
)

// ExposedKey marks a cluster CA whose key the coordinator held in the
// clear (PlainKey, earlier versions) until a member retired it: every
// Consul snapshot taken before holds that key, and deleting PlainKey does
// not take it back. Members warn while they trust the CA it names; only a
// CA rotation (`etcd-nomad tls rotate-ca`) ends that, and it deletes the
// mark when it is done. A writer of the coordinator can delete the mark
// (hiding the warning) or plant one (a needless warning): it is a
// reminder, never a safety check.
const ExposedKey = "ca-key-exposed"

// Exposure is the value at ExposedKey.
type Exposure struct {
	// CA is the fingerprint (certs.Fingerprint) of the CA whose key was in
	// the clear.
	CA string `json:"ca"`
	// Since is when a member retired the plaintext copy.
	Since time.Time `json:"since"`
}

// Warning is the text members log and report in /health, /status and
// `status` while they trust e.CA.
func (e Exposure) Warning() string {
	return fmt.Sprintf("the cluster CA %s had its key in the coordinator in the clear (key %q, retired %s): every Consul snapshot taken before holds it; run `etcd-nomad tls rotate-ca`",
		e.CA, PlainKey, e.Since.UTC().Format(time.RFC3339))
}

// MarkExposed stores the mark for the CA with fingerprint fp, unless it
// names that CA already. It returns an error when it could not be
// stored: the caller keeps the plaintext copy until it is.
func MarkExposed(ctx context.Context, c interface {
	KV
	Delete(ctx context.Context, key string) error
}, fp string, now time.Time) error {
	b, _ := json.Marshal(Exposure{CA: fp, Since: now})
	for range 2 {
		got, err := c.LoadOrStore(ctx, ExposedKey, b)
		if err != nil {
			return fmt.Errorf("mark the cluster CA's key exposed: %w", err)
		}
		var e Exposure
		if json.Unmarshal(got, &e) == nil && e.CA == fp {
			return nil
		}
		// Another CA's mark (or none that parses): this one matters now.
		if err := c.Delete(ctx, ExposedKey); err != nil {
			return fmt.Errorf("mark the cluster CA's key exposed: %w", err)
		}
	}
	return errors.New("mark the cluster CA's key exposed: the mark changed while it was stored")
}

// LoadExposure reads the mark; ok is false when there is none.
func LoadExposure(ctx context.Context, c KV) (e Exposure, ok bool, err error) {
	b, err := c.Load(ctx, ExposedKey)
	if errors.Is(err, coord.ErrNotStored) {
		return Exposure{}, false, nil
	}
	if err != nil {
		return Exposure{}, false, fmt.Errorf("read %s: %w", ExposedKey, err)
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return Exposure{}, false, fmt.Errorf("%s: %w", ExposedKey, err)
	}
	return e, true, nil
}
