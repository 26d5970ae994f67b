package s3_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// corrupt metadata whose object is missing now reaches the
// "object is missing" check (it used to be skipped before it, reported
// once per version): it is logged at every listing.
func TestCorruptMetadataWithoutObjectIsReportedOncePerVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var logs clustertest.SyncBuffer
	store, raw := s3EnvWith(t, ctx, hclog.New(&hclog.LoggerOptions{Output: &logs}), http.DefaultClient)
	bad := snapshot.ObjectName("main", 1, 9, time.Now(), false)
	if _, err := raw.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("main/" + bad + ".meta.json"), Body: strings.NewReader("{garbage")}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := store.List(ctx); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, bad) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("5 listings logged the planted metadata %d times, want once per version\n%s", n, logs.String())
	}
}
