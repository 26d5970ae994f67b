package clustertest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// ConsumerTTL is the TTL, in seconds, of the lease a Consumer keeps alive:
// a service-registration or lock session of a real application.
const ConsumerTTL = 10

// Consumer does beside a Writer what real etcd consumers do (service
// registration, locks, leader election, caches fed by a watch), so that
// every test workload leaves leases, lock and election keys in the data a
// fault then restarts, recovers or restores: it keeps a session (a lease of
// ConsumerTTL seconds, kept alive by the client), puts keys attached to it,
// takes and releases a lock, campaigns once and then proclaims as the
// elected leader, and keeps a watch open on the writer's prefix. Errors
// during faults are expected and counted; what must hold is checked by
// CheckLeases.
type Consumer struct {
	cli    *clientv3.Client
	prefix string

	mu           sync.Mutex
	leased       map[string]clientv3.LeaseID // acknowledged leased key -> its lease
	sessions     int                         // sessions started
	sessionsLost int                         // sessions whose lease ended before Finish
	locks        int                         // locks taken and released
	proclaims    int                         // proclamations as the elected leader
	watchEvents  int
	watchReopens int
	errs         int
	lastErr      string

	lives       map[clientv3.LeaseID]*leaseLife // each lease's keepalive answers
	watchCtx    context.Context                 // ends the lives' observers
	watchCancel context.CancelFunc

	session *concurrency.Session
	stop    chan struct{}
	done    chan struct{}
}

// leaseLife is what the client heard of one lease: the last keepalive
// answer (when, and the TTL it granted) and when its keepalive channel
// closed. etcd ends a lease only when no keepalive reached the leader for
// a whole TTL; a lease that ends while its last answer's TTL still runs was
// revoked by the cluster, not expired by the application.
type leaseLife struct {
	lastAck  time.Time
	lastTTL  int64
	answered bool      // a keepalive was answered since the grant
	ended    time.Time // zero while the channel is open
}

// leaseSlack absorbs the round trip between the leader's renewal and the
// client's receipt of its answer.
const leaseSlack = time.Second

// endedEarly says whether a lease that ended at end (or is found ended
// then) ended before the TTL of its last keepalive answer ran out, and by
// how much.
func (l leaseLife) endedEarly(end time.Time) (bool, time.Duration) {
	if l.lastAck.IsZero() || !l.answered && !l.ended.IsZero() {
		// The client gives a lease up when its first keepalive goes
		// unanswered for a while (clientv3's firstKeepAliveTimeout, a
		// few seconds) and stops renewing it: etcd then expires it by
		// its rule, a TTL after the grant.
		return false, 0
	}
	expiry := l.lastAck.Add(time.Duration(l.lastTTL) * time.Second)
	early := expiry.Sub(end)
	return early > leaseSlack, early
}

// StartConsumer starts the consumer's work on cli under PREFIX-lease/,
// PREFIX-lock, PREFIX-elect, watching PREFIX/.
func StartConsumer(cli *clientv3.Client, prefix string) *Consumer {
	c := &Consumer{cli: cli, prefix: prefix, leased: map[string]clientv3.LeaseID{}, lives: map[clientv3.LeaseID]*leaseLife{},
		stop: make(chan struct{}), done: make(chan struct{})}
	c.watchCtx, c.watchCancel = context.WithCancel(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.watch(ctx) }()
	go func() { defer wg.Done(); c.work(ctx) }()
	go func() {
		<-c.stop
		cancel()
		wg.Wait()
		close(c.done)
	}()
	return c
}

// failUnlessStopped counts err unless the consumer is being stopped: an
// operation that Finish's cancel cut short ("proclaim: context canceled")
// is no error of the cluster's (CI run 20261127T094906Z counted one as a
// failure on a healthy member).
func (c *Consumer) failUnlessStopped(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	c.fail(err)
}

func (c *Consumer) fail(err error) {
	c.mu.Lock()
	c.errs++
	c.lastErr = err.Error()
	c.mu.Unlock()
}

// work keeps a session and, every 200 ms, puts a leased key, takes the lock
// and proclaims as leader (campaigning first with each new session).
func (c *Consumer) work(ctx context.Context) {
	var sess *concurrency.Session
	var elect *concurrency.Election
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			c.mu.Lock()
			c.session = sess
			c.mu.Unlock()
			return
		case <-time.After(200 * time.Millisecond):
		}
		if sess != nil {
			select {
			case <-sess.Done():
				c.mu.Lock()
				c.sessionsLost++
				c.mu.Unlock()
				sess, elect = nil, nil
			default:
			}
		}
		if sess == nil {
			// The lease is granted with a deadline (NewSession's own
			// grant has none, and a client whose endpoints all went away
			// waited in it for good: CI's scale test hung in Finish);
			// the session only keeps it alive, until CheckLeases.
			gctx, gcancel := context.WithTimeout(ctx, 2*time.Second)
			l, err := c.cli.Grant(gctx, ConsumerTTL)
			gcancel()
			if err != nil {
				c.failUnlessStopped(ctx, fmt.Errorf("grant: %w", err))
				continue
			}
			c.observe(l.ID, l.TTL)
			s, err := concurrency.NewSession(c.cli, concurrency.WithLease(l.ID), concurrency.WithContext(context.WithoutCancel(ctx)))
			if err != nil {
				c.failUnlessStopped(ctx, fmt.Errorf("session: %w", err))
				continue
			}
			sess = s
			c.mu.Lock()
			c.sessions++
			c.mu.Unlock()
		}
		opCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		key := fmt.Sprintf("%s-lease/%06d", c.prefix, i)
		if _, err := c.cli.Put(opCtx, key, "alive", clientv3.WithLease(sess.Lease())); err == nil {
			c.mu.Lock()
			c.leased[key] = sess.Lease()
			c.mu.Unlock()
		} else {
			c.failUnlessStopped(ctx, fmt.Errorf("leased put: %w", err))
		}
		mu := concurrency.NewMutex(sess, c.prefix+"-lock")
		if err := mu.Lock(opCtx); err == nil {
			_, err = c.cli.Txn(opCtx).If(mu.IsOwner()).Then(clientv3.OpPut(c.prefix+"-locked", key)).Commit()
			if uerr := mu.Unlock(opCtx); err == nil {
				err = uerr
			}
			if err == nil {
				c.mu.Lock()
				c.locks++
				c.mu.Unlock()
			} else {
				c.failUnlessStopped(ctx, fmt.Errorf("under the lock: %w", err))
			}
		} else {
			c.failUnlessStopped(ctx, fmt.Errorf("lock: %w", err))
		}
		if elect == nil {
			e := concurrency.NewElection(sess, c.prefix+"-elect")
			if err := e.Campaign(opCtx, key); err != nil {
				c.failUnlessStopped(ctx, fmt.Errorf("campaign: %w", err))
			} else {
				elect = e
			}
		} else if err := elect.Proclaim(opCtx, key); err != nil {
			c.failUnlessStopped(ctx, fmt.Errorf("proclaim: %w", err))
		} else {
			c.mu.Lock()
			c.proclaims++
			c.mu.Unlock()
		}
		cancel()
	}
}

// observe follows the keepalive answers of lease id (granted with ttl) in
// its own keepalive channel, beside the session's, until CheckLeases ends.
func (c *Consumer) observe(id clientv3.LeaseID, ttl int64) {
	life := &leaseLife{lastAck: time.Now(), lastTTL: ttl}
	c.mu.Lock()
	c.lives[id] = life
	c.mu.Unlock()
	ch, err := c.cli.KeepAlive(c.watchCtx, id)
	if err != nil {
		c.fail(fmt.Errorf("keepalive observer: %w", err))
		return
	}
	go func() {
		for resp := range ch {
			c.mu.Lock()
			life.lastAck, life.lastTTL, life.answered = time.Now(), resp.TTL, true
			c.mu.Unlock()
		}
		if c.watchCtx.Err() != nil {
			return // ended by CheckLeases, not by the cluster
		}
		c.mu.Lock()
		life.ended = time.Now()
		c.mu.Unlock()
	}()
}

// watch keeps a watch open on PREFIX/, reopening it from the next revision
// when it ends (a member restarted, the stream was cut).
func (c *Consumer) watch(ctx context.Context) {
	var next int64
	for ctx.Err() == nil {
		opts := []clientv3.OpOption{clientv3.WithPrefix()}
		if next > 0 {
			opts = append(opts, clientv3.WithRev(next))
		}
		for resp := range c.cli.Watch(clientv3.WithRequireLeader(ctx), c.prefix+"/", opts...) {
			if err := resp.Err(); err != nil {
				c.fail(fmt.Errorf("watch: %w", err))
				if resp.CompactRevision > 0 {
					next = resp.CompactRevision
				}
				break
			}
			c.mu.Lock()
			c.watchEvents += len(resp.Events)
			c.mu.Unlock()
			next = resp.Header.Revision + 1
		}
		if ctx.Err() == nil {
			c.mu.Lock()
			c.watchReopens++
			c.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// ConsumerReport is what a Consumer saw.
type ConsumerReport struct {
	LeasedKeys, Sessions, SessionsLost, Locks, Proclaims, WatchEvents, WatchReopens, Errors int
	LastError                                                                               string
	// LeasesExpired, filled in by CheckLeases, counts the leases that
	// expired by etcd's rule: no keepalive answered for a whole TTL.
	LeasesExpired int
}

func (r ConsumerReport) String() string {
	return fmt.Sprintf("%d leased keys acknowledged, %d sessions (%d ended early), %d locks, %d proclamations, %d watch events (%d reopens), %d errors (last: %s)",
		r.LeasedKeys, r.Sessions, r.SessionsLost, r.Locks, r.Proclaims, r.WatchEvents, r.WatchReopens, r.Errors, r.LastError)
}

// Report returns what the consumer saw so far.
func (c *Consumer) Report() ConsumerReport {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ConsumerReport{LeasedKeys: len(c.leased), Sessions: c.sessions, SessionsLost: c.sessionsLost, Locks: c.locks,
		Proclaims: c.proclaims, WatchEvents: c.watchEvents, WatchReopens: c.watchReopens, Errors: c.errs, LastError: c.lastErr}
}

// finishWait bounds how long Finish waits for the consumer's goroutines:
// each of their calls has its own deadline, but a test must go on (and
// report what it saw) even if one did not.
const finishWait = 30 * time.Second

// Finish stops the consumer's work; its last session stays open (its
// lease alive) until CheckLeases.
func (c *Consumer) Finish() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	select {
	case <-c.done:
	case <-time.After(finishWait):
		c.fail(fmt.Errorf("the consumer's work did not stop within %s", finishWait))
	}
}

// CheckLeases fails unless every acknowledged leased key whose lease is
// still alive is present and attached to that lease (a lease that lives
// while its keys are gone, or keys moved off their lease, is data lost by
// the cluster), and unless every lease that ended ended by etcd's rule: no
// keepalive answered for a whole TTL. A lease that ended while the TTL of
// its last keepalive answer still ran was revoked by the cluster (a restore
// that dropped it, a lessor that expired it early). Keys of leases that
// expired by the rule are gone by etcd's rules; they are counted and their
// gaps logged. The consumer's last session is closed afterwards (its lease
// revoked). Reads that fail are retried for up to a minute.
func (c *Consumer) CheckLeases(t testing.TB, cli *clientv3.Client) ConsumerReport {
	t.Helper()
	c.Finish()
	c.mu.Lock()
	leased := make(map[string]clientv3.LeaseID, len(c.leased))
	for k, id := range c.leased {
		leased[k] = id
	}
	sess := c.session
	c.mu.Unlock()
	defer c.watchCancel()
	if sess != nil {
		defer sess.Close()
	}
	var alive map[clientv3.LeaseID]bool
	var got map[string]clientv3.LeaseID
	var read time.Time
	WaitFor(t, time.Minute, "the leased keys and their leases read", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// Each try reads the leases again, then the keys: a lease alive
		// at a failed try may have expired by the next.
		alive = map[clientv3.LeaseID]bool{}
		for _, id := range leased {
			if _, ok := alive[id]; ok {
				continue
			}
			r, err := cli.TimeToLive(ctx, id)
			if err != nil {
				return false, fmt.Sprintf("lease %x: %v", id, err)
			}
			alive[id] = r.TTL > 0
		}
		read = time.Now()
		resp, err := cli.Get(ctx, c.prefix+"-lease/", clientv3.WithPrefix())
		if err != nil {
			return false, err.Error()
		}
		got = map[string]clientv3.LeaseID{}
		for _, kv := range resp.Kvs {
			got[string(kv.Key)] = clientv3.LeaseID(kv.Lease)
		}
		return true, ""
	})
	c.mu.Lock()
	lives := make(map[clientv3.LeaseID]leaseLife, len(c.lives))
	for id, l := range c.lives {
		lives[id] = *l
	}
	c.mu.Unlock()
	for _, id := range got {
		if _, ok := alive[id]; ok {
			alive[id] = true // its keys are there: etcd deletes them with the lease
		}
	}
	lost, ended := lostLeased(leased, alive, got)
	revoked, expired := endedLeases(leased, alive, lives, read)
	rep := c.Report()
	rep.LeasesExpired = len(expired)
	t.Logf("consumer: %s; %d keys of ended leases", rep, ended)
	for _, e := range expired {
		t.Logf("consumer: %s", e)
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged leased keys lost while their lease lives, e.g. %v", len(lost), lost[:min(len(lost), 5)])
	}
	if len(revoked) > 0 {
		t.Errorf("%d leases ended while kept alive (the cluster revoked them, their keys with them): %v", len(revoked), revoked)
	}
	if t.Failed() {
		t.FailNow()
	}
	return rep
}

// endedLeases sorts the leases that hold acknowledged keys and did not
// live at the read (at read) by how they ended: revoked, when the lease
// ended before its last keepalive answer's TTL ran out (its keepalive
// channel closed early, or it was found gone while the channel was open
// and that TTL still ran), or expired by etcd's rule (no keepalive
// answered for a TTL: an outage at least that long, which is logged).
func endedLeases(acked map[string]clientv3.LeaseID, alive map[clientv3.LeaseID]bool, lives map[clientv3.LeaseID]leaseLife, read time.Time) (revoked, expired []string) {
	seen := map[clientv3.LeaseID]bool{}
	for _, id := range acked {
		if alive[id] || seen[id] {
			continue
		}
		seen[id] = true
		life, ok := lives[id]
		if !ok {
			continue
		}
		end, how := life.ended, "its keepalive channel closed"
		if !life.answered && !end.IsZero() {
			how = "given up by the client: its first keepalive went unanswered"
		}
		if end.IsZero() {
			end, how = read, "found gone at the check"
		}
		if early, by := life.endedEarly(end); early {
			revoked = append(revoked, fmt.Sprintf("lease %x: %s at %s, %.1fs before the TTL of its last keepalive answer (at %s, %d s) ran out",
				id, how, end.Format("15:04:05.000"), by.Seconds(), life.lastAck.Format("15:04:05.000"), life.lastTTL))
			continue
		}
		expired = append(expired, fmt.Sprintf("lease %x expired: no keepalive answered from %s (last answer, TTL %d s) to %s (%s)",
			id, life.lastAck.Format("15:04:05.000"), life.lastTTL, end.Format("15:04:05.000"), how))
	}
	sort.Strings(revoked)
	sort.Strings(expired)
	return revoked, expired
}

// lostLeased compares the acknowledged leased keys (key -> lease) with
// what a read found (got) and which leases live: a key of a live lease that
// is absent or on another lease is lost; keys of ended leases are counted.
func lostLeased(acked map[string]clientv3.LeaseID, alive map[clientv3.LeaseID]bool, got map[string]clientv3.LeaseID) (lost []string, ended int) {
	for k, id := range acked {
		if !alive[id] {
			ended++
			continue
		}
		switch g, ok := got[k]; {
		case !ok:
			lost = append(lost, fmt.Sprintf("%s (lease %x alive, key absent)", k, id))
		case g != id:
			lost = append(lost, fmt.Sprintf("%s (lease %x alive, key on lease %x)", k, id, g))
		}
	}
	sort.Strings(lost)
	return lost, ended
}
