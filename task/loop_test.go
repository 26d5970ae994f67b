package task

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-nomad/etcd-nomad/coord"
)

// Invariant 3 over a whole bootstrap run by the supervisor loops: the
// membership, watched throughout, never has more than one learner, every
// member but the seeder first appears as a learner (never a voter added
// outright), and a member listed as a learner before and after its /health
// was asked answered 503 naming the role.
func TestBootstrapJoinsOneLearnerAtATime(t *testing.T) {
	k := newKit(t, "m0", "m1", "m2")
	ms := map[string]*Member{}
	for _, n := range []string{"m0", "m1", "m2"} {
		ms[n] = k.member(n, nil)
	}
	// m0 seeds alone first, so that the others can only join: the
	// provider lists only m0 until it runs (a member never seeds while a
	// listed peer is silent, invariant 8).
	all := k.cl.Provider.Static
	k.prov.Set(all[:1])
	stop0 := runLoop(t, ms["m0"])
	defer stop0()
	cli := k.client(ms["m0"])
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.MemberList(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("m0 never seeded: %v (%s)", err, ms["m0"].reason())
		}
	}
	k.prov.Set(all)
	for _, n := range []string{"m1", "m2"} {
		stop := runLoop(t, ms[n])
		defer stop()
	}
	byPeer := map[string]*Member{}
	for _, m := range ms {
		byPeer[m.peerURL(m.self)] = m
	}

	firstSeen := map[uint64]bool{} // id -> learner at first sighting
	learnerHealthChecked := false
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := cli.MemberList(ctx)
		cancel()
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("member list: %v", err)
			}
			continue
		}
		learners, voters := 0, 0
		var learnerPeer string
		var learnerID uint64
		for _, mem := range resp.Members {
			if _, ok := firstSeen[mem.ID]; !ok {
				firstSeen[mem.ID] = mem.IsLearner
				if !mem.IsLearner && len(firstSeen) > 1 {
					t.Fatalf("member %x (%v) joined as a voter, not as a learner", mem.ID, mem.PeerURLs)
				}
			}
			if mem.IsLearner {
				learners++
				learnerPeer, learnerID = mem.PeerURLs[0], mem.ID
			} else {
				voters++
			}
		}
		if learners > 1 {
			t.Fatalf("%d learners at once: %v", learners, resp.Members)
		}
		if learners == 1 && !learnerHealthChecked {
			if m := byPeer[learnerPeer]; m != nil {
				code, body := httpGet(t, m.statusURL(m.self)+"/health")
				if stillLearner(t, cli, learnerID) && strings.Contains(body, "not yet a voter") {
					learnerHealthChecked = true
					if code != http.StatusServiceUnavailable || !strings.Contains(body, "learner") {
						t.Fatalf("/health of learner %s: %d %q, want 503 naming the learner", m.opts.Name, code, body)
					}
				} else if stillLearner(t, cli, learnerID) && code == http.StatusOK {
					t.Fatalf("/health of learner %s passed: %q", m.opts.Name, body)
				}
			}
		}
		if voters == 3 && learners == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bootstrap incomplete after 60s: %v; decisions m1 %q, m2 %q", resp.Members, ms["m1"].reason(), ms["m2"].reason())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(firstSeen) != 3 {
		t.Fatalf("saw %d members, want 3", len(firstSeen))
	}
	if !learnerHealthChecked {
		t.Log("no learner's /health was caught while it was a learner (promotion too quick); TestJoinAddsALearnerThenPromotes checks it")
	}
}

// stillLearner reports whether member id is listed as a learner now.
func stillLearner(t *testing.T, cli *clientv3.Client, id uint64) bool {
	t.Helper()
	for _, mem := range memberList(t, cli).Members {
		if mem.ID == id {
			return mem.IsLearner
		}
	}
	return false
}

// laggingReads is a watched copy of the coordinator that lags: it still
// answers with an older record.
type laggingReads struct {
	coord.Coordinator
	rec coord.Record
}

func (l laggingReads) Record(context.Context) (coord.Record, error) { return l.rec, nil }

// TestLaggingWatchedReadsNeverAct: the loop's first observation may read a
// watched copy of the coordinator (Options.Reads), but a decision that acts
// is taken from consistent reads. Here the copy still holds epoch 1, whose
// data this stopped member has, while the coordinator holds epoch 2 of a
// recovery elsewhere: acting on the copy would start the old epoch's data
// (invariant 5); the member must not start it.
func TestLaggingWatchedReadsNeverAct(t *testing.T) {
	k := newKit(t, "a")
	m := k.member("a", nil)
	k.seed(m)
	m.stopEtcd()
	old, err := k.co.Record(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := k.co.Lock(ctx, "recoverer")
	if err != nil {
		t.Fatal(err)
	}
	newer := old
	newer.Token, newer.Epoch, newer.ClusterID, newer.Seeder = "recovered-elsewhere", old.Epoch+1, old.ClusterID+1, "b"
	if _, err := k.co.UpdateRecord(ctx, l, newer); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	m.opts.Reads = laggingReads{Coordinator: k.co, rec: old}
	m.loop(ctx)
	if running, _ := m.running(); running {
		t.Fatalf("etcd started from epoch %d's data on a lagging read while the record holds epoch %d (%s)", old.Epoch, newer.Epoch, m.reason())
	}
}
