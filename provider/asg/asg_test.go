package asg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/provider/asg"
	"github.com/etcd-nomad/etcd-nomad/provider/asg/asgtest"
)

func fakeGroup(t *testing.T) *asgtest.Server {
	t.Helper()
	clustertest.AWSEnv(t, "AKIDTEST", "secret")
	s, err := asgtest.Start("etcd", 3,
		asgtest.Instance{ID: "i-a", Lifecycle: "InService", Health: "Healthy", PrivateIP: "10.0.0.1"},
		asgtest.Instance{ID: "i-b", Lifecycle: "InService", Health: "Healthy", PrivateIP: "10.0.0.2"},
		asgtest.Instance{ID: "i-c", Lifecycle: "InService", Health: "Healthy", PrivateIP: "10.0.0.3"},
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newProvider(t *testing.T, s *asgtest.Server, self string) *asg.Provider {
	t.Helper()
	return newProviderRefresh(t, s, self, time.Nanosecond)
}

// newProviderRefresh is newProvider reusing a reading of the group for
// refresh.
func newProviderRefresh(t *testing.T, s *asgtest.Server, self string, refresh time.Duration) *asg.Provider {
	t.Helper()
	p, err := asg.New(context.Background(), asg.Options{Group: "etcd", Region: "eu-west-1", Endpoint: s.URL, IMDSEndpoint: s.URL,
		SelfID: self, ClientPort: 2379, PeerPort: 2380, StatusPort: 2381, LifecycleHook: "etcd-drain", Refresh: refresh})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInstancesPaginatedWithAddresses(t *testing.T) {
	s := fakeGroup(t)
	p := newProvider(t, s, "") // self from IMDS
	if p.SelfID() != "i-a" {
		t.Fatalf("self from IMDS: %q", p.SelfID())
	}
	ctx := context.Background()
	insts, err := p.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 3 || insts[1].Name != "i-b" || insts[1].Address != "10.0.0.2" || insts[1].PeerPort != 2380 {
		t.Fatalf("instances %+v", insts)
	}
	if s.Calls("DescribeAutoScalingGroups") != 2 || s.Calls("DescribeInstances") != 3 {
		t.Fatalf("pagination not followed: %d group pages, %d instance pages", s.Calls("DescribeAutoScalingGroups"), s.Calls("DescribeInstances"))
	}
	if n, _ := p.DesiredSize(ctx); n != 3 {
		t.Fatalf("desired %d", n)
	}
}

func TestLifecycleStates(t *testing.T) {
	s := fakeGroup(t)
	p := newProvider(t, s, "i-b")
	ctx := context.Background()
	if leaving, err := p.Leaving(ctx); err != nil || leaving {
		t.Fatalf("in service but leaving=%v (%v)", leaving, err)
	}
	s.SetLifecycle("i-b", "Terminating:Wait")
	insts, _ := p.Instances(ctx)
	for _, in := range insts {
		if in.Name == "i-b" {
			t.Fatal("a terminating instance is still listed as a member slot")
		}
	}
	if leaving, err := p.Leaving(ctx); err != nil || !leaving {
		t.Fatalf("Terminating:Wait but leaving=%v (%v)", leaving, err)
	}
	if inFlight, _ := p.ReplacementInFlight(ctx); !inFlight {
		t.Fatal("a terminating instance is a replacement in flight")
	}
	if err := p.Depart(ctx); err != nil {
		t.Fatal(err)
	}
	if c := s.Completed(); len(c) != 1 || c[0] != "i-b" {
		t.Fatalf("lifecycle action completed for %v", c)
	}
}

func TestThrottlingIsRetried(t *testing.T) {
	s := fakeGroup(t)
	p := newProvider(t, s, "i-a")
	s.Throttle(2)
	insts, err := p.Instances(context.Background())
	if err != nil || len(insts) != 3 {
		t.Fatalf("throttled reads not retried: %v %v", insts, err)
	}
}

func TestBadCredentialsSayWhat(t *testing.T) {
	s := fakeGroup(t)
	p := newProvider(t, s, "i-a")
	s.FailAuth(true)
	_, err := p.Instances(context.Background())
	if err == nil || !strings.Contains(err.Error(), "rejected the credentials") || !strings.Contains(err.Error(), "region") {
		t.Fatalf("want an error naming credentials and region, got %v", err)
	}
}

func TestWrongGroupOrRegion(t *testing.T) {
	s := fakeGroup(t)
	p, err := asg.New(context.Background(), asg.Options{Group: "nope", Region: "us-east-1", Endpoint: s.URL, SelfID: "i-a"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Instances(context.Background())
	if err == nil || !strings.Contains(err.Error(), `"nope" not found (wrong name or region?)`) {
		t.Fatalf("got %v", err)
	}
}

func TestMarkUnhealthy(t *testing.T) {
	s := fakeGroup(t)
	p := newProvider(t, s, "i-a")
	ctx := context.Background()
	if inFlight, _ := p.ReplacementInFlight(ctx); inFlight {
		t.Fatal("healthy group reports a replacement in flight")
	}
	if err := p.MarkUnhealthy(ctx, "i-c"); err != nil {
		t.Fatal(err)
	}
	if s.Health("i-c") != "Unhealthy" {
		t.Fatal("SetInstanceHealth not sent")
	}
	if inFlight, _ := p.ReplacementInFlight(ctx); !inFlight {
		t.Fatal("an instance marked unhealthy is a replacement in flight")
	}
}
