package s3_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/s3"
	"github.com/etcd-nomad/etcd-nomad/snapshot/storetest"
)

// TestConformance runs the store suite against a real S3 server
// (versitygw, built by tools/build.sh), one fresh key prefix per case.
func TestConformance(t *testing.T) {
	tier.Starts(t, "an S3 server")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	agent, err := devagents.StartS3(ctx, t.TempDir(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Stop(10 * time.Second)
	clustertest.AWSEnv(t, devagents.S3AccessKey, devagents.S3SecretKey)
	raw := rawClient(t, ctx, agent.Addr)
	storetest.Run(t, func(t *testing.T) (snapshot.Store, storetest.Raw) {
		prefix := t.Name() + "/"
		store, err := s3.New(ctx, s3.Options{Bucket: bucket, Prefix: prefix, Endpoint: agent.Addr, Region: "us-east-1", PathStyle: true})
		if err != nil {
			t.Fatal(err)
		}
		return store, func(ctx context.Context, key string, body []byte) error {
			_, err := raw.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(prefix + key), Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body)))})
			return err
		}
	})
}
