package identity

import (
	"context"
	"encoding/json"
	"fmt"

	nomadapi "github.com/hashicorp/nomad/api"
)

// NomadJWKS reads the Nomad cluster's JWKS through its API (a member uses
// its task API socket and workload identity).
type NomadJWKS struct {
	Client *nomadapi.Client
}

var _ KeySource = NomadJWKS{}

// JWKS implements KeySource.
func (n NomadJWKS) JWKS(ctx context.Context) ([]byte, error) {
	var raw json.RawMessage
	if _, err := n.Client.Raw().Query("/.well-known/jwks.json", &raw, (&nomadapi.QueryOptions{}).WithContext(ctx)); err != nil {
		return nil, fmt.Errorf("GET /.well-known/jwks.json: %w", err)
	}
	return raw, nil
}
