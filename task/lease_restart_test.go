package task

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/task/etcdproc"
)

// A member whose data holds leased keys, a lock and an election (what
// every real consumer stores) restarts beside the running quorum exactly
// like one without: the check before its start reads its database with
// the leases in it, and it comes back as the same member with its data.
// Before the fix, etcd's store panicked "no lessor to attach lease" in
// that check, at every start, and the member crash-looped.
func TestRestartWithLeasedDataRejoinsAsTheSameMember(t *testing.T) {
	if testing.Short() {
		t.Skip("three embedded members")
	}
	k := newKit(t, "m0", "m1", "m2")
	ms, cli, stops := startLoopsStops(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := cli.Put(ctx, fmt.Sprintf("svc/%d", i), "up", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := concurrency.NewMutex(sess, "locks/job").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := concurrency.NewElection(sess, "elect/leader").Campaign(ctx, "m-a"); err != nil {
		t.Fatal(err)
	}
	put(t, cli, "last", "x")
	waitUntil(t, 10*time.Second, "m2 caught up", func() (bool, string) {
		v, err := serializableGet(ms["m2"], "last")
		return v == "x", fmt.Sprint(v, err)
	})
	id := ms["m2"].waitMeta(t, func(m datadir.Meta) bool { return m.MemberID != 0 }).MemberID
	stops["m2"]()
	ms["m2"].halt()
	if _, err := etcdproc.DataHash(filepath.Join(ms["m2"].dir.EtcdDir(), "member", "snap", "db")); err != nil {
		t.Fatalf("hash of the stopped member's leased data: %v", err)
	}

	m2 := k.member("m2", nil)
	runLoop(t, m2)
	waitUntil(t, time.Minute, "m2 back as the same voter holding the leased keys", func() (bool, string) {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := cli.MemberList(c)
		if err != nil {
			return false, err.Error()
		}
		found := false
		for _, mem := range resp.Members {
			if mem.ID == id && !mem.IsLearner {
				found = true
			}
		}
		if !found {
			return false, "member " + fmt.Sprintf("%x", id) + " not a voter; " + m2.reason()
		}
		v, err := serializableGet(m2, "svc/3")
		return v == "up", fmt.Sprintf("svc/3=%q (%v); %s", v, err, m2.reason())
	})
	if aside := m2.asideEntries(t); len(aside) != 0 {
		t.Fatalf("data set aside on a plain restart: %v", aside)
	}
	ttl, err := cli.TimeToLive(ctx, lease.ID, clientv3.WithAttachedKeys())
	if err != nil || ttl.TTL <= 0 || len(ttl.Keys) != 5 {
		t.Fatalf("lease after the restart: %+v, %v", ttl, err)
	}
}
