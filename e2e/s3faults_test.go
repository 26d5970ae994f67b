package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// resetProxy is toxiproxy, in this process, in front of a TCP server. Once
// enabled, each connection through it is reset (RST, no answer) at the
// first bytes the server sends, with a given probability, and the resets
// are counted.
type resetProxy struct {
	proxy *toxiproxy.Proxy
	// addr is http://host:port of the proxy.
	addr string
}

// countedResetType names countedReset in toxiproxy's registry of toxics.
const countedResetType = "counted_reset_peer"

// countedReset is toxiproxy's reset_peer (toxics.ResetToxic, no timeout)
// counting what it resets. toxiproxy runs it on a connection with the
// probability of its toxicity and keeps one value for all of them.
type countedReset struct{ resets atomic.Int64 }

func (r *countedReset) Pipe(stub *toxics.ToxicStub) {
	select {
	case <-stub.Interrupt:
	case chunk := <-stub.Input:
		if chunk != nil { // nil: the connection ended with nothing to reset
			r.resets.Add(1)
		}
		stub.Close()
	}
}

// startResetProxy starts the proxy in front of upstream (http://host:port)
// with its toxic off; it is closed when the test ends.
func startResetProxy(t *testing.T, upstream string) *resetProxy {
	t.Helper()
	toxics.Register(countedResetType, new(countedReset))
	p := toxiproxy.NewProxy(toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()), "s3", "127.0.0.1:0", strings.TrimPrefix(upstream, "http://"))
	if err := p.Start(); err != nil {
		t.Fatalf("start toxiproxy: %v", err)
	}
	t.Cleanup(p.Stop)
	rp := &resetProxy{proxy: p, addr: "http://" + p.Listen}
	// toxiproxy makes closing a connection a reset (SO_LINGER 0) only
	// where its own ResetToxic is in the chain when the connection is
	// accepted: this one, at toxicity 0, never fires and is there for that.
	rp.addToxic(t, `{"name": "linger", "type": "reset_peer", "stream": "downstream", "toxicity": 0}`)
	return rp
}

func (p *resetProxy) addToxic(t *testing.T, spec string) {
	t.Helper()
	if _, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
		t.Fatalf("toxic %s: %v", spec, err)
	}
}

// enable resets each connection, open or new, with probability toxicity.
func (p *resetProxy) enable(t *testing.T, toxicity float32) {
	t.Helper()
	p.addToxic(t, fmt.Sprintf(`{"name": "resets", "type": %q, "stream": "downstream", "toxicity": %g}`, countedResetType, toxicity))
}

// resets counts the connections reset so far.
func (p *resetProxy) resets() int64 {
	w := p.proxy.Toxics.GetToxic("resets")
	if w == nil {
		return 0
	}
	return w.Toxic.(*countedReset).resets.Load()
}

// leasedKeys reads every key attached to a lease, by lease, and the
// revision read.
func leasedKeys(t *testing.T, cli *clientv3.Client) (map[clientv3.LeaseID][]string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	byLease := map[clientv3.LeaseID][]string{}
	for _, kv := range resp.Kvs {
		if kv.Lease != 0 {
			byLease[clientv3.LeaseID(kv.Lease)] = append(byLease[clientv3.LeaseID(kv.Lease)], string(kv.Key))
		}
	}
	return byLease, resp.Header.Revision
}

// Every member loses its data while a consumer keeps a 10 s
// lease alive (leased keys, a lock, an election, beside an acknowledged
// writer), and S3 fails intermittently: toxiproxy, in this process between
// the members and the S3 server, resets about one connection in five from
// before the last delta segments are flushed to the end (the flushes, the
// recovery's listings and fetches all go through it). The writer stops
// just before the loss and the deltas are waited for: a loss of every data
// dir costs the writes of the last delta_interval by design. The recovery
// from the full snapshot and its deltas gets through the resets: every
// acknowledged key is back, and every lease alive at the loss is back
// alive, granted its TTL again, with exactly its keys attached.
func TestAllDataLostWhileS3ResetsConnections(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	var proxy *resetProxy
	s := startS3Cluster(t, "e2e-s3reset", func(addr string) string {
		proxy = startResetProxy(t, addr)
		return proxy.addr
	})
	c := s.cluster
	cli := c.client()
	w := clustertest.StartWriter(cli, "acked")
	deltas := func(n int) {
		t.Helper()
		waitFor(t, time.Minute, fmt.Sprintf("%d delta segments after %s", n, s.full.Name), func() (bool, string) {
			list, err := s.store.List(context.Background())
			_, chain, end, _ := snapshot.Newest(list)
			return len(chain) >= n, fmt.Sprintf("%d to revision %d (%v)", len(chain), end, err)
		})
	}
	deltas(3)
	proxy.enable(t, 0.2)
	deltas(8) // five more, flushed with the toxic on
	acked, _ := w.Finish()
	// The consumer's last session stays open: its lease is kept alive
	// through the loss.
	leased, written := leasedKeys(t, cli)
	if len(leased) == 0 {
		t.Fatal("no leased key before the loss")
	}
	s.waitDeltas(t, written)
	flushResets := proxy.resets()

	// The client asking about the leases after the loss dials again
	// within half a second (gRPC's default backoff grows to two
	// minutes): its first answer comes well inside their TTL.
	cfg := c.clientConfig()
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, MaxDelay: 500 * time.Millisecond},
		MinConnectTimeout: time.Second,
	}))
	asker, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer asker.Close()
	st, err := c.status()
	if err != nil {
		t.Fatal(err)
	}
	loseMembers(t, st.Members...)
	lost := time.Now()

	// The first answers of the recovered cluster about each lease: etcd
	// gives a restored lease its whole TTL when the restored member
	// starts, so a lease the first answer calls gone was dropped by the
	// restore, not expired. A client that lost its keepalive in the
	// outage (longer than the TTL) takes the lease up again.
	var restarted time.Duration
	for id, keys := range leased {
		var ttl *clientv3.LeaseTimeToLiveResponse
		waitFor(t, 3*time.Minute, fmt.Sprintf("the recovered cluster's answer about lease %x", id), func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			r, err := asker.TimeToLive(ctx, id, clientv3.WithAttachedKeys())
			if err != nil {
				return false, err.Error()
			}
			ttl = r
			return true, ""
		})
		if ttl.TTL > 0 && restarted == 0 {
			// When the restored lessor granted the TTL again.
			restarted = time.Since(lost) - time.Duration(ttl.GrantedTTL-ttl.TTL)*time.Second
		}
		got := make([]string, len(ttl.Keys))
		for i, k := range ttl.Keys {
			got[i] = string(k)
		}
		slices.Sort(got)
		slices.Sort(keys)
		t.Logf("lease %x %s after the loss: TTL %d of %d s, %d keys attached (%d before)", id, time.Since(lost).Round(100*time.Millisecond), ttl.TTL, ttl.GrantedTTL, len(got), len(keys))
		if ttl.TTL <= 0 || !slices.Equal(got, keys) {
			t.Errorf("lease %x after recovery: TTL %d, keys %v; before the loss it was alive with keys %v", id, ttl.TTL, got, keys)
			continue
		}
		ka, err := asker.KeepAlive(t.Context(), id)
		if err != nil {
			t.Fatalf("keep lease %x alive after recovery: %v", id, err)
		}
		go func() {
			for range ka {
			}
		}()
	}
	writable := time.Since(lost)
	_, rec := clustertest.WaitOnRecord(t, 3*time.Minute, s.before.Epoch+1, true, c.recorded)
	waitVoters(t, c, 3, 2*time.Minute)
	healed := time.Since(lost)
	recoveryResets := proxy.resets() - flushResets
	t.Logf("all data lost with S3 resetting 1 connection in 5 -> the restored member granted the leases again at about %s, answered in %s, 3 healthy voters in %s; %d connections reset (%d before the loss, %d during the recovery)",
		restarted.Round(100*time.Millisecond), writable.Round(100*time.Millisecond), healed.Round(100*time.Millisecond), proxy.resets(), flushResets, recoveryResets)

	s.restoredFrom(t, rec, written)
	clustertest.CheckAcked(t, cli, acked)
	after, _ := leasedKeys(t, asker)
	for id, keys := range leased {
		if got := after[id]; !slices.Equal(got, keys) {
			t.Errorf("lease %x kept alive: keys %v after recovery, %v before the loss", id, got, keys)
		}
	}
	w.CheckLeases(t, cli) // closes the consumer's session: its lease is revoked
	t.Logf("%d leases, %d leased keys checked; %d acknowledged keys", len(leased), len(slices.Concat(slices.Collect(maps.Values(leased))...)), len(acked))
	var logged []string
	for _, a := range c.allocs() {
		for _, l := range strings.Split(c.job().AllocLog(a.ID), "\n") {
			if strings.Contains(l, "operation error S3") {
				logged = append(logged, a.ID[:8]+": "+l)
			}
		}
	}
	// Most resets never reach the log: the SDK tries each request three
	// times. What does is an operation that failed all three, which the
	// member tried again at its next loop.
	t.Logf("%d member log lines name an S3 operation that failed:\n%s", len(logged), strings.Join(logged, "\n"))
	if recoveryResets == 0 {
		t.Fatalf("the proxy reset no connection during the recovery (%d before it): the fault never met the recovery", flushResets)
	}
}
