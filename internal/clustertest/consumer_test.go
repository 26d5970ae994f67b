package clustertest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// A leased key is lost only when its lease lives and the key is absent or
// moved to another lease; keys of an ended lease are gone by etcd's rules.
func TestLostLeasedKeysAreThoseOfLiveLeases(t *testing.T) {
	acked := map[string]clientv3.LeaseID{"a": 1, "b": 1, "c": 2, "d": 1}
	alive := map[clientv3.LeaseID]bool{1: true, 2: false}
	got := map[string]clientv3.LeaseID{"a": 1, "d": 3}
	lost, ended := lostLeased(acked, alive, got)
	if ended != 1 || len(lost) != 2 || lost[0] != "b (lease 1 alive, key absent)" || lost[1] != "d (lease 1 alive, key on lease 3)" {
		t.Fatalf("lost %q, ended %d", lost, ended)
	}
}

// A lease that ended while the TTL of its last keepalive answer still ran
// was revoked by the cluster; one that ended a TTL after its last answer
// expired by etcd's rule. A lease still open at the check but found gone
// is judged at the check's time.
func TestLeaseEndedWhileKeptAliveIsRevoked(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	acked := map[string]clientv3.LeaseID{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6}
	alive := map[clientv3.LeaseID]bool{5: true}
	lives := map[clientv3.LeaseID]leaseLife{
		1: {lastAck: t0, lastTTL: 10, answered: true, ended: t0.Add(4 * time.Second)},  // revoked 6 s early
		2: {lastAck: t0, lastTTL: 10, answered: true, ended: t0.Add(10 * time.Second)}, // expired
		3: {lastAck: t0, lastTTL: 10, answered: true},                                  // open, found gone at the read below
		4: {lastAck: t0.Add(-time.Minute), lastTTL: 10, answered: true},                // open, long unanswered: expired
		5: {lastAck: t0, lastTTL: 10, answered: true},                                  // alive
		6: {lastAck: t0, lastTTL: 10, ended: t0.Add(3 * time.Second)},                  // given up by the client before an answer
	}
	revoked, expired := endedLeases(acked, alive, lives, t0.Add(5*time.Second))
	if len(revoked) != 2 || !strings.HasPrefix(revoked[0], "lease 1: its keepalive channel closed") || !strings.HasPrefix(revoked[1], "lease 3: found gone at the check") {
		t.Fatalf("revoked %q", revoked)
	}
	if len(expired) != 3 || !strings.HasPrefix(expired[0], "lease 2 expired") || !strings.HasPrefix(expired[1], "lease 4 expired") || !strings.Contains(expired[2], "given up by the client") {
		t.Fatalf("expired %q", expired)
	}
}

// The consumer does real work on a real member: leased keys, locks,
// proclamations and watch events all happen, and CheckLeases finds every
// leased key with its lease.
func TestConsumerHoldsLeasesLocksAndAnElection(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded etcd")
	}
	cli := startOneMember(t)
	w := StartWriter(cli, "w")
	WaitFor(t, 20*time.Second, "the consumer's work", func() (bool, string) {
		r := w.consumer.Report()
		return r.LeasedKeys >= 5 && r.Locks >= 5 && r.Proclaims >= 3 && r.WatchEvents >= 5, r.String()
	})
	acked, _ := w.Finish()
	CheckAcked(t, cli, acked)
	rep := w.CheckLeases(t, cli)
	if rep.SessionsLost != 0 || rep.Errors != 0 {
		t.Fatalf("on a healthy member: %s", rep)
	}
}

// A lease the cluster revokes while the consumer keeps it alive (as a
// restore that dropped it would) is seen ended early by its observer.
func TestConsumerSeesALeaseRevokedWhileKeptAlive(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded etcd")
	}
	cli := startOneMember(t)
	c := StartConsumer(cli, "r")
	defer c.watchCancel()
	defer c.Finish()
	var id clientv3.LeaseID
	WaitFor(t, 20*time.Second, "a leased key", func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, l := range c.leased {
			id = l
		}
		return id != 0, fmt.Sprint(len(c.leased))
	})
	if _, err := cli.Revoke(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 5*time.Second, "the observer sees the lease end", func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		l := c.lives[id]
		return !l.ended.IsZero(), fmt.Sprintf("%+v", *l)
	})
	c.mu.Lock()
	l := *c.lives[id]
	c.mu.Unlock()
	if early, by := l.endedEarly(l.ended); !early {
		t.Fatalf("a lease revoked while kept alive is judged expired (early by %s): %+v", by, l)
	}
}

// startOneMember starts a one-member embedded etcd and a client of it,
// both closed when the test ends.
func startOneMember(t *testing.T) *clientv3.Client {
	t.Helper()
	u := []url.URL{FreeURL(t), FreeURL(t)}
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = u[:1], u[:1]
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = u[1:], u[1:]
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogOutputs = []string{os.DevNull}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	<-e.Server.ReadyNotify()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{u[1].String()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
