package task

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/status"
	"github.com/etcd-nomad/etcd-nomad/task/etcdproc"
)

// observe gathers one Observation. Unreachable peers and an unreachable
// cluster are facts, not errors; only the provider and the coordinator
// failing make the observation unusable.
func (m *Member) observe(ctx context.Context) (planner.Observation, error) {
	return m.observeFrom(ctx, m.opts.Coordinator)
}

// idleReads is where the loop's first observation reads the record and the
// pause: the watched copy (Options.Reads) while this member holds no lock,
// the coordinator itself otherwise. The loop observes again from the
// coordinator before any decision that acts. watched tells which.
func (m *Member) idleReads() (r Reads, watched bool) {
	m.mu.Lock()
	holds := m.lock != nil
	m.mu.Unlock()
	if m.opts.Reads == nil || holds {
		return m.opts.Coordinator, false
	}
	return m.opts.Reads, true
}

// caReads is where the CA check reads (and, when nothing is stored, offers)
// the cluster CA: the watched copy when there is one.
func (m *Member) caReads() Reads {
	if m.opts.Reads != nil {
		return m.opts.Reads
	}
	return m.opts.Coordinator
}

// providerTimeout bounds the provider's calls in one observation (Nomad's
// or AWS's API): a call that never answers makes the observation fail,
// logged, rather than hold the loop (and with it every decision, a
// departure included) for good.
const providerTimeout = 15 * time.Second

// observeFrom is observe reading the record and the pause from reads.
func (m *Member) observeFrom(ctx context.Context, reads Reads) (planner.Observation, error) {
	now := m.opts.Clock.Now()
	pctx, pcancel := context.WithTimeout(ctx, providerTimeout)
	defer pcancel()
	insts, err := m.opts.Provider.Instances(pctx)
	if err != nil {
		return planner.Observation{}, fmt.Errorf("list instances: %w", err)
	}
	size, err := m.opts.Provider.DesiredSize(pctx)
	if err != nil {
		return planner.Observation{}, fmt.Errorf("desired size: %w", err)
	}
	m.mu.Lock()
	e := m.proc.Server()
	holds := m.lock != nil
	m.mu.Unlock()
	running := e != nil
	var selfID uint64
	if _, err := m.dir.EtcdData(); err != nil && !running {
		// Whether this stopped member holds data is unknown: neither
		// empty (it would join or seed as one) nor unusable (set aside)
		// for what may be a passing read error; the loop skips until
		// it reads (review rev19f 4).
		return planner.Observation{}, fmt.Errorf("data dir: %w", err)
	}
	local := m.dir.Observe(running)
	if running {
		selfID = uint64(e.Server.MemberID())
		// The backend is etcd's while it runs: its revision comes from
		// the server, as peers report theirs through /status. Without
		// it, two survivors would each defer recovery to the other.
		local.Revision = e.Server.KV().Rev()
		local.Learner, _ = etcdproc.SelfRole(e.Server)
	}
	c := m.opts.Cluster
	o := planner.Observation{
		ClusterName:   m.opts.Cluster.Name,
		Self:          planner.Self{Name: m.opts.Name, PeerURL: m.peerURL(m.self), ClientURL: m.clientURL(m.self)},
		DesiredSize:   size,
		Running:       running,
		SelfID:        selfID,
		Local:         local,
		HoldsLock:     holds,
		StaleAfter:    m.opts.Cluster.Provider.StaleAfter,
		NewToken:      coord.NewToken(),
		StartFailures: m.proc.Failures(),
		NoSpace:       running && etcdproc.NoSpace(e),
		Quota:         c.Etcd.QuotaBackendBytes,
		DefragRatio:   c.Etcd.DefragRatio,
		DefragMinSize: c.Etcd.DefragMinSize,
	}
	m.observeCorrupt(e, &o)
	if m.reclaimFailed != "" && now.Sub(m.reclaimFailedAt) < reclaimBackoff {
		o.ReclaimFailed = m.reclaimFailed
	}
	rec, err := reads.Record(ctx)
	switch {
	case err == nil:
		view := rec
		o.Record = &view
		m.mu.Lock()
		m.record = &rec
		m.mu.Unlock()
	case errors.Is(err, coord.ErrNoRecord):
		m.mu.Lock()
		m.record = nil
		m.mu.Unlock()
	default:
		return planner.Observation{}, fmt.Errorf("read cluster record: %w", err)
	}
	if p, err := reads.Pause(ctx); err == nil {
		o.Paused = p.String()
	} else if !errors.Is(err, coord.ErrNotPaused) {
		// Unknown is not "not paused": an operator's pause must hold
		// while its flag cannot be read.
		return planner.Observation{}, fmt.Errorf("read pause: %w", err)
	}
	m.mu.Lock()
	m.status.Paused = o.Paused
	m.mu.Unlock()
	selfListed := false
	m.known.listed = map[string]bool{}
	for _, in := range insts {
		o.Instances = append(o.Instances, planner.Instance{Name: in.Name, PeerURL: m.peerURL(in)})
		selfListed = selfListed || in.Name == m.opts.Name
		m.known.listed[in.Name] = true
		if in.ClientPort != 0 {
			m.known.listed[m.clientURL(in)] = true
		}
	}
	if !selfListed && m.opts.Self != nil {
		// The provider's list may lag behind this allocation's start.
		o.Instances = append(o.Instances, planner.Instance{Name: m.opts.Name, PeerURL: m.peerURL(m.self)})
	}
	if r, ok := m.opts.Provider.(provider.Replacer); ok && m.opts.Cluster.Provider.ReplaceAfter > 0 {
		rctx, rcancel := context.WithTimeout(ctx, providerTimeout)
		inFlight, err := r.ReplacementInFlight(rctx)
		rcancel()
		if err != nil {
			return planner.Observation{}, fmt.Errorf("replacement state: %w", err)
		}
		o.ReplaceAfter, o.ReplacementInFlight = m.opts.Cluster.Provider.ReplaceAfter, inFlight
	}
	o.Peers, o.Unreachable = m.peerStatuses(ctx, insts)
	m.rememberListedVoters(&o, now)
	m.rememberListedHolders(&o, now)
	m.observeMembers(ctx, insts, &o, now)
	m.observeQuorumLoss(ctx, &o, now)
	return o, nil
}

// peerStatuses asks every other instance's /status, concurrently.
func (m *Member) peerStatuses(ctx context.Context, insts []provider.Instance) ([]planner.PeerStatus, int) {
	var (
		wg          sync.WaitGroup
		mu          sync.Mutex
		out         []planner.PeerStatus
		unreachable int
		damaged     []string
		found       []status.FoundVoter
		held        []status.Holder
	)
	var voters []listedVoter
	var holders []listedHolder
	var empty []string
	hc := m.httpClient()
	for _, in := range insts {
		if in.Name == m.opts.Name {
			continue
		}
		wg.Add(1)
		go func(in provider.Instance) {
			defer wg.Done()
			st, err := status.Fetch(ctx, hc, m.statusURL(in))
			mu.Lock()
			defer mu.Unlock()
			if err == nil && st.MetaError != "" {
				// Its metadata unreadable for the moment: its Token says
				// nothing (not "no data"), so it counts as silent (review
				// rev19b F).
				err = fmt.Errorf("metadata unreadable: %s", st.MetaError)
			}
			if err != nil {
				unreachable++
				return
			}
			metaEpoch := st.MetaEpoch
			if st.Cluster != "" && st.Cluster != m.opts.Cluster.Name {
				// Another cluster's member at a stale address (a CA
				// shared by clusters): its metadata names no record of
				// this one (review rev19d W1).
				metaEpoch = 0
			}
			out = append(out, planner.PeerStatus{Name: st.Name, MemberID: st.MemberID, Token: st.Token, Epoch: st.Epoch, Running: st.Running, Learner: st.Learner, Healthy: st.Healthy, Revision: st.Revision, ClusterID: st.ClusterID, ForceNewPending: st.ForceNewPending, Unstarted: st.Unstarted, MetaEpoch: metaEpoch})
			if st.Running && st.Healthy && !st.Learner && st.ClusterID != 0 && in.ClientPort != 0 {
				voters = append(voters, listedVoter{name: in.Name, clientURL: m.clientURL(in), clusterID: st.ClusterID, token: st.Token})
			}
			switch {
			case st.Token == "":
				empty = append(empty, in.Name)
			case st.ClusterID != 0 && in.ClientPort != 0:
				holders = append(holders, listedHolder{name: in.Name, clientURL: m.clientURL(in), clusterID: st.ClusterID, token: st.Token, epoch: st.Epoch})
			}
			damaged = append(damaged, st.DamagedDeltas[:min(len(st.DamagedDeltas), maxDamagedShared)]...)
			found = append(found, st.FoundVoters[:min(len(st.FoundVoters), maxFoundShared)]...)
			held = append(held, peerHolders(st.Holders)...)
		}(in)
	}
	wg.Wait()
	m.takeDamaged(damaged)
	m.takeFoundVoters(found, m.opts.Clock.Now())
	slices.SortFunc(voters, func(a, b listedVoter) int { return strings.Compare(a.name, b.name) })
	m.known.listedVoters = voters
	slices.SortFunc(holders, func(a, b listedHolder) int { return strings.Compare(a.name, b.name) })
	m.known.listedHolders, m.known.listedEmpty, m.known.peersHolders = holders, empty, held
	return out, unreachable
}

// httpClient is the member's one client for peers' /status
// (trust.Trust.HTTPClient).
func (m *Member) httpClient() *http.Client { return m.trust.HTTPClient() }

// etcdClient returns a client on the given endpoints, reusing one client.
func (m *Member) etcdClient(endpoints []string) (*clientv3.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.client != nil {
		m.client.SetEndpoints(endpoints...)
		return m.client, nil
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          rpcTimeout,
		TLS:                  m.trust.PeerTLS(),
		Logger:               zap.NewNop(),
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	m.client = c
	return c, nil
}

// observeMembers reads the member list (linearizable: it proves quorum)
// and each member's presence and health.
func (m *Member) observeMembers(ctx context.Context, insts []provider.Instance, o *planner.Observation, now time.Time) {
	m.mu.Lock()
	m.known.membersFrom = nil
	m.mu.Unlock()
	endpoints, ownCluster := m.memberListEndpoints(insts, o)
	anyPeer := false
	for _, p := range o.Peers {
		anyPeer = anyPeer || p.Running
	}
	if !o.Running && !anyPeer && len(m.joinEndpoints()) == 0 {
		// Nothing runs etcd: asking would only wait for the dial timeout.
		return
	}
	var cli *clientv3.Client
	var resp *clientv3.MemberListResponse
	err := errors.New("no endpoint to ask")
	if len(endpoints) > 0 {
		cli, resp, err = m.memberList(ctx, endpoints)
	}
	if err != nil && o.Running && !slices.Contains(endpoints, m.clientURL(m.self)) {
		// A moved member whose peers cannot answer either (it runs
		// alone: a recovery from its data, which keeps the old peer URL
		// in the membership) asks its own server after all.
		endpoints = []string{m.clientURL(m.self)}
		cli, resp, err = m.memberList(ctx, endpoints)
	}
	if err != nil {
		m.log.Debug("member list unavailable", "error", err)
		return
	}
	if ownCluster != 0 && resp.Header.ClusterId != ownCluster {
		m.log.Debug("member list from another cluster ignored", "cluster_id", resp.Header.ClusterId, "own", ownCluster)
		return
	}
	if ownCluster == 0 && o.Record != nil && o.Record.ClusterID != 0 && resp.Header.ClusterId != o.Record.ClusterID {
		m.log.Debug("member list from another cluster ignored", "cluster_id", resp.Header.ClusterId, "record", o.Record.ClusterID)
		return
	}
	o.MembersKnown = true
	o.MembersClusterID = resp.Header.ClusterId
	m.mu.Lock()
	m.known.membersFrom = endpoints
	m.mu.Unlock()
	present := m.presence(insts, o)
	o.Members = make([]planner.Member, len(resp.Members))
	seen := map[uint64]bool{}
	for i, pm := range resp.Members {
		seen[pm.ID] = true
		o.Members[i] = planner.Member{ID: pm.ID, Name: pm.Name, PeerURLs: pm.PeerURLs, ClientURLs: pm.ClientURLs, Learner: pm.IsLearner,
			AbsentFor: m.heldSince.hold(condition{condAbsent, pm.ID}, !present(pm.Name, pm.PeerURLs), now)}
	}
	m.probeHealth(ctx, cli, resp.Members, o)
	for i, mem := range o.Members {
		o.Members[i].UnhealthyFor = m.heldSince.hold(condition{condUnhealthy, mem.ID}, !mem.Healthy, now)
	}
	m.heldSince.keepOnly(condAbsent, seen)
	m.heldSince.keepOnly(condUnhealthy, seen)
}

// memberList asks endpoints for the member list.
func (m *Member) memberList(ctx context.Context, endpoints []string) (*clientv3.Client, *clientv3.MemberListResponse, error) {
	cli, err := m.etcdClient(endpoints)
	if err != nil {
		return nil, nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	resp, err := cli.MemberList(lctx)
	return cli, resp, err
}

// memberListEndpoints says whom to ask for the member list. A running
// member asks its own server: other endpoints may serve another
// incarnation (a restore or recovery in progress). A stopped member asks
// the others and observeMembers checks the answer's cluster id. A learner
// cannot answer a linearizable member list, so it asks the others like a
// stopped member; every answer's cluster id is checked. So does a member
// whose own membership names another peer URL for it (its data came from
// a previous allocation at another address): until its peers learn the
// new URL it may never hear from the leader (when the leader moved too,
// each names the other's old address), so its own server cannot answer,
// and the update goes through the others (updatePeerURL uses the
// endpoints the member list came from). ownCluster is the running
// server's cluster id, 0 when none runs.
func (m *Member) memberListEndpoints(insts []provider.Instance, o *planner.Observation) (endpoints []string, ownCluster uint64) {
	learner, moved := false, false
	m.mu.Lock()
	e := m.proc.Server()
	m.mu.Unlock()
	if e != nil { // never call into etcd while holding m.mu
		ownCluster = uint64(e.Server.Cluster().ID())
		learner, _ = etcdproc.SelfRole(e.Server)
		if self := e.Server.Cluster().Member(e.Server.MemberID()); self != nil {
			moved = !slices.Contains(self.PeerURLs, m.peerURL(m.self))
		}
	}
	if o.Running && !learner && !moved {
		return []string{m.clientURL(m.self)}, ownCluster
	}
	for _, in := range insts {
		if in.Name != m.opts.Name && in.ClientPort != 0 {
			endpoints = append(endpoints, m.clientURL(in))
		}
	}
	// Migrating an outside cluster in: its members answer until this
	// member runs as a voter.
	return append(endpoints, m.joinEndpoints()...), ownCluster
}

// joinEndpoints are the client URLs of the outside cluster being migrated
// in (coord.Record.Join), from the last record read.
func (m *Member) joinEndpoints() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.record == nil {
		return nil
	}
	return m.record.Join
}

// presence returns whether a listed member (by name, or by peer URL for
// one not started yet) has an instance.
func (m *Member) presence(insts []provider.Instance, o *planner.Observation) func(name string, peerURLs []string) bool {
	names := map[string]bool{}
	peers := map[string]bool{}
	for _, in := range insts {
		names[in.Name] = true
		peers[m.peerURL(in)] = true
	}
	// A member runs under the name persisted in its data, which may differ
	// from its instance's name (data carried to a new allocation): what a
	// live instance reports counts as present too.
	for _, p := range o.Peers {
		names[p.Name] = true
	}
	if o.Running {
		names[o.Self.Name] = true
		if o.Local.Name != "" {
			names[o.Local.Name] = true
		}
	}
	return func(name string, peerURLs []string) bool {
		present := names[name]
		if name == "" {
			for _, u := range peerURLs {
				present = present || peers[u]
			}
		}
		return present
	}
}

// probeHealth asks every listed member with a client URL for its status,
// concurrently: one that answers is healthy, reports its database sizes,
// and the answer with the highest term names the leader.
func (m *Member) probeHealth(ctx context.Context, cli *clientv3.Client, listed []*etcdserverpb.Member, o *planner.Observation) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		term uint64
	)
	for i, pm := range listed {
		if len(pm.ClientURLs) == 0 {
			continue
		}
		wg.Add(1)
		go func(i int, ep string) {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, rpcTimeout)
			st, err := cli.Status(sctx, ep)
			cancel()
			if err != nil {
				return
			}
			mu.Lock()
			o.Members[i].Healthy = true
			o.Members[i].DBSize, o.Members[i].DBSizeInUse = st.DbSize, st.DbSizeInUse
			if st.RaftTerm >= term && st.Leader != 0 {
				term, o.LeaderID = st.RaftTerm, st.Leader
			}
			mu.Unlock()
		}(i, pm.ClientURLs[0])
	}
	wg.Wait()
}
