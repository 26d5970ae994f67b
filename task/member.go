package task

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/identity"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Defaults.
const (
	// DefaultLoopInterval is the time between two loops when nothing
	// happens. A decision that acted loops again at once.
	DefaultLoopInterval = time.Second
	// DefaultStopTimeout bounds a graceful stop: leadership transfer plus
	// etcd's own shutdown. Nomad's kill_timeout must be larger: config
	// validates it against the same constant.
	DefaultStopTimeout = config.MemberStopTimeout
	// DefaultLeaveTimeout bounds a leaving member's removal retries: long
	// enough for etcd's 5 s strict-reconfiguration window twice over.
	DefaultLeaveTimeout = 15 * time.Second
	// rpcTimeout bounds each observation request so one dead peer cannot
	// stall a loop.
	rpcTimeout = 1500 * time.Millisecond
)

// Options configure a Member.
type Options struct {
	Cluster     *config.Cluster
	Name        string
	Provider    provider.Provider
	Coordinator coord.Coordinator
	// Reads, optional, answers the reads of an idle loop and of the CA
	// check from a watched copy of the coordinator's keys (coord/consul's
	// Watched: a blocking query) instead of a request each: see idleReads.
	Reads Reads
	// Self, optional, is this member's instance; by default it is looked
	// up by Name among the provider's instances.
	Self *provider.Instance
	// Logger, optional, defaults to a logger on stderr.
	Logger hclog.Logger
	// LoopInterval, optional, defaults to DefaultLoopInterval.
	LoopInterval time.Duration
	// StopTimeout, optional, defaults to DefaultStopTimeout.
	StopTimeout time.Duration
	// LeaveTimeout, optional, defaults to DefaultLeaveTimeout: how long a
	// member whose slot is gone keeps trying to remove itself before it
	// stops. With Nomad it must fit in kill_timeout beside StopTimeout.
	LeaveTimeout time.Duration
	// EtcdLogLevel, optional, defaults to "warn".
	EtcdLogLevel string
	// Snapshots, optional, turns on scheduled snapshots and snapshots
	// before a member is removed and when the last voter stops.
	Snapshots *Snapshots
	// CAKEK is the cluster's key encryption key (TLS auto, certs.KEKSize
	// bytes): the coordinator then holds the cluster CA's key sealed with
	// it. Required with Consul coordination; optional with the local
	// coordinator, which keeps the CA in the clear in its private
	// directory without it.
	CAKEK []byte
	// Identities, optional, verifies Nomad workload identities: with it
	// and an access block, the status port serves ExchangePath.
	Identities *identity.Verifier
	// Clock, optional, defaults to the system clock: the time the loop
	// observes and paces itself by.
	Clock Clock
}

// Reads is a coordinator's read side answered from a watched copy, which
// lags the store by the time a change takes to arrive while the watch is
// current, and reads the coordinator itself otherwise.
type Reads interface {
	Record(ctx context.Context) (coord.Record, error)
	Pause(ctx context.Context) (coord.Pause, error)
	Load(ctx context.Context, key string) ([]byte, error)
	LoadOrStore(ctx context.Context, key string, value []byte) ([]byte, error)
}

// Member supervises one etcd member.
type Member struct {
	opts Options
	log  hclog.Logger
	dir  dataDir

	self     provider.Instance
	scheme   string
	tlsFiles certs.Files
	peerTLS  *tls.Config // client side, for peers' /status and etcd clients
	hcOnce   sync.Once
	hc       *http.Client // peers' /status (httpClient)
	ca       *certs.Pair  // tls auto: the cluster CA this member's certificates come from
	// caMismatch (under mu): the coordinator holds another CA than ca.
	caMismatch *status.CAMismatch
	// caExposed: the coordinator's mark of a CA whose key it held in the
	// clear (clusterca.ExposedKey), read at every CA check; nil: none.
	caExposed atomic.Pointer[clusterca.Exposure]

	mu      sync.Mutex
	etcd    *embed.Etcd
	stopped chan struct{} // closed when the running etcd stops on its own
	status  status.Member
	lock    coord.Lock
	record  *coord.Record
	// since: from when the timed conditions hold (loop only).
	since    since
	departed bool
	// leavingErr is the provider's last error telling whether this
	// instance is being taken away (loop only), said once.
	leavingErr string
	left       bool // this member removed itself (leave)
	starting   bool // an act that starts etcd is in progress
	client     *clientv3.Client
	// membersFrom (under mu): the endpoints whose member list the last
	// observation holds (nil when it holds none).
	membersFrom []string

	metrics           *metrics
	renew             *renewal      // certificates renewed while running (renew.go)
	rot               rotationState // the CA rotation this member follows (rotate.go)
	summary           []byte        // last cluster summary written (without its time)
	summaryAt         time.Time     // when it was written
	snapMetrics       *snapshotMetrics
	nextSnapshotCheck time.Time
	// wantFullSnapshot: a full snapshot is wanted now (a new delta
	// chain; read by the background save); deltas is the continuous
	// backup running here (superviseDeltas, loop only).
	wantFullSnapshot atomic.Bool
	deltas           *deltaRun
	nextDeltaStart   time.Time
	// snapRunning (under mu): a background save runs (startSnapshot);
	// snapCancel cancels it (stopEtcd: it may stream from this server).
	snapRunning bool
	snapCancel  context.CancelFunc
	// snapshotErr (under mu): why this member's last snapshot failed or
	// was not taken, with its time ("" once one succeeds or is not due):
	// /status's snapshot_error.
	snapshotErr string
	// metaDone (under mu): the etcd server whose member and cluster ids
	// the data dir's metadata holds (completeMeta); metaMu serializes
	// completeMeta, metaErr is the failure last logged (loop only).
	metaDone *embed.Etcd
	metaMu   sync.Mutex
	metaErr  string
	// pruning (under mu): pruneAsides runs; nextAsidePrune paces it.
	pruning        bool
	nextAsidePrune time.Time
	// bgCtx ends when the member stops; bg counts background saves.
	bgCtx          context.Context
	bgCancel       context.CancelFunc
	bg             sync.WaitGroup
	lastPreChange  time.Time
	snapshotListed time.Time
	latestSnapshot *planner.SnapshotInfo
	// latestWriters are the members that wrote latestSnapshot and the
	// newest segment of its delta chain: a member probes them before a
	// recovery (observeKnownHealthy).
	latestWriters []knownMember
	// knownSeen: the members that answered observeKnownHealthy's probes
	// as voters, by name, for RecoveryGrace after their last answer;
	// summaryRead and summarySeen: the summary the last probe read (a
	// rewrite since names its leader). listed: the provider's instances
	// of the last observation, by name and client URL. Loop only.
	knownSeen map[string]knownSeen
	// found (under mu) is knownSeen's copy that /status shares
	// (shareFound).
	found       []knownSeen
	summaryRead bool
	summarySeen []byte
	listed      map[string]bool
	// refusedSnapshot: the newest object of the store the member refuses,
	// from the same listing (observeLatestSnapshot).
	refusedSnapshot *planner.RefusedSnapshot
	// snapshotEpoch: the highest epoch of the objects of the same
	// listing that authenticate, of the record's lineage or not
	// (planner.Observation.SnapshotEpoch).
	snapshotEpoch uint64
	// snapshotListErr: why the last listing of the store failed, nil
	// once one answers (planner.Observation.ListingUnanswered).
	snapshotListErr error
	// damagedDeltas: delta segments this member's install found failing
	// their checksum (or not decrypting); peerDamaged: those its peers'
	// /status name now (takeDamaged). The observed chain ends before
	// either (skipDeltas).
	damagedDeltas map[string]bool
	peerDamaged   map[string]bool
	// refusedSnapshots: objects whose metadata failed authentication
	// (listAuthentic), each logged once; guarded by refusedMu.
	refusedMu        sync.Mutex
	refusedSnapshots map[string]bool
	startFailures    int // consecutive failed etcd starts
	// startCorrupt: why the last start failed etcd's initial corruption
	// check ("" otherwise); cleared by a start or a set-aside.
	startCorrupt string
	// checkAtStart: the next start runs etcd's initial corruption check;
	// skipInitialCheck: the last one failed while the peers disagreed
	// among themselves, so the next start goes without it.
	checkAtStart, skipInitialCheck bool
	caChecked                      time.Time
	nextAccessCheck                time.Time // the leader's next comparison of etcd's auth with the access rules
	caCertPublished                time.Time // the leader's last write of the CA certificate (publishCACert)
	// maintainFailed: why the last maintenance failed, and when.
	maintainFailed   string
	maintainFailedAt time.Time
	http             *http.Server
}

// New checks the options and prepares TLS material. It starts nothing.
func New(ctx context.Context, o Options) (*Member, error) {
	if o.Cluster == nil || o.Provider == nil || o.Coordinator == nil || o.Name == "" {
		return nil, errors.New("task: cluster, name, provider and coordinator are required")
	}
	if o.Logger == nil {
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: "etcd-nomad"})
	}
	if o.LoopInterval <= 0 {
		o.LoopInterval = DefaultLoopInterval
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.LeaveTimeout <= 0 {
		o.LeaveTimeout = DefaultLeaveTimeout
	}
	if o.EtcdLogLevel == "" {
		o.EtcdLogLevel = "warn"
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	m := &Member{
		opts:    o,
		log:     o.Logger.Named("member").With("member", o.Name),
		dir:     dataDir{datadir.Dir{Root: filepath.Join(o.Cluster.DataDir, o.Name)}},
		since:   since{},
		metrics: newMetrics(o.Cluster.Name, o.Name),
	}
	m.bgCtx, m.bgCancel = context.WithCancel(context.Background())
	m.metrics.staleAfter.Set(o.Cluster.Provider.StaleAfter.Seconds())
	m.snapMetrics = newSnapshotMetrics(m.metrics.reg, prometheus.Labels{"cluster": o.Cluster.Name, "member": o.Name}, o.Snapshots)
	m.renew = newRenewal(m.metrics.reg, prometheus.Labels{"cluster": o.Cluster.Name, "member": o.Name}, m.warnBefore)
	if o.Self != nil {
		m.self = *o.Self
	} else {
		insts, err := o.Provider.Instances(ctx)
		if err != nil {
			return nil, fmt.Errorf("list instances: %w", err)
		}
		found := false
		for _, in := range insts {
			if in.Name == o.Name {
				m.self, found = in, true
			}
		}
		if !found {
			return nil, fmt.Errorf("member %q is not among the provider's instances", o.Name)
		}
	}
	owners := map[string]bool{} // listed instances: running (true) or Unknown
	if insts, err := o.Provider.Instances(ctx); err == nil {
		for _, in := range insts {
			owners[in.Name] = !in.Unknown
		}
	}
	var unreadable *UnreadableDataError
	if from, err := adoptPrevious(m.dir.Root, o.Cluster.Name, m.self.Address, func(n string) (bool, bool) { live, listed := owners[n]; return listed, live }); errors.As(err, &unreadable) {
		return nil, fmt.Errorf("data directory: %w", err)
	} else if err != nil {
		m.log.Error("previous data not adopted", "error", err)
	} else if from != "" {
		m.log.Warn("adopted the data of a previous allocation (Nomad moved its disk here)", "from", from, "to", m.dir.Root)
	}
	if err := os.MkdirAll(m.dir.Root, 0o700); err != nil {
		return nil, fmt.Errorf("create member dir: %w", err)
	}
	if err := m.setupTLS(ctx); err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	m.status = status.Member{PID: os.Getpid(), Name: o.Name, Cluster: o.Cluster.Name, PeerURL: m.peerURL(m.self), ClientURL: m.clientURL(m.self)}
	return m, nil
}

func (m *Member) setupTLS(ctx context.Context) error {
	c := m.opts.Cluster
	switch c.TLS.Mode {
	case config.TLSOff:
		m.scheme = "http"
		return nil
	case config.TLSFiles:
		m.scheme = "https"
		m.tlsFiles = certs.Files{CA: c.TLS.CAFile, Cert: c.TLS.CertFile, Key: c.TLS.KeyFile}
	default:
		m.scheme = "https"
		ca, err := m.chooseCA(ctx)
		if err != nil {
			return err
		}
		m.ca = &ca
		m.restoreCA(ctx)
		m.followRotation(ctx)
		if err := m.issueMember(time.Now()); err != nil {
			return err
		}
		m.tlsFiles = m.dir.memberFiles()
	}
	cfg, err := certs.ClientConfig(m.tlsFiles)
	if err != nil {
		return err
	}
	if m.ca != nil {
		// The member's own clients act as etcd's root user: with the
		// cluster's access rules on, membership changes, snapshots and the
		// rules themselves need it (etcd names a certificate's user by its
		// CN). Peers' /status accepts any certificate of the cluster CA.
		// Renewed while running (renewOnce), like the member certificate.
		if err := m.issueRoot(time.Now()); err != nil {
			return err
		}
		cfg.Certificates = nil
		cfg.GetClientCertificate = m.rootCertificate
	}
	m.peerTLS = cfg
	return nil
}

// caCheckEvery paces a running member's check of the cluster CA in the
// coordinator (one read).
const caCheckEvery = 30 * time.Second

// restoreCA stores this running member's CA again when the coordinator
// lost its state (no record): before the record is re-written, so that
// members and clients starting afterwards get the CA the cluster uses. A
// different CA in the coordinator is reported, never adopted. It also
// stores the status CA, and the sealed CA where the coordinator held only
// the plaintext one of an earlier version, whose copy it then deletes
// (retirePlaintextCA): at start and at every CA check.
func (m *Member) restoreCA(ctx context.Context) {
	if m.ca == nil {
		return
	}
	cur := m.currentCA()
	held, err := clusterca.Offer(ctx, m.caReads(), *cur, m.opts.CAKEK)
	switch {
	case err != nil:
		m.log.Warn("cluster CA not restored", "error", err)
	case !clusterca.Same(held, *cur) && m.rotationCovers(held):
		// A CA rotation moves the members and the coordinator's CA
		// one after the other (rotate.go): not a mismatch.
		m.clearCAMismatch()
	case !clusterca.Same(held, *cur):
		m.reportCAMismatch(*cur, held)
	default:
		m.clearCAMismatch()
		m.retirePlaintextCA(ctx, held)
		m.repairStatusCA(ctx, held)
	}
	m.readExposure(ctx)
}

func (m *Member) peerURL(in provider.Instance) string   { return in.PeerURL(m.scheme) }
func (m *Member) clientURL(in provider.Instance) string { return in.ClientURL(m.scheme) }
func (m *Member) statusURL(in provider.Instance) string { return in.StatusURL(m.scheme) }

// Run supervises the member until ctx ends, then stops it gracefully:
// leadership is handed over if this member leads, within StopTimeout.
func (m *Member) Run(ctx context.Context) error {
	if err := m.serveStatus(); err != nil {
		return err
	}
	defer m.shutdown()
	go m.renewLoop(m.bgCtx)
	m.log.Info("supervising member", "data_dir", m.dir.Root, "peer_url", m.status.PeerURL, "client_url", m.status.ClientURL)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-m.stoppedCh():
			m.log.Warn("etcd stopped on its own")
			m.reapStopped()
		}
		again := m.loop(ctx)
		if again {
			timer.Reset(0)
		} else {
			timer.Reset(m.opts.LoopInterval)
		}
	}
}

func (m *Member) stoppedCh() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped == nil {
		return nil
	}
	return m.stopped
}

// loop runs one observe → plan → act cycle; it returns true when the next
// cycle should start at once.
func (m *Member) loop(ctx context.Context) bool {
	reads, watched := m.idleReads()
	o, err := m.observeLoop(ctx, reads)
	if err != nil {
		m.log.Warn("observation failed", "error", err)
		m.publishSummaryUnobserved(ctx)
		m.releaseLock(ctx)
		return false
	}
	if planner.PlanUpkeep(o).Depart {
		// Leaving changes the membership: the rest of the loop works
		// from what the cluster looks like afterwards.
		m.depart(ctx, o)
		watched = false
		if o, err = m.observeLoop(ctx, m.opts.Coordinator); err != nil {
			m.log.Warn("observation failed", "error", err)
			m.releaseLock(ctx)
			return false
		}
	}
	d := planner.Plan(o)
	if watched && (d.Kind != planner.Wait || d.NeedsLock) {
		// A decision that acts (or takes the lock to act) is taken from
		// consistent reads: the watched copy only tells the loop that
		// nothing is to be done.
		if o, err = m.observeLoop(ctx, m.opts.Coordinator); err != nil {
			m.log.Warn("observation failed", "error", err)
			m.releaseLock(ctx)
			return false
		}
		d = planner.Plan(o)
	}
	m.retryMeta()
	m.upkeep(ctx, o, planner.PlanUpkeep(o))
	m.metrics.observed(o)
	m.metrics.decision(d)
	m.setDecision(d)
	if d.Kind != planner.Wait || d.NeedsLock {
		m.log.Info("decision", "kind", d.Kind, "reason", d.Reason)
	} else {
		m.log.Debug("decision", "kind", d.Kind, "reason", d.Reason)
	}
	if d.NeedsLock {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		l, err := m.opts.Coordinator.Lock(lctx, m.opts.Name)
		cancel()
		if err != nil {
			m.log.Warn("lock not taken", "error", err)
			return false
		}
		m.mu.Lock()
		m.lock = l
		m.mu.Unlock()
		return true
	}
	err = m.act(ctx, o, d)
	m.releaseLock(ctx)
	if d.Kind == planner.Maintain {
		m.maintainFailed, m.maintainFailedAt = "", time.Time{}
		if err != nil {
			m.maintainFailed, m.maintainFailedAt = err.Error(), m.now()
		}
	}
	if err != nil {
		m.metrics.failures.Inc()
		m.log.Warn("action failed", "kind", d.Kind, "error", err)
		return false
	}
	return d.Kind != planner.Wait
}

func (m *Member) releaseLock(ctx context.Context) {
	m.mu.Lock()
	l := m.lock
	m.lock = nil
	m.mu.Unlock()
	if l != nil {
		_ = l.Unlock(ctx)
	}
}

// NewToken returns a fresh random cluster token.
func NewToken() string { return newToken() }

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (m *Member) shutdown() {
	m.stopDeltas(true)
	m.mu.Lock()
	e := m.etcd
	m.bgCancel() // a background upload stops now, not after the leave
	m.mu.Unlock()
	if e != nil {
		m.leave()
		m.stopSnapshot()
		m.log.Info("stopping etcd", "timeout", m.opts.StopTimeout)
		done := make(chan struct{})
		go func() { e.Close(); close(done) }()
		select {
		case <-done:
			m.log.Info("etcd stopped")
			if err := m.dir.MarkStopped(); err != nil {
				m.log.Warn("could not mark the data cleanly stopped (a replacement will not adopt it)", "error", err)
			}
		case <-time.After(m.opts.StopTimeout):
			m.log.Warn("etcd did not stop in time", "timeout", m.opts.StopTimeout)
		}
	}
	m.closeResources()
}

// closeResources releases what a member holds besides etcd: its
// background save, the lock, its etcd client and the status server. Safe
// to call more than once.
func (m *Member) closeResources() {
	m.stopBackground()
	m.releaseLock(context.Background())
	m.mu.Lock()
	if m.client != nil {
		m.client.Close()
		m.client = nil
	}
	m.mu.Unlock()
	if m.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = m.http.Shutdown(ctx)
		cancel()
	}
}

// inheritor is implemented by providers that know whether this member's
// replacement inherits its data (Nomad's migrating ephemeral disk).
type inheritor interface {
	Inherited(ctx context.Context) (bool, error)
}

// leaver is implemented by providers that know when this member's slot is
// going away for good.
type leaver interface {
	Leaving(ctx context.Context) (bool, error)
}

// leave removes this member from the membership before it stops, when its
// slot is gone and the removal is safe (planner.PlanLeave). It reports
// whether the member is out of the cluster (removed now or before).
//
// Invariant 12: a graceful departure never costs quorum. etcd refuses a
// removal until the remaining voters have been connected for 5 s (strict
// reconfiguration), and two members stopped together must leave one after
// the other: so the member keeps retrying under the lock, re-observing each
// time, until LeaveTimeout, and hands leadership away before removing
// itself. A member that gave up after one refusal left the survivor alone
// with a stale majority for recovery_grace.
func (m *Member) leave() bool {
	lv, ok := m.opts.Provider.(leaver)
	if !ok {
		return false
	}
	if m.left {
		return true // removed already (an earlier leave, e.g. an ASG lifecycle hook)
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.LeaveTimeout)
	defer cancel()
	leaving, err := lv.Leaving(ctx)
	if err != nil {
		m.log.Warn("cannot tell whether this member is leaving; keeping it", "error", err)
		return false
	}
	if !leaving {
		return false
	}
	inherited := false
	if ih, ok := m.opts.Provider.(inheritor); ok {
		if inherited, err = ih.Inherited(ctx); err != nil {
			m.log.Warn("cannot tell whether the replacement inherits this member's data; leaving for good", "error", err)
			inherited = false
		}
	}
	for attempt := 1; ; attempt++ {
		out, again := m.leaveOnce(ctx, attempt, inherited)
		if out {
			m.left = true
		}
		if out || !again {
			return out
		}
		select {
		case <-ctx.Done():
			m.log.Warn("leaving: stop deadline reached before this member could be removed; stopping as a member", "attempts", attempt, "timeout", m.opts.LeaveTimeout)
			return false
		case <-time.After(leaveRetryEvery):
		}
	}
}

// LeaveBudget is the LeaveTimeout that fits a Nomad kill_timeout: what is
// left after leaveStopMargin for etcd's own stop (usually well under a
// second; DefaultStopTimeout bounds the worst case, and a kill in it loses
// nothing: etcd's data is durable); at least 5 s, and the default when
// kill_timeout is unset.
func LeaveBudget(killTimeout time.Duration) time.Duration {
	if killTimeout <= 0 {
		return DefaultLeaveTimeout
	}
	return max(5*time.Second, killTimeout-leaveStopMargin)
}

// leaveStopMargin is kept of kill_timeout for stopping etcd after a leave.
const leaveStopMargin = 8 * time.Second

// leaveRetryEvery paces leave's attempts.
const leaveRetryEvery = 500 * time.Millisecond

// leaveOnce makes one attempt under the lock: out reports the member is out
// of the membership, again that another attempt may succeed.
func (m *Member) leaveOnce(ctx context.Context, attempt int, inherited bool) (out, again bool) {
	lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
	l, err := m.opts.Coordinator.Lock(lctx, m.opts.Name)
	lcancel()
	if err != nil {
		m.log.Debug("leaving: lock not taken yet", "attempt", attempt, "error", err)
		return false, true
	}
	m.mu.Lock()
	m.lock = l
	m.mu.Unlock()
	keepLock := false
	defer func() {
		if !keepLock {
			m.releaseLock(ctx)
		}
	}()
	o, err := m.observe(ctx)
	o.DataInherited = inherited
	if err != nil {
		m.log.Warn("leaving: observation failed", "attempt", attempt, "error", err)
		return false, true
	}
	if !o.Running {
		return false, false
	}
	if o.MembersKnown && findMember(o.Members, o.SelfID) < 0 {
		return true, false
	}
	d := planner.PlanLeave(o)
	if attempt == 1 || d.Kind != planner.Wait {
		m.log.Info("leaving", "kind", d.Kind, "reason", d.Reason, "attempt", attempt)
	}
	if d.Kind == planner.KeepMembership {
		// Hold the lock until etcd has stopped (shutdown releases it):
		// a member leaving at the same time must see this one gone.
		keepLock = true
		return false, false
	}
	if d.Kind != planner.RemoveMember {
		// No quorum, or removing this member now would leave too few
		// healthy voters (another member is leaving or restarting):
		// try again while the deadline allows. The last voter stays.
		last := o.MembersKnown && voterCount(o.Members) <= 1
		return false, !last
	}
	if o.LeaderID == o.SelfID {
		m.handOffLeadership(ctx, o)
	}
	if err := m.removeMember(ctx, o, d); err != nil {
		m.log.Info("leaving: removal refused, retrying (etcd refuses membership changes until the remaining voters have been connected for 5s)", "attempt", attempt, "error", err)
		return false, true
	}
	return true, false
}

// handOffLeadership moves leadership to a healthy voter before this
// member removes itself, so the cluster never waits for an election.
func (m *Member) handOffLeadership(ctx context.Context, o planner.Observation) {
	for _, mem := range o.Members {
		if mem.ID == o.SelfID || !mem.Healthy || mem.Learner {
			continue
		}
		cli, err := m.etcdClient([]string{m.clientURL(m.self)})
		if err != nil {
			return
		}
		mctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = cli.MoveLeader(mctx, mem.ID)
		cancel()
		if err != nil {
			m.log.Warn("leadership transfer before leaving failed", "to", mem.Name, "error", err)
		} else {
			m.log.Info("leadership handed over before leaving", "to", mem.Name)
		}
		return
	}
}

func voterCount(ms []planner.Member) int {
	n := 0
	for _, x := range ms {
		if !x.Learner {
			n++
		}
	}
	return n
}

func findMember(ms []planner.Member, id uint64) int {
	for i, x := range ms {
		if x.ID == id {
			return i
		}
	}
	return -1
}

// summaryWriter is implemented by coordinators that can hold an
// informational cluster summary (Consul KV shows it beside the checks).
type summaryWriter interface {
	Put(ctx context.Context, key string, value []byte) error
}

// summaryReader is implemented by coordinators that can read the summary
// back (Put's key): a member without data probes its members.
type summaryReader interface {
	Get(ctx context.Context, key string) ([]byte, error)
}

// Summary is the cluster-level view the leader publishes.
type Summary struct {
	Cluster   string          `json:"cluster"`
	ClusterID string          `json:"cluster_id"`
	Epoch     uint64          `json:"epoch"`
	Leader    string          `json:"leader"`
	Voters    int             `json:"voters"`
	Learners  int             `json:"learners"`
	Healthy   int             `json:"healthy"`
	Desired   int             `json:"desired"`
	Members   []SummaryMember `json:"members"`
	// Written is the leader's clock when it wrote this summary: it
	// writes it every summaryBeat, changed or not, so a rewrite shows a
	// leader serves. Readers only tell one value from another (clocks
	// differ); they never compare it with their own.
	Written time.Time `json:"written"`
}

// SummaryMember is one member in a Summary. ClientURLs are what a member
// without data probes during a quorum loss (observeKnownHealthy): it has
// no membership of its own.
type SummaryMember struct {
	Name       string   `json:"name"`
	ID         string   `json:"id"`
	Learner    bool     `json:"learner"`
	Healthy    bool     `json:"healthy"`
	ClientURLs []string `json:"client_urls,omitempty"`
}

// publishSummary writes the summary (Upkeep.PublishSummary: this member
// leads) when it changed, and every summaryBeat unchanged.
func (m *Member) publishSummary(ctx context.Context, o planner.Observation) {
	sw, ok := m.opts.Coordinator.(summaryWriter)
	if !ok {
		return
	}
	s := Summary{Cluster: m.opts.Cluster.Name, ClusterID: fmt.Sprintf("%x", o.Record.ClusterID), Epoch: o.Record.Epoch, Desired: o.DesiredSize}
	for _, mem := range o.Members {
		if mem.Learner {
			s.Learners++
		} else {
			s.Voters++
		}
		if mem.Healthy {
			s.Healthy++
		}
		if mem.ID == o.LeaderID {
			s.Leader = mem.Name
		}
		s.Members = append(s.Members, SummaryMember{Name: mem.Name, ID: fmt.Sprintf("%x", mem.ID), Learner: mem.Learner, Healthy: mem.Healthy, ClientURLs: mem.ClientURLs})
	}
	m.writeSummary(ctx, sw, s)
}

// summaryBeat is how often a leader writes its summary unchanged: the
// summary is its heartbeat in the coordinator. A member about to recover
// that sees it rewritten knows a leader serves, even one the provider no
// longer lists and a partition hides from it (sim seeds 423, 458, 591
// with CollectRunning: a partition longer than the recovery grace hid a
// collected majority, and a recovery started a second cluster beside
// it), and within the recovery grace: it must be well below it. A member
// without data probes the summary's members, and Consul may have lost it
// or restored an older one meanwhile (data review, session 11: an idle
// leader never wrote it again). One small write every few seconds.
const summaryBeat = 5 * time.Second

// writeSummary writes s when it changed since this member last wrote it,
// or summaryBeat after that write, with the time it is written.
func (m *Member) writeSummary(ctx context.Context, sw summaryWriter, s Summary) {
	view, err := json.Marshal(s)
	if err != nil || bytes.Equal(view, m.summary) && m.now().Sub(m.summaryAt) < summaryBeat {
		return
	}
	s.Written = m.now().UTC()
	b, err := json.Marshal(s)
	if err != nil {
		return
	}
	if err := sw.Put(ctx, "summary", b); err != nil {
		m.log.Debug("summary not written", "error", err)
		return
	}
	m.summary, m.summaryAt = view, m.now()
}

// publishSummaryUnobserved writes the summary when the loop's observation
// failed (the provider does not answer: this host may be cut off from the
// Nomad servers while Nomad collects its allocation) and this member's
// server leads the cluster of the record it read last: the membership
// its own server knows, with the client URLs a member without data probes
// (observeKnownHealthy). Without it the summary kept naming members gone
// since, and an empty replacement recovered beside a collected majority
// that still served (sim seed 63 with CollectRunning).
func (m *Member) publishSummaryUnobserved(ctx context.Context) {
	sw, ok := m.opts.Coordinator.(summaryWriter)
	m.mu.Lock()
	e, rec := m.etcd, m.record
	m.mu.Unlock()
	if !ok || e == nil || rec == nil {
		return
	}
	srv := e.Server
	if srv.Leader() == 0 || srv.Leader() != srv.MemberID() {
		return
	}
	clusterID := uint64(srv.Cluster().ID())
	if rec.ClusterID != clusterID {
		// This member's own seed or recovery, started and not confirmed
		// yet, counts as the record's cluster: Nomad may collect the
		// seeder right after its start, before it could confirm it, and
		// its summary keeps a takeover from starting a second cluster
		// beside it (sim seed 466 with CollectRunning).
		meta, err := m.dir.ReadMeta()
		if err != nil || rec.ClusterID != 0 || rec.Seeder != meta.Name || rec.Token != meta.Token || rec.Epoch != meta.Epoch {
			return
		}
	}
	s := Summary{Cluster: m.opts.Cluster.Name, ClusterID: fmt.Sprintf("%x", clusterID), Epoch: rec.Epoch, Desired: m.opts.Cluster.Size}
	for _, mem := range srv.Cluster().Members() {
		if mem.IsLearner {
			s.Learners++
		} else {
			s.Voters++
		}
		if mem.ID == srv.MemberID() {
			s.Leader = mem.Name
		}
		s.Members = append(s.Members, SummaryMember{Name: mem.Name, ID: fmt.Sprintf("%x", uint64(mem.ID)), Learner: mem.IsLearner, ClientURLs: mem.ClientURLs})
	}
	m.writeSummary(ctx, sw, s)
}

// replacer is implemented by providers that can replace an instance
// (auto-scaling groups).
type replacer interface {
	ReplacementInFlight(ctx context.Context) (bool, error)
	MarkUnhealthy(ctx context.Context, name string) error
}

// departer is implemented by providers whose instances learn, while they
// run, that they are being taken away (ASG lifecycle Terminating:Wait):
// the member leaves the cluster, then tells the provider it may proceed.
type departer interface {
	leaver
	Depart(ctx context.Context) error
}

// depart carries out Upkeep.Depart for departer providers: the member
// leaves the cluster, then tells the provider it may proceed.
func (m *Member) depart(ctx context.Context, o planner.Observation) {
	dp, ok := m.opts.Provider.(departer)
	if !ok {
		return
	}
	m.log.Info("this instance is being taken away: leaving the cluster")
	m.mu.Lock()
	running := m.etcd != nil
	m.mu.Unlock()
	if running && !m.leave() {
		return // try again next loop; the lifecycle hook waits for us
	}
	if !running {
		// Stopped (removed, or crashed): go only once the member is out
		// of the membership; the leader removes an absent member.
		if !o.MembersKnown {
			return
		}
		if o.Local.MemberID != 0 && findMember(o.Members, o.Local.MemberID) >= 0 {
			m.log.Info("waiting for this member to be removed before completing the lifecycle action", "member_id", o.Local.MemberID)
			return
		}
	}
	if err := dp.Depart(ctx); err != nil {
		m.log.Warn("could not tell the provider this member has left", "error", err)
		return
	}
	m.departed = true
}

// preStopSnapshotFresh: a voter that stops while others run (a rolling
// update of the job, which is how etcd-nomad and its embedded etcd are
// upgraded, a drain, a restart) saves a full snapshot first unless the
// store holds one this recent: the first member a rolling update stops
// saves it, the next ones find it.
const preStopSnapshotFresh = 10 * time.Minute

// stopSnapshot saves a snapshot as this member stops: always when it is the
// only voter left; before an update or any other stop of a voter of a
// cluster with a quorum unless the store's newest full snapshot is under
// preStopSnapshotFresh old. Bounded by the stop budget (LeaveTimeout fits
// the job's kill_timeout): a save cut short is logged, and the stop goes on.
func (m *Member) stopSnapshot() {
	s := m.opts.Snapshots
	if s == nil || m.left {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(m.opts.StopTimeout, m.opts.LeaveTimeout))
	defer cancel()
	o, err := m.observe(ctx)
	if err != nil || !o.Running || !o.MembersKnown {
		return
	}
	voters := 0
	for _, mem := range o.Members {
		if !mem.Learner {
			voters++
		}
	}
	if voters == 1 {
		if err := m.saveSnapshot(ctx, m.snapshotEndpoint(o), "last voter stopping"); err != nil {
			m.log.Warn("snapshot of the last voter failed", "error", err)
		}
		return
	}
	if o.Local.Learner || o.LeaderID == 0 {
		return // a learner's data may lag; without a quorum a save fails
	}
	list, err := m.listLineage(ctx)
	if err != nil {
		m.log.Warn("no snapshot before stopping: snapshot store unavailable", "error", err)
		return
	}
	if full, _, _, ok := snapshot.Newest(list); ok && m.now().Sub(full.Created) < preStopSnapshotFresh {
		m.log.Info("no snapshot before stopping: the store's newest is recent", "snapshot", full.Name, "age", m.now().Sub(full.Created).Round(time.Second))
		return
	}
	m.log.Info("saving a snapshot before stopping (the first stop of a rolling update saves one)", "budget", max(m.opts.StopTimeout, m.opts.LeaveTimeout))
	// Under the snapshot lease: while another member uploads one (a
	// scheduled save), that one is the snapshot before this stop.
	if err := m.leasedSnapshot(ctx, m.snapshotEndpoint(o), "before this member stops", false); err != nil {
		m.log.Warn("snapshot before stopping failed; stopping anyway", "error", err)
	}
}
