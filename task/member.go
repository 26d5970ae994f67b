package task

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/identity"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/status"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
	"github.com/etcd-nomad/etcd-nomad/task/etcdproc"
	"github.com/etcd-nomad/etcd-nomad/task/statusport"
	"github.com/etcd-nomad/etcd-nomad/task/trust"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
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
	Snapshots *backup.Snapshots
	// CAKEK is the cluster's key encryption key (TLS auto, certs.KEKSize
	// bytes): the coordinator then holds the cluster CA's key sealed with
	// it. Required with Consul coordination; optional with the local
	// coordinator, which keeps the CA in the clear in its private
	// directory without it.
	CAKEK []byte
	// Identities, optional, verifies Nomad workload identities: with it
	// and an access block, the status port serves exchange.Path.
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
	dir  datadir.Dir

	self  provider.Instance
	trust *trust.Trust

	proc *etcdproc.Process

	mu     sync.Mutex
	status status.Member
	lock   coord.Lock
	record *coord.Record
	// heldSince: from when each timed condition has held (loop only).
	heldSince heldSince
	leaving   leaveState // leave.go
	starting  bool       // an act that starts etcd is in progress
	client    *clientv3.Client
	known     knownState   // knownhealthy.go
	summary   summaryState // summary.go
	// fenceStreak: the loops in a row whose fenceUnobserved found this
	// member without a quorum under a newer recorded epoch.
	fenceStreak int
	access      accessState // access.go

	metrics *metrics
	backups *backup.Backups
	// metaCompletedFor (under mu): the etcd server whose member and
	// cluster ids the data dir's metadata holds (completeMeta); metaMu
	// serializes completeMeta, metaErrLogged is the failure last logged
	// (loop only).
	metaCompletedFor *embed.Etcd
	metaMu           sync.Mutex
	metaErrLogged    string
	// backgroundCtx ends when the member stops: the background work (the
	// backups', trust's renewal) ends with it.
	backgroundCtx    context.Context
	cancelBackground context.CancelFunc
	snapshotListed   time.Time
	latestSnapshot   *planner.SnapshotInfo
	// refusedSnapshot: the newest object of the store the member refuses,
	// from the same listing (observeLatestSnapshot).
	refusedSnapshot *planner.RefusedSnapshot
	// snapshotEpoch: the highest epoch of the objects of the same
	// listing that authenticate, of the record's lineage or not
	// (planner.Observation.SnapshotEpoch).
	snapshotEpoch uint64
	// lineEpochs: the same, per cluster id (the metadata's, hex) of
	// this cluster's objects (planner.Observation.LineEpoch).
	lineEpochs map[string]uint64
	// snapshotListErr: why the last listing of the store failed, nil
	// once one answers (planner.Observation.ListingUnanswered).
	snapshotListErr error
	// damagedDeltas: delta segments this member's install found failing
	// their checksum (or not decrypting); peerDamaged: those its peers'
	// /status name now (takeDamaged). The observed chain ends before
	// either (skipDeltas).
	damagedDeltas map[string]bool
	peerDamaged   map[string]bool
	// startCorrupt: why the last start failed etcd's initial corruption
	// check ("" otherwise); cleared by a start or a set-aside.
	startCorrupt string
	// reclaimFailed: why the last ReclaimSpace failed, and when.
	reclaimFailed   string
	reclaimFailedAt time.Time
	port            *statusport.Server
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
		opts:      o,
		log:       o.Logger.Named("member").With("member", o.Name),
		dir:       datadir.Dir{Root: filepath.Join(o.Cluster.DataDir, o.Name)},
		heldSince: heldSince{},
		metrics:   newMetrics(o.Cluster.Name, o.Name),
	}
	m.backgroundCtx, m.cancelBackground = context.WithCancel(context.Background())
	m.metrics.staleAfter.Set(o.Cluster.Provider.StaleAfter.Seconds())
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
	owner := func(n string) (bool, bool) { live, listed := owners[n]; return listed, live }
	if from, err := adoptPreviousLogged(m.dir.Root, o.Cluster.Name, m.self.Address, owner, m.log); errors.As(err, &unreadable) {
		return nil, fmt.Errorf("data directory: %w", err)
	} else if err != nil {
		m.log.Error("previous data not adopted", "error", err)
	} else if from != "" {
		m.log.Warn("adopted the data of a previous allocation (Nomad moved its disk here)", "from", from, "to", m.dir.Root)
	}
	if err := os.MkdirAll(m.dir.Root, 0o700); err != nil {
		return nil, fmt.Errorf("create member dir: %w", err)
	}
	m.loadHolders(m.now(), siblingDirs(m.dir.Root, owner))
	tr, err := trust.New(ctx, trust.Config{Cluster: o.Cluster, Name: o.Name, Self: m.self, Dir: m.dir, KEK: o.CAKEK, Identities: o.Identities,
		Log: m.log, Now: m.now, Metrics: m.metrics.reg, Labels: prometheus.Labels{"cluster": o.Cluster.Name, "member": o.Name},
		Coordinator: o.Coordinator, Reads: m.caReads(), Instances: o.Provider.Instances})
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	m.trust = tr
	m.backups = m.newBackups()
	// A save streams from this member's server while it uploads: it
	// cannot go on once the server stops, and etcd's close would wait for
	// the stream.
	m.proc = etcdproc.New(etcdproc.Config{Log: m.log, BeforeStop: m.backups.CancelSave})
	m.status = status.Member{PID: os.Getpid(), Name: o.Name, Cluster: o.Cluster.Name, PeerURL: m.peerURL(m.self), ClientURL: m.clientURL(m.self)}
	return m, nil
}

// newBackups builds the member's backups part (after trust: it dials
// etcd with trust's client TLS).
func (m *Member) newBackups() *backup.Backups {
	return backup.New(backup.Config{
		Snapshots: m.opts.Snapshots, Cluster: m.opts.Cluster.Name, Name: m.opts.Name, Dir: m.dir,
		Log: m.log, Now: m.now, Metrics: m.metrics.reg, Labels: prometheus.Labels{"cluster": m.opts.Cluster.Name, "member": m.opts.Name},
		Coordinator: m.opts.Coordinator,
		Record: func() *coord.Record {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.record
		},
		TLS: m.trust.PeerTLS(), Self: m.clientURL(m.self), Endpoint: m.snapshotEndpoint,
		MemberID: func() string {
			m.mu.Lock()
			defer m.mu.Unlock()
			e := m.proc.Server()
			if e == nil {
				return ""
			}
			return fmt.Sprintf("%x", uint64(e.Server.MemberID()))
		},
		Context: m.backgroundCtx,
	})
}

func (m *Member) peerURL(in provider.Instance) string   { return in.PeerURL(m.trust.Scheme()) }
func (m *Member) clientURL(in provider.Instance) string { return in.ClientURL(m.trust.Scheme()) }
func (m *Member) statusURL(in provider.Instance) string { return in.StatusURL(m.trust.Scheme()) }

func (m *Member) releaseLock(ctx context.Context) {
	m.mu.Lock()
	l := m.lock
	m.lock = nil
	m.mu.Unlock()
	if l != nil {
		_ = l.Unlock(ctx)
	}
}

func findMember(ms []planner.Member, id uint64) int {
	for i, x := range ms {
		if x.ID == id {
			return i
		}
	}
	return -1
}

// now is the loop's time (Options.Clock).
func (m *Member) now() time.Time { return m.opts.Clock.Now() }

// knownMember is a member of this member's last known membership: what
// its own data (etcd's members bucket) or its running server knows.
type knownMember struct {
	id         uint64
	name       string
	clientURLs []string
	clusterID  string // hex; a snapshot's taker only
}

// storedMember is etcd's JSON for a member in its backend's members
// bucket (membership.Member: id, its raft attributes and attributes).
type storedMember struct {
	ID         uint64   `json:"id"`
	Name       string   `json:"name"`
	ClientURLs []string `json:"clientURLs"`
}

// knownSeen is a member that answered a probe as a voter (knownState.seen):
// where to ask it again, when it last answered, and whether it had a
// leader then.
type knownSeen struct {
	probe   knownProbe
	at      time.Time
	healthy bool
	// hold, when set, is how long the name stays after at instead of
	// the recovery grace (a summary rewrite: heldFor).
	hold time.Duration
}

func (m *Member) heldLock() (coord.Lock, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lock == nil {
		return nil, coord.ErrLockLost
	}
	select {
	case <-m.lock.Lost():
		return nil, coord.ErrLockLost
	default:
	}
	return m.lock, nil
}

// initialCluster renders name=peerURL pairs; extra holds other members.
func (m *Member) initialCluster(self string, extra map[string][]string) string {
	parts := []string{self + "=" + m.peerURL(m.self)}
	for n, urls := range extra {
		for _, u := range urls {
			parts = append(parts, n+"="+u)
		}
	}
	return strings.Join(parts, ",")
}
