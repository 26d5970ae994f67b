package task

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// Review rev19e: a fenced member whose data was corrupted while stopped is
// started by resumeFenced beside its serving quorum without the
// comparison the loop's Rejoin makes there (checkBeforeStart runs only
// when o.MembersKnown, which resumeFenced never sets).
func TestAFencedMemberComparesItsDataBeforeStartingAgain(t *testing.T) {
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
	for i := range 20 {
		put(t, cli, fmt.Sprintf("k/%02d", i), fmt.Sprintf("v%02d", i))
	}
	waitUntil(t, 10*time.Second, "m0 holds k/19", func() (bool, string) {
		v, err := serializableGet(m0, "k/19")
		return v == "v19", fmt.Sprint(v, err)
	})
	m0.loop(ctx)

	genuine, err := k.co.Record(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writeRecord := func(r planner.Record) {
		t.Helper()
		l, err := k.co.Lock(ctx, "m9")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
		cur, err := k.co.Record(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r.Index = cur.Index
		if _, err := k.co.UpdateRecord(ctx, l, r); err != nil {
			t.Fatal(err)
		}
	}
	newer := genuine
	newer.ClusterID, newer.Token, newer.Epoch, newer.Seeder, newer.Source = 0x46f, "tok-e2", genuine.Epoch+1, "m9", "snapshot:s"
	writeRecord(newer)
	m0.opts.Provider = unreachableProvider{}
	m1.stopEtcd()
	m2.stopEtcd()
	m0.loop(ctx)
	m0.loop(ctx)
	if m0.proc.Server() != nil {
		t.Fatal("m0 not fenced")
	}
	corruptValue(t, m0, "k/07", "rotten")
	writeRecord(genuine) // the record names m0's incarnation again (as in the commit's test)

	for _, m := range []*Member{m1, m2} {
		if err := m.act(ctx, planner.Observation{}, planner.Decision{Kind: planner.Rejoin, Name: m.opts.Name}); err != nil {
			t.Fatalf("restart %s: %v", m.opts.Name, err)
		}
	}
	waitUntil(t, 30*time.Second, "m1 serves with a quorum", func() (bool, string) {
		st, err := m1.health(ctx)
		if err != nil {
			return false, err.Error()
		}
		return st.Healthy, "not healthy"
	})
	for range 5 {
		m0.loop(ctx)
		time.Sleep(200 * time.Millisecond)
	}
	if m0.proc.Server() != nil {
		v, _ := serializableGet(m0, "k/07")
		t.Fatalf("m0 started its corrupt data beside the quorum that could judge it (k/07=%q): no checkBeforeStart on resume", v)
	}
}
