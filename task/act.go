package task

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/client/pkg/v3/types"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/task/etcdproc"
)

// act carries out d.
func (m *Member) act(ctx context.Context, o planner.Observation, d planner.Decision) error {
	switch d.Kind {
	case planner.Seed, planner.JoinAsLearner, planner.ResumeJoin, planner.RecoverQuorum:
		// While a start is in progress its metadata may exist before
		// etcd's data: /status names the incarnation meanwhile, so that
		// peers see this member's seed (see health).
		m.mu.Lock()
		m.starting = true
		m.mu.Unlock()
		defer func() {
			m.mu.Lock()
			m.starting = false
			m.mu.Unlock()
		}()
	}
	switch d.Kind {
	case planner.Wait:
		return nil
	case planner.Seed:
		return m.seed(ctx, d)
	case planner.Rejoin:
		// The data is compared with the peers' only where a quorum
		// runs without this member: in a whole-cluster restart the
		// first members up would compare with a minority.
		if o.MembersKnown {
			why, err := m.checkBeforeStart(ctx)
			if err != nil {
				m.log.Warn("cannot compare this member's data with its peers' before starting; starting", "error", err)
			}
			if why != "" {
				m.startCorrupt = why
				return fmt.Errorf("not starting: data found corrupt: %s", why)
			}
		}
		return m.start(d.Name, "", "existing", m.initialCluster(d.Name, nil))
	case planner.JoinAsLearner:
		return m.joinAsLearner(ctx, o, d)
	case planner.ResumeJoin:
		return m.resumeJoin(ctx, o, d)
	case planner.Promote:
		return m.promote(ctx, d)
	case planner.RemoveMember:
		m.backups.BeforeChange(o, "before removing a member")
		if o.LeaderID == d.MemberID && d.MemberID != o.SelfID {
			m.takeLeadershipFrom(ctx, o, d.MemberID)
		}
		return m.removeMember(ctx, o, d)
	case planner.SetAside:
		return m.setAside(d)
	case planner.RecordCluster:
		return m.recordCluster(ctx, d)
	case planner.RecoverQuorum:
		return m.recover(ctx, o, d)
	case planner.UpdatePeerURL:
		return m.updatePeerURL(ctx, d)
	case planner.ReclaimSpace:
		return m.reclaimSpace(ctx, o, d)
	case planner.DisarmCorrupt:
		return m.disarmCorrupt(ctx, d)
	case planner.ReplaceInstance:
		r, ok := m.opts.Provider.(provider.Replacer)
		if !ok {
			return fmt.Errorf("provider cannot replace instances")
		}
		if _, err := m.heldLock(); err != nil {
			return err
		}
		// The observation may rest on a cached reading of the group
		// (asg: up to 10 s old): read it afresh before asking for a
		// replacement, so a launch that began meanwhile holds it back.
		if inv, ok := r.(provider.Invalidator); ok {
			inv.Invalidate()
		}
		if inFlight, err := r.ReplacementInFlight(ctx); err != nil {
			return fmt.Errorf("replacement state before replacing %s: %w", d.Instance, err)
		} else if inFlight {
			m.log.Info("replacement held back: another one is in flight (fresh reading)", "instance", d.Instance)
			return nil
		}
		if err := r.MarkUnhealthy(ctx, d.Instance); err != nil {
			return err
		}
		m.log.Warn("asked the provider to replace an instance", "instance", d.Instance, "reason", d.Reason)
		return nil
	}
	return fmt.Errorf("unknown decision %q", d.Kind)
}

func (m *Member) seed(ctx context.Context, d planner.Decision) (err error) {
	l, err := m.heldLock()
	if err != nil {
		return err
	}
	rec := d.Record
	m.mu.Lock()
	existing := m.record
	m.mu.Unlock()
	// The metadata comes first: while this act runs, /status names the
	// incarnation it writes (health), so from the moment the record
	// exists peers see the seed. Written after the record, a peer that
	// observed between the two, after Consul lost its state, saw no
	// record and no data here and seeded a second epoch 1; a restore of
	// Consul's older state then let this seed start too (sim seed 30200).
	// A seed that fails below removes it again (it names nothing once
	// the act is over anyway: no etcd data).
	if err := m.dir.WriteMeta(datadir.Meta{Cluster: m.opts.Cluster.Name, Name: d.Name, Token: rec.Token, Epoch: rec.Epoch}); err != nil {
		return fmt.Errorf("write metadata: %w", err)
	}
	defer func() {
		if err != nil {
			m.dir.DropMetaWithoutData()
		}
	}()
	if existing == nil {
		// The create-only write is the commit point of the seed: a second
		// seeder fails here and joins instead (invariant 1).
		created, err := m.opts.Coordinator.CreateRecord(ctx, l, *rec)
		if err != nil {
			return fmt.Errorf("create cluster record: %w", err)
		}
		m.log.Info("cluster record created", "token", rec.Token[:8], "epoch", created.Epoch, "fence", l.Fence())
	} else if existing.ClusterID == 0 && existing.Source == "" && existing.Seeder != d.Name && rec.Epoch == max(existing.Epoch, existing.HighestEpoch)+1 {
		// Taking over the empty seed of a seeder gone for good
		// (planner.takeoverSeed): the next epoch replaces its record,
		// compare-and-set on the record read, so a second taker fails.
		written, err := m.opts.Coordinator.UpdateRecord(ctx, l, writeBack(*existing, *rec))
		if err != nil {
			return fmt.Errorf("take over the seed of %s: %w", existing.Seeder, err)
		}
		m.setRecord(written)
		m.log.Warn("took over the unconfirmed seed of a seeder gone for good", "gone", existing.Seeder, "epoch", rec.Epoch, "fence", l.Fence())
	} else if existing.Token != rec.Token || existing.Seeder != d.Name {
		return fmt.Errorf("record changed before the seed resumed: %w", coord.ErrConflict)
	}
	// Consul may have lost its state since the record was created (and
	// another member seeded in the gap): start only while the record still
	// names this seed. (A race between this read and the start remains,
	// much narrower; the record's confirmation then settles it.)
	if _, err := m.heldLock(); err != nil {
		return err
	}
	cur, err := m.opts.Coordinator.Record(ctx)
	if err != nil || cur.Token != rec.Token {
		return fmt.Errorf("the record no longer names this seed (%v): not starting it: %w", err, coord.ErrConflict)
	}
	// The seeder keeps the record it started under: if Nomad collects
	// it before its next observation succeeds (that observation fails on
	// the provider), publishSummaryUnobserved still beats its summary for
	// this seed, which names it to peers that a partition hides it from
	// (sim seed 13315 with CollectRunning: they took the seed over as a
	// second cluster beside it).
	m.setRecord(cur)
	return m.start(d.Name, rec.Token, "new", m.initialCluster(d.Name, nil))
}

// membershipChangeTimeout bounds one membership change (with the checks
// that go with it).
const membershipChangeTimeout = 5 * time.Second

// changeMembership makes one membership change: only while this member
// holds the lock (invariants 2 and 3), through a client of endpoints,
// within membershipChangeTimeout; a change that succeeds is counted.
func (m *Member) changeMembership(ctx context.Context, endpoints []string, change func(context.Context, *clientv3.Client) error) error {
	if _, err := m.heldLock(); err != nil {
		return err
	}
	cli, err := m.etcdClient(endpoints)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, membershipChangeTimeout)
	defer cancel()
	if err := change(cctx, cli); err != nil {
		return err
	}
	m.metrics.membershipChanges.Inc()
	return nil
}

func (m *Member) joinAsLearner(ctx context.Context, o planner.Observation, d planner.Decision) error {
	var resp *clientv3.MemberAddResponse
	err := m.changeMembership(ctx, m.clientEndpoints(), func(actx context.Context, cli *clientv3.Client) error {
		// Join only the recorded cluster (invariant 5): the endpoints are the
		// provider's instances, and any of them may serve another cluster (a
		// recovery or restore in progress). Check before the add, and check
		// the add's own answer.
		want := o.Record.ClusterID
		if want == 0 {
			return fmt.Errorf("join refused: the record names no confirmed cluster id yet")
		}
		if lr, err := cli.MemberList(actx); err != nil {
			return fmt.Errorf("member list before adding a learner: %w", err)
		} else if lr.Header.ClusterId != want {
			return fmt.Errorf("join refused: the endpoint that answered serves cluster %x, the record names %x", lr.Header.ClusterId, want)
		}
		var err error
		resp, err = cli.MemberAddAsLearner(actx, []string{m.peerURL(m.self)})
		if err != nil {
			return fmt.Errorf("add learner: %w", err)
		}
		if resp.Header.ClusterId != want {
			// Added to the wrong cluster after all: undo it there, never
			// start under it.
			m.metrics.membershipChanges.Inc() // the add, undone here
			_, rerr := cli.MemberRemove(actx, resp.Member.ID)
			return fmt.Errorf("join refused: added as learner %x to cluster %x, but the record names %x (undo: %v)", resp.Member.ID, resp.Header.ClusterId, want, rerr)
		}
		return nil
	})
	if err != nil {
		return err
	}
	m.log.Info("added as learner", "member_id", types.ID(resp.Member.ID).String())
	others := map[string][]string{}
	for _, pm := range resp.Members {
		if pm.ID != resp.Member.ID && pm.Name != "" {
			others[pm.Name] = pm.PeerURLs
		}
	}
	return m.startJoined(d, o.Record, resp.Member.ID, others)
}

func (m *Member) resumeJoin(ctx context.Context, o planner.Observation, d planner.Decision) error {
	others := map[string][]string{}
	for _, pm := range o.Members {
		if pm.ID != d.MemberID && pm.Name != "" {
			others[pm.Name] = pm.PeerURLs
		}
	}
	return m.startJoined(d, o.Record, d.MemberID, others)
}

func (m *Member) startJoined(d planner.Decision, rec *planner.Record, id uint64, others map[string][]string) error {
	if err := m.dir.WriteMeta(datadir.Meta{Cluster: m.opts.Cluster.Name, Name: d.Name, Token: rec.Token, Epoch: rec.Epoch, MemberID: id, ClusterID: rec.ClusterID}); err != nil {
		return fmt.Errorf("write metadata: %w", err)
	}
	return m.start(d.Name, rec.Token, "existing", m.initialCluster(d.Name, others))
}

// clientEndpoints lists the instances' client URLs; self is included
// only when its etcd runs.
func (m *Member) clientEndpoints() []string { return m.clientEndpointsExcept("") }

// clientEndpointsExcept is clientEndpoints without the instance named
// except (unless it is the only one): a removal is sent to the members
// that stay, so that the removed member, which may answer for itself and
// stop, neither loses the answer nor refuses with its stale view.
func (m *Member) clientEndpointsExcept(except string) []string {
	m.mu.Lock()
	running := m.proc.Server() != nil
	m.mu.Unlock()
	var eps, skipped []string
	insts, _ := m.opts.Provider.Instances(context.Background())
	for _, in := range insts {
		if in.ClientPort == 0 {
			continue // an Unknown instance without its ports
		}
		if in.Name == except {
			skipped = append(skipped, m.clientURL(in))
			continue
		}
		if in.Name != m.opts.Name || running {
			eps = append(eps, m.clientURL(in))
		}
	}
	if len(eps) == 0 {
		eps = skipped
	}
	// Migrating an outside cluster in: its members take membership
	// changes too (the first joiner has no other way in).
	return append(eps, m.joinEndpoints()...)
}

func (m *Member) promote(ctx context.Context, d planner.Decision) error {
	err := m.changeMembership(ctx, m.clientEndpoints(), func(ctx context.Context, cli *clientv3.Client) error {
		if _, err := cli.MemberPromote(ctx, d.MemberID); err != nil {
			return fmt.Errorf("promote %x (etcd promotes only a learner in sync with the leader): %w", d.MemberID, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	m.log.Info("promoted to voter", "member_id", types.ID(d.MemberID).String())
	return nil
}

func (m *Member) removeMember(ctx context.Context, o planner.Observation, d planner.Decision) error {
	removed := ""
	if i := findMember(o.Members, d.MemberID); i >= 0 {
		removed = o.Members[i].Name
	}
	err := m.changeMembership(ctx, m.clientEndpointsExcept(removed), func(ctx context.Context, cli *clientv3.Client) error {
		if _, err := cli.MemberRemove(ctx, d.MemberID); err != nil {
			return fmt.Errorf("remove member %x: %w", d.MemberID, err)
		}
		return nil
	})
	if errors.Is(err, rpctypes.ErrMemberNotFound) {
		// An earlier try was applied but its answer lost (the removed
		// member answered for itself and stopped): the member is gone,
		// which is what the decision asked for.
		m.log.Info("member already removed", "member_id", types.ID(d.MemberID).String(), "reason", d.Reason)
		return nil
	}
	if err != nil {
		return err
	}
	m.log.Info("removed member", "member_id", types.ID(d.MemberID).String(), "reason", d.Reason)
	return nil
}

// takeLeadershipFrom moves leadership from a stale leader about to be
// removed (the leader is removed last, invariant 3) to this member, a
// healthy voter. Without it the cluster waits out an election timeout once
// the removed leader steps down or, as a plain etcd 3.5 member being
// migrated in does, simply stops; clients see writes refused meanwhile.
// MoveLeader must be sent to the leader itself, through its client URLs.
// A failure is logged and the removal goes ahead: it is safe either way.
func (m *Member) takeLeadershipFrom(ctx context.Context, o planner.Observation, leader uint64) {
	self := findMember(o.Members, o.SelfID)
	if self < 0 || o.Members[self].Learner || !o.Members[self].Healthy {
		return
	}
	cli, err := m.etcdClient(m.clientEndpoints())
	if err != nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	resp, err := cli.MemberList(lctx)
	cancel()
	if err != nil {
		m.log.Warn("leadership transfer before removing the leader: member list failed", "error", err)
		return
	}
	var urls []string
	for _, mem := range resp.Members {
		if mem.ID == leader {
			urls = mem.ClientURLs
		}
	}
	if len(urls) == 0 {
		return
	}
	lc, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: rpcTimeout, TLS: m.trust.PeerTLS(), Logger: zap.NewNop()})
	if err != nil {
		return
	}
	defer lc.Close()
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := lc.MoveLeader(mctx, o.SelfID); err != nil {
		m.log.Warn("leadership transfer before removing the leader failed; removing it anyway", "leader", types.ID(leader).String(), "error", err)
		return
	}
	m.log.Info("took leadership over before removing the leader", "leader", types.ID(leader).String())
}

func (m *Member) setAside(d planner.Decision) error {
	m.stopEtcd()
	why := d.Aside
	if why == "" {
		why = planner.AsideForeign
	}
	dst, err := m.dir.SetAside(time.Now(), string(why))
	if err != nil {
		return err
	}
	m.startCorrupt = ""
	m.log.Warn("data dir set aside (not deleted)", "to", dst, "reason", d.Reason)
	return nil
}

func (m *Member) recordCluster(ctx context.Context, d planner.Decision) error {
	l, err := m.heldLock()
	if err != nil {
		return err
	}
	m.mu.Lock()
	cur := m.record
	m.mu.Unlock()
	// A confirmed record carries no recovery's bookkeeping.
	rec := *d.Record
	rec.LastConfirmedToken, rec.LastConfirmedEpoch, rec.Operator = "", 0, false
	if cur == nil {
		_, err = m.opts.Coordinator.CreateRecord(ctx, l, rec)
	} else {
		_, err = m.opts.Coordinator.UpdateRecord(ctx, l, writeBack(*cur, rec))
	}
	if err != nil {
		return fmt.Errorf("write cluster record: %w", err)
	}
	m.log.Info("cluster record written", "cluster_id", types.ID(rec.ClusterID).String(), "epoch", rec.Epoch)
	return nil
}

// start launches embedded etcd. token is empty when restarting from data.
func (m *Member) start(name, token, state, initial string) error {
	c := m.opts.Cluster
	cfg := embed.NewConfig()
	cfg.Name = name
	cfg.Dir = m.dir.EtcdDir()
	peer, _ := url.Parse(m.peerURL(m.self))
	client, _ := url.Parse(m.clientURL(m.self))
	listenClient := *client
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.ListenClientUrls = []url.URL{listenClient}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.InitialCluster = initial
	cfg.ClusterState = state
	if token != "" {
		cfg.InitialClusterToken = token
	} else if meta, err := m.dir.ReadMeta(); err == nil {
		cfg.InitialClusterToken = meta.Token
		if meta.ForceNew {
			if m.forceNewAllowed(meta) {
				cfg.ForceNewCluster = true
				m.log.Warn("starting with ForceNewCluster: this member's data seeds the next epoch alone")
			} else {
				// A flag that outlived its recovery (the record is
				// confirmed, or names another incarnation) must not
				// fork this member off its cluster: drop it, and name
				// the data's own incarnation again if the recovery
				// never started.
				meta.DropForceNew()
				if err := m.dir.WriteMeta(meta); err != nil {
					return fmt.Errorf("clear a stale ForceNew flag: %w", err)
				}
				cfg.InitialClusterToken = meta.Token
				m.log.Warn("ForceNewCluster refused: the record no longer names this member's unconfirmed recovery; starting normally", "token", meta.Token, "epoch", meta.Epoch)
			}
		}
	}
	cfg.QuotaBackendBytes = c.Etcd.QuotaBackendBytes
	// A key-less lease is anyone's who knows its id: the ids etcd chooses
	// are guessable, and LeaseLeases lists them (etcdproc/leaseid.go).
	// The single (not chained) interceptors run before etcd's own chain,
	// whose learner check races a removal too.
	cfg.GRPCAdditionalServerOptions = []grpc.ServerOption{
		grpc.UnaryInterceptor(etcdproc.RemovedMemberPanic),
		grpc.StreamInterceptor(etcdproc.RemovedMemberStreamPanic),
		grpc.ChainUnaryInterceptor(etcdproc.RandomLeaseID, etcdproc.RootLeaseList),
	}
	cfg.AutoCompactionMode = c.Etcd.AutoCompactionMode
	cfg.AutoCompactionRetention = c.Etcd.AutoCompactionRetention
	cfg.TickMs = uint(c.Etcd.HeartbeatInterval / time.Millisecond)
	cfg.ElectionMs = uint(c.Etcd.ElectionTimeout / time.Millisecond)
	cfg.SnapshotCount = c.Etcd.SnapshotCount
	cfg.LogLevel = m.opts.EtcdLogLevel
	cfg.LogOutputs = []string{"stderr"}
	if m.trust.Scheme() == "https" {
		ti := transport.TLSInfo{CertFile: m.trust.Files().Cert, KeyFile: m.trust.Files().Key, TrustedCAFile: m.trust.Files().CA, ClientCertAuth: true}
		cfg.ClientTLSInfo = ti
		cfg.PeerTLSInfo = ti
		if m.trust.CA() != nil {
			// TLS auto: the peer port trusts the peer CA alone (its
			// file holds the peer CAs, certs.PeerCACert), never the
			// cluster CA, which issues every client certificate:
			// applications', the exchange's, `env`'s root. Only members
			// derive the peer CA. A member dials its peers with the
			// same trust and certificate, and both sides also require
			// the peer certificates' CN (certs/peer.go).
			pf := m.trust.PeerFiles()
			cfg.PeerTLSInfo = transport.TLSInfo{CertFile: pf.Cert, KeyFile: pf.Key, TrustedCAFile: pf.CA, ClientCertAuth: true, AllowedCNs: []string{certs.PeerCN}}
		}
	}
	if err := etcdproc.EnableCorruptChecks(cfg, c.Etcd.CorruptCheckInterval); err != nil {
		return err
	}
	// A copy of this directory taken from now on, while etcd runs, must
	// not look cleanly stopped, and names this host (adoptPrevious).
	if err := m.dir.MarkStarted(m.self.Address); err != nil {
		return fmt.Errorf("clear the clean-stop mark before starting etcd: %w", err)
	}
	m.log.Info("starting etcd", "state", state, "initial_cluster", initial)
	e, err := m.proc.Start(cfg)
	if err != nil {
		return err
	}
	m.startCorrupt = ""
	go m.afterReady(e)
	return nil
}

// afterReady completes the metadata once the server has joined; a failed
// write is tried again at each loop (retryMeta).
func (m *Member) afterReady(e *embed.Etcd) {
	select {
	case <-e.Server.ReadyNotify():
	case <-e.Server.StopNotify():
		return
	}
	if err := m.completeMeta(e); err != nil {
		m.log.Warn("write the member and cluster ids into the data dir's metadata (tried again at each loop; until then no snapshot is saved)", "error", err)
	}
}

// retryMeta completes the metadata of the running server if afterReady
// could not. Without the cluster id in it the record is never confirmed
// from this member's data and every snapshot is refused ("not confirmed
// yet", snapshotSource): written once and never again, one failed write
// stopped backups for good. Each new failure is logged once.
func (m *Member) retryMeta() {
	m.mu.Lock()
	e := m.proc.Server()
	done := m.metaCompletedFor == e
	m.mu.Unlock()
	if e == nil || done {
		return
	}
	select {
	case <-e.Server.ReadyNotify():
	default:
		return // afterReady writes it
	}
	err := m.completeMeta(e)
	switch {
	case err == nil:
		m.metaErrLogged = ""
	case err.Error() != m.metaErrLogged:
		m.metaErrLogged = err.Error()
		m.log.Warn("write the member and cluster ids into the data dir's metadata (tried again at each loop; until then no snapshot is saved)", "error", err)
	}
}

// completeMeta writes the ready server e's member and cluster ids into the
// data dir's metadata, once per server.
func (m *Member) completeMeta(e *embed.Etcd) error {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	if m.proc.Server() != e {
		return nil // stopped meanwhile (stopEtcd): its metadata is no longer this server's to complete
	}
	m.mu.Lock()
	done := m.metaCompletedFor == e
	m.mu.Unlock()
	if done {
		return nil
	}
	meta, err := m.dir.ReadMeta()
	if err != nil {
		return fmt.Errorf("read metadata: %w", err)
	}
	meta.MemberID = uint64(e.Server.MemberID())
	meta.ClusterID = uint64(e.Server.Cluster().ID())
	meta.ForceNew, meta.SourceToken, meta.SourceEpoch, meta.SourceClusterID = false, "", 0, 0
	if err := m.dir.WriteMeta(meta); err != nil {
		return fmt.Errorf("write metadata: %w", err)
	}
	m.mu.Lock()
	m.metaCompletedFor = e
	m.mu.Unlock()
	m.log.Info("etcd ready", "member_id", e.Server.MemberID().String(), "cluster_id", e.Server.Cluster().ID().String())
	return nil
}

// stopEtcd stops the running etcd (etcdproc.Process.Stop).
//
// It holds metaMu while it stops, so that a completeMeta of this server
// (afterReady runs it on its own goroutine) either finished before or
// sees the server gone and writes nothing: a late one rewrote the
// metadata after the server had stopped, over what the next step wrote
// there (a recovery's ForceNew rewrite lost its flag; CI run
// 20261128T012620Z: two writers renamed the same temporary file, task
// TestStartedForceNewWithoutItsRecordNeverRunsAsItsSource).
func (m *Member) stopEtcd() {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	m.proc.Stop()
}

// reapStopped forgets an etcd that stopped on its own (removed from the
// cluster, fatal error): the next loop observes the data dir afresh.
func (m *Member) reapStopped() {
	m.stopEtcd()
}

// memberClientURL guesses a member's client URL from its peer URL via the
// provider's instances (same address, the instance's client port).
func (m *Member) memberClientURL(mem planner.Member) string {
	insts, _ := m.opts.Provider.Instances(context.Background())
	for _, in := range insts {
		for _, u := range mem.PeerURLs {
			if u == m.peerURL(in) {
				return m.clientURL(in)
			}
		}
	}
	return ""
}

// updatePeerURL tells the cluster this member's new peer URL (its data was
// adopted from a previous allocation with other ports).
func (m *Member) updatePeerURL(ctx context.Context, d planner.Decision) error {
	// Through the endpoints whose member list named the old URL: this
	// server's own, or the others' when its own membership is stale too
	// (observeMembers).
	m.mu.Lock()
	endpoints := m.known.membersFrom
	m.mu.Unlock()
	if len(endpoints) == 0 {
		endpoints = []string{m.clientURL(m.self)}
	}
	err := m.changeMembership(ctx, endpoints, func(ctx context.Context, cli *clientv3.Client) error {
		if _, err := cli.MemberUpdate(ctx, d.MemberID, []string{m.peerURL(m.self)}); err != nil {
			return fmt.Errorf("update peer URL of %x: %w", d.MemberID, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	m.log.Info("peer URL updated", "member_id", types.ID(d.MemberID).String(), "peer_url", m.peerURL(m.self))
	return nil
}
