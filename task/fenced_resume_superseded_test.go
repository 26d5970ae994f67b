package task

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Review rev19e: the record still names a newer, confirmed epoch by another
// seeder (a recovery that runs elsewhere), and m1+m2, old-incarnation
// members that found each other again (review rev18g R1's window), serve
// epoch e. resumeFenced starts the fenced m0 beside them; when m2 is
// then lost (crash, host gone, a partition between m1 and m2 that m0
// straddles) the old incarnation keeps a quorum, m0+m1, it would not have
// had (m1 alone would be fenced), and acknowledges writes the newer
// incarnation never sees.
func TestAFencedMemberDoesNotResumeWhileTheRecordNamesANewerEpoch(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0", "m1", "m2")
	m0 := k.member("m0", nil)
	cli := k.seedForTest(m0)
	m1, m2 := k.member("m1", nil), k.member("m2", nil)
	addVoter(t, cli, m1)
	addVoter(t, cli, m2)
	for _, m := range []*Member{m1, m2} {
		if err := m.serveStatus(); err != nil {
			t.Fatal(err)
		}
	}
	m0.loop(ctx)
	genuine, err := k.co.Record(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := k.co.Lock(ctx, "m9")
	if err != nil {
		t.Fatal(err)
	}
	newer := genuine
	newer.ClusterID, newer.Token, newer.Epoch, newer.Seeder, newer.Source = 0x46f, "tok-e2", genuine.Epoch+1, "m9", "snapshot:s"
	if _, err := k.co.UpdateRecord(ctx, l, newer); err != nil {
		t.Fatal(err)
	}
	l.Unlock(ctx)
	m0.opts.Provider = unreachableProvider{}
	m1.stopEtcd()
	m2.stopEtcd()
	m0.loop(ctx)
	m0.loop(ctx)
	if m0.proc.Server() != nil {
		t.Fatal("m0 not fenced")
	}
	// m1 and m2 find each other again (R1): epoch e serves with a quorum
	// while the record still names e+1.
	for _, m := range []*Member{m1, m2} {
		if err := m.act(ctx, planner.Observation{}, planner.Decision{Kind: planner.Rejoin, Name: m.opts.Name}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 30*time.Second, "m1 serves with a quorum", func() (bool, string) {
		st, err := m1.health(ctx)
		if err != nil {
			return false, err.Error()
		}
		return st.Healthy, "not healthy"
	})
	for range 3 {
		m0.loop(ctx)
	}
	resumed := m0.proc.Server() != nil
	// m2 is lost.
	m2.stopEtcd()
	time.Sleep(3 * time.Second)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{m1.clientURL(m1.self)}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, perr := c.Put(pctx, "written-to-the-superseded-epoch", "lost later")
	if resumed || perr == nil {
		t.Fatalf("m0 resumed=%v under a record naming epoch %d (newer, confirmed, by m9); after m2's loss the superseded epoch %d acknowledged a write (err %v)", resumed, newer.Epoch, genuine.Epoch, perr)
	}
}
