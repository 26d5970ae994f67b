package nomadglue

import (
	"context"
	"encoding/json"
	"fmt"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/identity"
)

// JWKS reads the Nomad cluster's keys through its API (a member uses its
// task API socket and workload identity), for identity.Verifier.
type JWKS struct {
	Client *nomadapi.Client
}

var _ identity.KeySource = JWKS{}

// JWKS implements identity.KeySource.
func (n JWKS) JWKS(ctx context.Context) ([]byte, error) {
	var raw json.RawMessage
	if _, err := n.Client.Raw().Query("/.well-known/jwks.json", &raw, (&nomadapi.QueryOptions{}).WithContext(ctx)); err != nil {
		return nil, fmt.Errorf("GET /.well-known/jwks.json: %w", err)
	}
	return raw, nil
}
