package clustertest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// reviewTB records failures instead of failing the real test, so that a
// test can assert what CheckLeases concludes.
type reviewTB struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (f *reviewTB) Helper() {}
func (f *reviewTB) Logf(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, "log: "+fmt.Sprintf(format, a...))
}
func (f *reviewTB) Errorf(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
	f.msgs = append(f.msgs, "error: "+fmt.Sprintf(format, a...))
}
func (f *reviewTB) Fatalf(format string, a ...any) { f.Errorf(format, a...); runtime.Goexit() }
func (f *reviewTB) FailNow()                       { f.mu.Lock(); f.failed = true; f.mu.Unlock(); runtime.Goexit() }
func (f *reviewTB) Failed() bool                   { f.mu.Lock(); defer f.mu.Unlock(); return f.failed }

// runCheck runs c.CheckLeases with a recording TB and reports it.
func runCheck(c *Consumer, cli *clientv3.Client) *reviewTB {
	f := &reviewTB{}
	done := make(chan struct{})
	go func() { defer close(done); c.CheckLeases(f, cli) }()
	<-done
	return f
}

// bareConsumer is a Consumer whose work loop is not running (its Finish
// returns at once), so a test controls every lease it holds.
func bareConsumer(cli *clientv3.Client, prefix string) *Consumer {
	c := &Consumer{cli: cli, prefix: prefix, leased: map[string]clientv3.LeaseID{}, lives: map[clientv3.LeaseID]*leaseLife{},
		stop: make(chan struct{}), done: make(chan struct{})}
	close(c.done)
	c.watchCtx, c.watchCancel = context.WithCancel(context.Background())
	return c
}

type dropSends struct {
	grpc.ClientStream
	drop *atomic.Bool
}

func (s dropSends) SendMsg(m any) error {
	if s.drop.Load() {
		return nil // lost on the way: a cut between the client and the cluster
	}
	return s.ClientStream.SendMsg(m)
}

// Data-safety review: the client's own lessor gives up a lease
// whose first keepalive is not answered within DialTimeout+1s
// (clientv3's firstKeepAliveTimeout) and stops renewing it; the cluster
// then expires it by etcd's rule, a TTL after its last renewal (the
// grant). CheckLeases judges the lease by its observer's channel, which
// closed ~3 s after the grant with the grant's TTL of 10 s "still
// running", and fails the test: "leases ended while kept alive (the
// cluster revoked them)". Nothing was revoked; the cut between client and
// cluster began right after a grant, which the consumer does after every
// lost session, i.e. during faults.
func TestLeaseGivenUpByItsClientIsNotARevoke(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded etcd")
	}
	admin := startOneMember(t)
	var drop atomic.Bool
	cli, err := clientv3.New(clientv3.Config{Endpoints: admin.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil || !strings.HasSuffix(method, "/LeaseKeepAlive") {
				return s, err
			}
			return dropSends{s, &drop}, nil
		})}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c := bareConsumer(cli, "x")
	ctx := context.Background()
	l, err := cli.Grant(ctx, ConsumerTTL)
	if err != nil {
		t.Fatal(err)
	}
	key := "x-lease/000000"
	if _, err := cli.Put(ctx, key, "alive", clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	c.leased[key] = l.ID
	drop.Store(true) // the client's way to the cluster is cut just after the put
	c.observe(l.ID, l.TTL)
	WaitFor(t, 10*time.Second, "the client gives the lease up", func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.lives[l.ID].ended.IsZero(), fmt.Sprintf("%+v", *c.lives[l.ID])
	})
	drop.Store(false) // the cut heals; the client no longer renews the lease
	WaitFor(t, 20*time.Second, "etcd expires the lease by its rule", func() (bool, string) {
		r, err := admin.Get(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		return r.Count == 0, fmt.Sprint(r.Count) // revoked by the expiry: the key is gone
	})
	f := runCheck(c, admin)
	t.Logf("life %+v msgs %q", *c.lives[l.ID], f.msgs)
	if f.Failed() {
		t.Fatalf("CheckLeases blames the cluster for a lease etcd expired by its rule (the client stopped renewing it):\n%s", strings.Join(f.msgs, "\n"))
	}
}

// Data-safety review (pre-existing, kept by the strict check):
// CheckLeases caches each lease's liveness across its retries but reads
// the keys again at each. A lease alive at the first try (a lost
// session's lease, no longer renewed, not yet expired) whose keys' read
// fails then expires by etcd's rule before a later try reads the keys:
// its keys are gone and CheckLeases reports them "lost while their lease
// lives".
func TestLeaseExpiredBetweenRetriesIsNotALoss(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded etcd")
	}
	admin := startOneMember(t)
	var failRange atomic.Bool
	cli, err := clientv3.New(clientv3.Config{Endpoints: admin.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if failRange.Load() && strings.HasSuffix(method, "/Range") {
				return errors.New("injected: read failed (a member restarting)")
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		})}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c := bareConsumer(cli, "y")
	ctx := context.Background()
	l, err := cli.Grant(ctx, 3) // a lost session's lease: nobody renews it
	if err != nil {
		t.Fatal(err)
	}
	key := "y-lease/000000"
	if _, err := cli.Put(ctx, key, "alive", clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	c.leased[key] = l.ID
	failRange.Store(true)
	go func() {
		for {
			r, err := admin.Get(ctx, key)
			if err == nil && r.Count == 0 {
				failRange.Store(false)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	f := runCheck(c, cli)
	t.Logf("msgs %q", f.msgs)
	if f.Failed() {
		t.Fatalf("CheckLeases reports a lease that expired by etcd's rule during its retries as keys lost while it lives:\n%s", strings.Join(f.msgs, "\n"))
	}
}
