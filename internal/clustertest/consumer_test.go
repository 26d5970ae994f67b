package clustertest

import (
	"net"
	"net/url"
	"os"
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

// The consumer does real work on a real member: leased keys, locks,
// proclamations and watch events all happen, and CheckLeases finds every
// leased key with its lease.
func TestConsumerHoldsLeasesLocksAndAnElection(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded etcd")
	}
	var u []url.URL
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		u = append(u, url.URL{Scheme: "http", Host: l.Addr().String()})
		l.Close()
	}
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
	defer e.Close()
	<-e.Server.ReadyNotify()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{u[1].String()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
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
