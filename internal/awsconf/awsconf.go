// Package awsconf loads the AWS SDK configuration the way every AWS client
// of etcd-nomad needs it: the SDK's standard credential chain (AWS_*
// variables, shared config, instance role), with an optional region and
// HTTP client (a custom CA for an endpoint's TLS).
package awsconf

import (
	"context"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

// Load returns the configuration; region and client are optional.
func Load(ctx context.Context, region string, client *http.Client) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	if client != nil {
		opts = append(opts, awsconfig.WithHTTPClient(client))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	return cfg, nil
}
