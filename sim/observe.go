package sim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// observe gathers n's Observation the way task/observe.go does, from the
// modeled parts: the provider's (possibly stale) list, peers' /status over
// the network, the member list when a quorum answers, the record.
func (w *World) observe(n *node) (planner.Observation, error) {
	if n.noNomad {
		return planner.Observation{}, errors.New("list instances: nomad unreachable")
	}
	w.nextID++
	return w.observeWith(n, w.instances(n), "tok"+itoa(int(w.nextID)))
}

// lookWhileLeaving is the observation a leaving member makes between lock
// attempts (task's leaveUnlocked): the provider's newest list (not a
// stale one: drawing one would change every later step of the run, which
// would hide whether the look itself mattered) and no new token (a
// leaving member never seeds).
func (w *World) lookWhileLeaving(n *node) (planner.Observation, error) {
	if n.noNomad {
		return planner.Observation{}, errors.New("list instances: nomad unreachable")
	}
	return w.observeWith(n, w.lists[len(w.lists)-1].nodes, "")
}

func (w *World) observeWith(n *node, insts []*node, token string) (planner.Observation, error) {
	o := planner.Observation{
		ClusterName:   clusterName,
		Self:          planner.Self{Name: n.name, PeerURL: n.peerURL},
		DesiredSize:   w.cfg.Size,
		Running:       n.etcd != nil,
		HoldsLock:     n.lockSession != 0,
		StaleAfter:    staleAfter,
		NewToken:      token,
		StartFailures: n.startFailures,
		SideJobs: planner.SideJobState{Summary: true, CA: true, CACheckDue: w.now-n.caChecked > 30*time.Second,
			Snapshots: true, SnapshotDue: w.now >= n.snapshotCheckAt},
	}
	o.Local = w.local(n)
	if n.etcd != nil {
		o.SelfID = n.etcd.memberID
	}
	if n.noConsul {
		return planner.Observation{}, errors.New("read cluster record: consul unreachable")
	}
	n.record, n.recIndex = nil, w.coord.index
	o.Paused = w.coord.pause
	if r := w.coord.record; r != nil {
		rc := *r
		o.Record = &rc
		rc2 := rc
		n.record = &rc2
	}
	self := false
	for _, in := range insts {
		o.Instances = append(o.Instances, planner.Instance{Name: in.name, PeerURL: in.peerURL})
		self = self || in == n
	}
	if !self {
		// The provider's list may lag behind this allocation's start.
		o.Instances = append(o.Instances, planner.Instance{Name: n.name, PeerURL: n.peerURL})
	}
	if !w.cfg.Defects.NoDamageShared {
		// task's takeDamaged: a peer's mark lasts while a peer names it;
		// n's own (found) stay.
		n.damaged = maps.Clone(n.found)
	}
	for _, in := range insts {
		if in == n {
			continue
		}
		if !reachable(n, in) {
			o.Unreachable++
			w.rememberListedHolder(n, in, nil, &o)
			continue
		}
		st := w.status(in)
		o.Peers = append(o.Peers, st)
		if !w.cfg.Defects.ForgetListedVoter {
			w.rememberListedVoter(n, in, st, &o)
		}
		w.rememberListedHolder(n, in, &st, &o)
		if !w.cfg.Defects.NoFoundVotersShared {
			w.takeFoundVoters(n, in, insts)
		}
		if !w.cfg.Defects.NoHoldersShared {
			w.takeSharedHolders(n, in, insts, &o)
		}
		if !w.cfg.Defects.NoDamageShared {
			// task's takeDamaged: the segments its /status names.
			for _, name := range slices.Sorted(maps.Keys(in.found)) {
				if n.damaged == nil {
					n.damaged = map[string]bool{}
				}
				n.damaged[name] = true
			}
		}
	}
	for name, e := range n.holders {
		// task's lapsed: a word's is kept while a peer names it.
		if w.now-e.at >= recoveryGrace && (!e.worded || !w.wordNames(n, insts, name)) {
			delete(n.holders, name)
		}
	}
	if !w.cfg.Defects.NoHoldersPersisted {
		// task's saveHolders: the memory's file beside the data, read back
		// by a restart (kill).
		n.holdersDisk = maps.Clone(n.holders)
	}
	w.observeMembers(n, insts, &o)
	if o.Running && n.data.forceNew && n.etcd.group.quorum >= 0 {
		n.data.forceNew = false // task's clearForceNew: once etcd is ready
	}
	w.observeQuorumLoss(n, &o)
	return o, nil
}

func learnerOf(d *data) bool {
	if d.group == nil {
		return false
	}
	m := d.group.member(d.memberID)
	return m != nil && m.learner
}

func (w *World) local(n *node) planner.Local {
	d := n.data
	if d == nil || !d.wal {
		if d != nil {
			// datadir.Observe: the epoch of metadata without data.
			return planner.Local{Empty: true, Cluster: clusterName, MetaEpoch: d.epoch}
		}
		return planner.Local{Empty: true}
	}
	return planner.Local{Cluster: d.cluster, Name: d.name, Token: d.token, Epoch: d.epoch, MemberID: d.memberID,
		ClusterID: d.clusterID, Revision: d.rev, Learner: learnerOf(d), ForceNewPending: n.etcd == nil && d.forceNew && d.clusterID == 0,
		Unstarted: n.etcd == nil && (d.restored || d.forceNew && d.clusterID == 0)}
}

// status is what in's /status reports (task/server.go health).
func (w *World) status(in *node) planner.PeerStatus {
	st := planner.PeerStatus{Name: in.name}
	d := in.data
	if d != nil {
		if in.etcd != nil || d.wal || len(in.pending) > 0 {
			// task/server.go: metadata written before etcd created any
			// data (a crash between the two, sim seed 377) names no
			// incarnation: the member sees itself empty and peers must
			// not wait for it. But while the process is still carrying
			// out the start that wrote it, it does (sim seed 239:
			// Consul lost the record between a seed's metadata and its
			// etcd start; a peer that saw no token seeded a second
			// epoch 1). task's /status does the same (server.go:
			// Member.starting).
			st.Token, st.Epoch, st.ClusterID = d.token, d.epoch, d.clusterID
		} else if !w.cfg.Defects.NoPeerMetaEpoch {
			// task/server.go: metadata without data reports the epoch it
			// names (review rev18c N3): a new epoch goes above it.
			st.MetaEpoch = d.epoch
		}
		st.MemberID = d.memberID
		if d.name != "" {
			st.Name = d.name
		}
	}
	if in.etcd == nil {
		if d != nil && d.wal {
			st.Revision, st.Learner = d.rev, learnerOf(d)
			st.ForceNewPending = d.forceNew && d.clusterID == 0
			st.Unstarted = d.restored || st.ForceNewPending
		}
		return st
	}
	g := in.etcd.group
	st.Running, st.MemberID, st.ClusterID = true, in.etcd.memberID, g.clusterID
	m := g.member(in.etcd.memberID)
	if m == nil {
		return st
	}
	st.Learner, st.Revision = m.learner, d.rev
	st.Healthy = !m.learner && g.quorum == in.side
	return st
}

// observeMembers mirrors task's observeMembers: a running voter asks its
// own server, others ask the instances; the answer's cluster id is checked.
func (w *World) observeMembers(n *node, insts []*node, o *planner.Observation) {
	var ownCluster uint64
	learner := false
	if n.etcd != nil {
		ownCluster = n.etcd.group.clusterID
		m := n.etcd.group.member(n.etcd.memberID)
		learner = m == nil || m.learner
	}
	var endpoints []*node
	if o.Running && !learner {
		endpoints = append(endpoints, n)
	} else {
		for _, in := range insts {
			if in != n {
				endpoints = append(endpoints, in)
			}
		}
	}
	anyPeer := false
	for _, p := range o.Peers {
		anyPeer = anyPeer || p.Running
	}
	if len(endpoints) == 0 || !o.Running && !anyPeer {
		return
	}
	var g *group
	for _, e := range endpoints {
		if reachable(n, e) && e.etcd != nil && e.etcd.group.quorum == e.side && e.etcd.group.member(e.etcd.memberID) != nil {
			g = e.etcd.group
			break
		}
	}
	if g == nil {
		return
	}
	if ownCluster != 0 && g.clusterID != ownCluster {
		return
	}
	if ownCluster == 0 && o.Record != nil && o.Record.ClusterID != 0 && g.clusterID != o.Record.ClusterID {
		return
	}
	o.MembersKnown, o.MembersClusterID = true, g.clusterID
	n.answered = g
	names := map[string]bool{}
	peers := map[string]bool{}
	for _, in := range insts {
		names[in.name] = true
		peers[in.peerURL] = true
	}
	for _, p := range o.Peers {
		names[p.Name] = true
	}
	if o.Running {
		names[n.name] = true
		if o.Local.Name != "" {
			names[o.Local.Name] = true
		}
	}
	seen := map[uint64]bool{}
	for _, gm := range g.members {
		mem := planner.Member{ID: gm.id, Name: gm.name, PeerURLs: []string{gm.peerURL}, Learner: gm.learner}
		present := names[gm.name]
		if gm.name == "" {
			present = peers[gm.peerURL]
		}
		seen[gm.id] = true
		if present {
			delete(n.absentAt, gm.id)
		} else {
			if _, ok := n.absentAt[gm.id]; !ok {
				n.absentAt[gm.id] = w.now
			}
			mem.AbsentFor = w.now - n.absentAt[gm.id]
		}
		if gm.name != "" {
			// etcd's Status RPC answers locally, without a quorum.
			if mn := w.byPeer(gm.peerURL); mn != nil && reachable(n, mn) && mn.etcd != nil {
				mem.Healthy = true
				if mn.etcd.group.leader != 0 {
					o.LeaderID = mn.etcd.group.leader
				}
			}
		}
		if mem.Healthy {
			delete(n.unhealthyAt, gm.id)
		} else {
			if _, ok := n.unhealthyAt[gm.id]; !ok {
				n.unhealthyAt[gm.id] = w.now
			}
			mem.UnhealthyFor = w.now - n.unhealthyAt[gm.id]
		}
		o.Members = append(o.Members, mem)
	}
	for _, m := range []map[uint64]time.Duration{n.absentAt, n.unhealthyAt} {
		for id := range m {
			if !seen[id] {
				delete(m, id)
			}
		}
	}
}

func (w *World) byPeer(url string) *node { return w.byName[nameOf(url)] }

// nameOf is the member name of a peer URL.
func nameOf(url string) string {
	return strings.TrimSuffix(strings.TrimPrefix(url, "http://"), ":2380")
}

// observeQuorumLoss mirrors task/recover.go: how long quorum has been lost,
// how long an unconfirmed recovery's seeder has been gone, the newest
// snapshot.
func (w *World) observeQuorumLoss(n *node, o *planner.Observation) {
	o.RecoveryGrace = recoveryGrace
	rec := o.Record
	// As task's observeRecordMissing: how long no record was found.
	if rec != nil {
		n.recordMissingSince = -1
	} else {
		if n.recordMissingSince < 0 {
			n.recordMissingSince = w.now
		}
		o.RecordMissingFor = w.now - n.recordMissingSince
	}
	listed := false
	if rec != nil {
		for _, in := range o.Instances {
			listed = listed || in.Name == rec.Seeder
		}
	}
	// As task's observeSeeder: an empty seed's record (Source "") too, or
	// takeoverSeed never sees its seeder gone.
	if rec == nil || rec.ClusterID != 0 || listed {
		n.seederGoneSince = -1
	} else {
		if n.seederGoneSince < 0 {
			n.seederGoneSince = w.now
		}
		o.SeederGoneFor = w.now - n.seederGoneSince
	}
	own := rec != nil && rec.ClusterID == 0 && rec.Seeder == n.name && rec.Source != planner.FromData
	if (rec == nil || own) && !o.Running && o.Local.Empty {
		// task: no record (or this member's own unconfirmed seed or
		// restore) and no data here; the store may hold the cluster's
		// snapshots, which a seed must not abandon (seedFromSnapshot,
		// restoreOverOwnRecord), as task/recover.go does.
		n.quorumLostSince = -1
		w.knownHealthy(n, o) // the summary's members (Consul lost the record, or restored an old one)
		w.latestSnapshot(n, o)
		return
	}
	if rec == nil && !o.Running && !o.Local.Empty && o.Local.ClusterID != 0 && !o.MembersKnown && !w.cfg.Defects.NoLineWithoutRecord {
		// task: no record and stopped data whose cluster does not
		// answer: the store may hold a newer epoch of its line, and a
		// member of it may serve unlisted (supersededWithoutRecord).
		n.quorumLostSince = -1
		w.knownHealthy(n, o)
		w.latestSnapshot(n, o)
		return
	}
	if rec == nil && o.Running && !o.Local.Empty && o.Local.ClusterID != 0 && !o.MembersKnown && !w.cfg.Defects.NoLineWhenRunningWithoutRecord {
		// task: no record, and this running member's cluster has no
		// quorum: the store may hold a newer epoch of its line, which a
		// leaving member stops beside (superseded; review rev18e F3).
		n.quorumLostSince = -1
		w.latestSnapshot(n, o)
		return
	}
	if o.MembersKnown || rec == nil || (rec.ClusterID == 0 && o.SeederGoneFor == 0) {
		n.quorumLostSince = -1
		if o.Running && !o.Local.Empty && o.Local.ClusterID != 0 && (rec == nil || rec.Epoch < o.Local.Epoch) && !w.cfg.Defects.NoLineWhenRerecording {
			// task: a running member that re-records its epoch lists
			// the store for a newer epoch of its line (planner's
			// rerecordSuperseded, review rev18f F5).
			w.latestSnapshot(n, o)
		}
		if rec != nil && rec.ClusterID == 0 && rec.Seeder == n.name {
			w.knownHealthy(n, o) // a recovery of its own data it may resume
			if !o.Local.Empty {
				w.latestSnapshot(n, o) // ...not below a newer snapshot, as task/recover.go does
			}
		}
		return
	}
	if rec.ClusterID != 0 {
		if n.quorumLostSince < 0 {
			n.quorumLostSince = w.now
		}
		o.QuorumLostFor = w.now - n.quorumLostSince
	}
	w.knownHealthy(n, o)
	w.latestSnapshot(n, o)
}

// knownHealthy is task's observeKnownHealthy: every member of n's last
// known membership (its data's cluster's) but itself is asked on its
// client URL, whatever the provider lists; one that answers for n's
// cluster id with a leader is named. The members of the leader's summary
// in the coordinator are asked too, for the record's cluster id or the
// summary's: a member without data (a replacement) has no membership of
// its own (sim seed 5 with CollectRunning), and a member without a record
// (Consul lost its state) none to compare with but the summary's.
func (w *World) knownHealthy(n *node, o *planner.Observation) {
	if o.MembersKnown {
		return
	}
	answered := map[string]bool{}
	// probe asks the member at peerURL; one that answers for clusterID as
	// a voter with a leader is named in KnownHealthy; one the provider
	// does not list that answers as a voter without a leader (task's
	// unlisted voter: Nomad collected it while it runs, and its peers
	// may be just as alive behind a partition, sim seed 1051 with
	// CollectRunning) in UnlistedVoters. Either is remembered.
	probe := func(name, peerURL string, clusterID uint64, peers bool) {
		p := w.byPeer(peerURL)
		if p == nil || p == n || answered[name] || !reachable(n, p) || p.etcd == nil {
			return
		}
		g := p.etcd.group
		m := g.member(p.etcd.memberID)
		if g.clusterID != clusterID || m == nil {
			return
		}
		// A learner answers too, never as healthy (task's
		// answersAsVoter: its leader is stale once its voters are
		// gone), so an unlisted one is named as an unlisted voter
		// (sim seeds 2022, 1000131).
		healthy := !m.learner && g.leader != 0 && g.quorum == p.side
		listed := false
		for _, in := range o.Instances {
			listed = listed || in.Name == name
		}
		if !healthy && listed {
			return
		}
		prev, had := n.healthySeen[name]
		if peers && had && prev.unknown && w.now-prev.at >= o.RecoveryGrace {
			return // a word for an id n does not know lapses (narrowPeersWord)
		}
		answered[name] = true
		if healthy {
			o.KnownHealthy = append(o.KnownHealthy, name)
		} else {
			o.UnlistedVoters = append(o.UnlistedVoters, name)
		}
		w.remember(n, name, peerURL, clusterID, healthy)
		if peers {
			e := n.healthySeen[name]
			e.peers = true
			if had && prev.unknown {
				e.at, e.unknown = prev.at, true // the answer does not extend the peer's word
			}
			n.healthySeen[name] = e
		}
	}
	if d := n.data; (o.Record != nil || !w.cfg.Defects.NoLineWithoutRecord) && !o.Local.Empty && d != nil && d.group != nil {
		// task's dataClusterID: the data's own cluster id, or, for a
		// recovery from it whose ForceNewCluster start is pending, the
		// source incarnation's, whose membership the data still holds
		// (review rev18b F1). NoSourceLineProbe reverts the latter.
		id := o.Local.ClusterID
		if id == 0 && o.Local.ForceNewPending && !w.cfg.Defects.NoSourceLineProbe {
			id = d.group.clusterID
		}
		for _, m := range d.group.members {
			if id == 0 || m.id == o.SelfID || m.name == n.name || m.name == "" {
				continue
			}
			probe(m.name, m.peerURL, id, false)
		}
	}
	if i := w.newest(func(*snapshot) bool { return true }); i >= 0 && !w.cfg.Defects.NoSummaryProbe {
		// The store's writers: the newest snapshot's metadata names the
		// member it was taken from, and its chain's last segment the
		// member whose recorder wrote it (the leader a few seconds
		// ago), for its cluster. Without a record (Consul lost its
		// state, the summary with it) they are all there is; with one
		// (an older record Consul restored, or a seed or recovery
		// whose seeder Nomad collected right after it started) too
		// (sim seeds 71 and 172 with CollectRunning).
		s := &w.store[i]
		if s.taker != "" && (o.Record == nil || !w.cfg.Defects.NoWriterProbe) {
			probe(nameOf(s.taker), s.taker, s.clusterID, false)
		}
		if k := len(s.chain); k > 0 && s.chain[k-1].recorder != "" && !w.cfg.Defects.NoWriterProbe {
			probe(nameOf(s.chain[k-1].recorder), s.chain[k-1].recorder, s.clusterID, false)
		}
	}
	if s := w.coord.summary; s != nil && !w.cfg.Defects.NoSummaryProbe {
		for _, m := range s.members {
			if m.id == o.SelfID || m.name == n.name || m.name == "" {
				continue
			}
			if o.Record != nil && o.Record.ClusterID != 0 {
				probe(m.name, m.peerURL, o.Record.ClusterID, false)
			}
			probe(m.name, m.peerURL, s.clusterID, false)
		}
	}
	if !w.cfg.Defects.ForgetKnownHealthy {
		w.narrowPeersWord(n, o)
		// The members that answered within the recovery grace are asked
		// again, wherever their names came from (Consul may have
		// restored an older summary and record since); those that no
		// longer answer stay named until the grace has passed since
		// their last answer (task's knownSeen).
		for _, name := range slices.Sorted(maps.Keys(n.healthySeen)) {
			if e := n.healthySeen[name]; e.peerURL != "" {
				probe(name, e.peerURL, e.clusterID, e.peers)
			}
		}
	}
	// The data holders n saw listed and the provider no longer lists
	// (task's knownState.holders): a voter among them that answers, with
	// a leader or not, is named and remembered as any probe's find.
	listed := func(name string) bool {
		return slices.ContainsFunc(o.Instances, func(in planner.Instance) bool { return in.Name == name })
	}
	for _, name := range slices.Sorted(maps.Keys(n.holders)) {
		if e := n.holders[name]; !listed(name) && w.now-e.at < o.RecoveryGrace {
			probe(name, e.peerURL, e.clusterID, false)
		}
	}
	if name := w.summaryRewritten(n, o); name != "" {
		answered[name] = true
	}
	if !w.cfg.Defects.ForgetKnownHealthy {
		for _, name := range slices.Sorted(maps.Keys(n.healthySeen)) {
			e := n.healthySeen[name]
			switch {
			case w.now-e.at >= o.RecoveryGrace:
				delete(n.healthySeen, name)
			case answered[name]:
			case e.healthy:
				o.KnownHealthy = append(o.KnownHealthy, name)
			default:
				o.UnlistedVoters = append(o.UnlistedVoters, name)
			}
		}
	}
	if o.Record == nil {
		// Without a record, one that is silent too is named until the
		// grace has passed since the provider last listed it: "no data
		// anywhere" is not so while it may run behind a partition.
		for _, name := range slices.Sorted(maps.Keys(n.holders)) {
			_, named := n.healthySeen[name]
			if e := n.holders[name]; !listed(name) && !answered[name] && !named && w.now-e.at < o.RecoveryGrace {
				o.UnlistedVoters = append(o.UnlistedVoters, name+" (held data when last listed; silent)")
			}
		}
	}
	sort.Strings(o.KnownHealthy)
	sort.Strings(o.UnlistedVoters)
}

// seenMember is a member that answered a probe as a voter (task's
// knownSeen entry): where to ask it again and when it last answered;
// peers: a peer's word (takeFoundVoters).
type seenMember struct {
	peerURL   string
	clusterID uint64
	at        time.Duration
	healthy   bool
	peers     bool
	// unknown: a peer's word for a cluster id n does not know, whose
	// answers do not refresh at (narrowPeersWord).
	unknown bool
}

// narrowPeersWord is task's: a voter peers named for a cluster id n does
// not know of its own cluster (the record's, the summary's, the store's
// newest snapshot's, its data's, its peers' data's) is still asked, but
// marked unknown: its answers do not refresh its time, so it lapses one
// recovery grace after a peer last named it, unless n knows no id (task
// TestAPeersFoundVoterOfAnotherClusterIsNotTaken: a forged /status naming
// another cluster's voter held recoveries back while that cluster served;
// TestAPeersWordForARestoredClusterIsTakenBesideAnOlderStoreWriter: dropping
// the word at once dropped a restored cluster's real voter). The model
// forges no /status: it runs the narrowing to show that it costs no
// safety.
func (w *World) narrowPeersWord(n *node, o *planner.Observation) {
	var known []uint64
	if o.Record != nil && o.Record.ClusterID != 0 {
		known = append(known, o.Record.ClusterID)
	}
	if s := w.coord.summary; s != nil && s.clusterID != 0 {
		known = append(known, s.clusterID)
	}
	if i := w.newest(func(*snapshot) bool { return true }); i >= 0 && w.store[i].clusterID != 0 {
		known = append(known, w.store[i].clusterID)
	}
	if !o.Local.Empty && o.Local.ClusterID != 0 {
		known = append(known, o.Local.ClusterID)
	}
	for _, p := range o.Peers {
		if p.Token != "" && p.ClusterID != 0 {
			known = append(known, p.ClusterID)
		}
	}
	for name, e := range n.healthySeen {
		if e.peers && e.peerURL != "" {
			e.unknown = len(known) > 0 && !slices.Contains(known, e.clusterID)
			n.healthySeen[name] = e
		}
	}
}

// takeFoundVoters is task's takeFoundVoters: the voters peer in found
// answering its probes (its /status names them with their client URL,
// cluster id and how long ago they last answered) join n's own
// (healthySeen): n probes them too and names them until the recovery
// grace has passed since that last answer. A member that never read the
// summary, the record or the store's writers (a fresh replacement after
// Consul lost its state) knows of a collected voter only this way (sim
// seed 180 with CollectRunning: it seeded a second epoch 1 while its
// peers waited for that voter). An unlisted voter n's provider lists is
// an ordinary survivor, seen through its /status, as probeKnown skips it.
func (w *World) takeFoundVoters(n, in *node, insts []*node) {
	for _, name := range slices.Sorted(maps.Keys(in.healthySeen)) {
		e := in.healthySeen[name]
		if e.peerURL == "" || name == n.name || w.now-e.at >= recoveryGrace {
			continue
		}
		if !e.healthy && slices.ContainsFunc(insts, func(x *node) bool { return x.name == name }) {
			continue
		}
		have, ok := n.healthySeen[name]
		if ok && have.at >= e.at {
			continue
		}
		if n.healthySeen == nil {
			n.healthySeen = map[string]seenMember{}
		}
		if ok && !have.peers && have.clusterID == e.clusterID && !w.cfg.Defects.ListedVoterBecomesWord {
			// n's own find of the same cluster stays n's own: a peer's
			// later answer only refreshes its time.
			have.at, have.healthy = e.at, e.healthy
			n.healthySeen[name] = have
			continue
		}
		e.peers = true
		n.healthySeen[name] = e
	}
}

// rememberListedVoter is task's rememberListedVoters: a listed peer
// whose /status answers as a healthy voter (running, not a learner, a
// leader in its quorum) of a cluster n knows (the record's, or the one an
// unconfirmed record's seed started, of the record's token; the summary's
// as n last read it; its own data's), or of any cluster while there is no
// record, is remembered as if a probe had found it: n probes it again and
// names it for the recovery grace after its last answer, after the
// provider stops listing it too (Nomad collected it while it serves), and
// shares it with its peers (/status's found voters). One taken only
// because there was no record is a word like a peer's (narrowPeersWord).
// Before, only the last known membership, the summary and the store's
// writers named such a voter: peers that had just waited for a collected
// seeder of a one-member cluster saw "no record, no data anywhere" a
// moment later and seeded a second epoch 1 beside it (sim seed 8920; seed
// 10469: beside an unconfirmed record's seeder).
func (w *World) rememberListedVoter(n, in *node, st planner.PeerStatus, o *planner.Observation) {
	if !st.Running || !st.Healthy || st.Learner || st.ClusterID == 0 {
		return
	}
	r := o.Record
	known := r != nil && (r.ClusterID == st.ClusterID || r.ClusterID == 0 && st.Token != "" && st.Token == r.Token) ||
		n.summarySeen != nil && n.summarySeen.clusterID == st.ClusterID || !o.Local.Empty && o.Local.ClusterID == st.ClusterID
	if !known && r != nil {
		return
	}
	// A first-hand find of the same cluster (remembered while n knew
	// it: the record named it) stays first-hand: Consul losing its
	// state, or restoring an older one, does not make it a word.
	prev, had := n.healthySeen[in.name]
	firstHand := had && !prev.peers && prev.clusterID == st.ClusterID && !w.cfg.Defects.ListedVoterBecomesWord
	w.remember(n, in.name, in.peerURL, st.ClusterID, true)
	if !known && !firstHand {
		e := n.healthySeen[in.name]
		e.peers = true
		n.healthySeen[in.name] = e
	}
}

// heldSeen is a listed peer whose /status named data of a cluster (task's
// knownHolder): where to probe it and for which cluster id, and when the
// provider last listed it.
type heldSeen struct {
	peerURL   string
	clusterID uint64
	at        time.Duration
	// word (when worded): the listing time a peer's word first claimed
	// for it (task's knownHolder.word).
	word   time.Duration
	worded bool
}

// rememberListedHolder is task's rememberListedHolders: a listed peer
// whose /status (st) names data of a cluster n knows (as for
// rememberListedVoter: the record's, the summary's, its own data's; any
// without a record) is remembered until the recovery grace has passed
// since the provider last listed it (st nil: listed, its /status did not
// answer; the planner counts it unreachable meanwhile); one that answers
// without data, or with another cluster's under a record, is forgotten.
// Once the provider stops listing it, knownHealthy probes it: a voter,
// with a leader or not, is named like any probe's find (and remembered
// for the grace after its last answer), and without a record a silent
// one is named too. Before, a peer that held data but had never answered
// as a healthy voter (its cluster had no quorum) was named by nothing
// once Nomad collected it while it ran: an empty replacement that had
// waited for its data saw "no record and no data anywhere" and seeded a
// second epoch 1 beside it, and the partition that had split its cluster
// healed (sim seed 36353 with SnapshotUnconfirmed).
func (w *World) rememberListedHolder(n, in *node, st *planner.PeerStatus, o *planner.Observation) {
	if w.cfg.Defects.ForgetListedHolder {
		return
	}
	e, had := n.holders[in.name]
	switch {
	case st == nil || st.Token != "" && st.ClusterID == 0:
		// Silent, or metadata of a start whose cluster id is not known
		// yet: listed, it is still possibly the holder n saw.
		if had {
			e.at, e.worded = w.now, false
			n.holders[in.name] = e
		}
		return
	case st.Token == "":
		delete(n.holders, in.name)
		return
	}
	r := o.Record
	known := r != nil && (r.ClusterID == st.ClusterID || r.ClusterID == 0 && st.Token == r.Token) ||
		n.summarySeen != nil && n.summarySeen.clusterID == st.ClusterID || !o.Local.Empty && o.Local.ClusterID == st.ClusterID
	if !known && r != nil {
		delete(n.holders, in.name)
		return
	}
	if n.holders == nil {
		n.holders = map[string]heldSeen{}
	}
	n.holders[in.name] = heldSeen{peerURL: in.peerURL, clusterID: st.ClusterID, at: w.now}
}

// takeSharedHolders is task's takeSharedHolders: the data holders peer
// in remembers (its /status names them with their client URL, cluster id
// and how long ago its provider last listed them) join n's own, with the
// time of that original listing: n probes them and, without a record,
// names a silent one until the recovery grace has passed since then. The
// age only grows as it is passed on, so no two members keep each other's
// word alive. One n's provider lists is seen through its /status. Under a
// record only a holder of a cluster n knows is taken (as
// rememberListedHolder). Before, the memory lived in one process: m0-1,
// which had seen m0-0 and m1-0 hold epoch 1 data before Nomad collected
// them while they ran, crashed behind a partition, restarted knowing
// nothing of them and seeded a second epoch 1 (review rev18f F3, sim
// seed 36353 driven to step 296).
func (w *World) takeSharedHolders(n, in *node, insts []*node, o *planner.Observation) {
	for _, name := range slices.Sorted(maps.Keys(in.holders)) {
		e := in.holders[name]
		if name == n.name || e.peerURL == "" || w.now-e.at >= recoveryGrace {
			continue
		}
		if slices.ContainsFunc(insts, func(x *node) bool { return x.name == name }) {
			continue
		}
		if r := o.Record; r != nil && r.ClusterID != e.clusterID && (n.summarySeen == nil || n.summarySeen.clusterID != e.clusterID) && (o.Local.Empty || o.Local.ClusterID != e.clusterID) {
			continue
		}
		// A word moves only the time of a holder n knows, and to no more
		// than the grace after the first listing a word claimed for it.
		at := e.at
		have, ok := n.holders[name]
		if !ok {
			have = heldSeen{peerURL: e.peerURL, clusterID: e.clusterID, word: at, worded: true}
		} else {
			if !have.worded {
				have.word, have.worded = have.at, true
			}
			at = min(at, have.word+recoveryGrace)
			if have.at >= at {
				continue
			}
		}
		have.at = at
		if n.holders == nil {
			n.holders = map[string]heldSeen{}
		}
		n.holders[name] = have
	}
}

// wordNames reports whether a peer n reaches names holder name within
// the grace (task's wordNames).
func (w *World) wordNames(n *node, insts []*node, name string) bool {
	if w.cfg.Defects.NoHoldersShared {
		return false
	}
	return slices.ContainsFunc(insts, func(in *node) bool {
		e, ok := in.holders[name]
		return in != n && reachable(n, in) && ok && w.now-e.at < recoveryGrace
	})
}

// remember notes that name answered a probe at peerURL for clusterID.
func (w *World) remember(n *node, name, peerURL string, clusterID uint64, healthy bool) {
	if n.healthySeen == nil {
		n.healthySeen = map[string]seenMember{}
	}
	n.healthySeen[name] = seenMember{peerURL: peerURL, clusterID: clusterID, at: w.now, healthy: healthy}
}

// summaryRewritten is task's summaryBeat check: the summary in the
// coordinator changed since this member's last probe read it, so a
// leader wrote it a moment ago (a leader writes it every summaryBeat):
// a quorum serves there, whatever the provider lists and whether or not
// a partition hides its members from this one. The leader is named in
// KnownHealthy (and remembered for the recovery grace).
func (w *World) summaryRewritten(n *node, o *planner.Observation) string {
	if w.cfg.Defects.NoSummaryBeat {
		return ""
	}
	s, name := w.coord.summary, ""
	if n.summaryRead && s != nil && s != n.summarySeen && s.leader != n.name {
		name = s.leader + " (its summary was rewritten)"
		o.KnownHealthy = append(o.KnownHealthy, name)
		if !w.cfg.Defects.ForgetKnownHealthy {
			w.remember(n, name, "", 0, true)
		}
	}
	n.summaryRead, n.summarySeen = true, s
	return name
}

// latestSnapshot is task's newestSnapshot: the newest full snapshot
// (snapshot.Later: by epoch and revision, the taker's clock only breaking
// a tie), its
// revision the end of its delta chain without the segments n found
// damaged.
//
// As task's lineageSnapshot, a newest snapshot of no incarnation of the
// record (snapshot.Lineage: above an unconfirmed record's epoch, or of
// its confirmed epoch under another cluster id) is no LatestSnapshot but
// a refused one, and SnapshotEpoch is the highest epoch in the store
// (review rev16a A1: the model gave the planner every newest snapshot as
// the lineage's, so a rule reading only LatestSnapshot looked sound here
// and was not in the member). AnyLineage reverts it.
func (w *World) latestSnapshot(n *node, o *planner.Observation) {
	for i := range w.store {
		o.SnapshotEpoch = max(o.SnapshotEpoch, w.store[i].epoch)
		if !o.Local.Empty && o.Local.ClusterID != 0 && w.store[i].clusterID == o.Local.ClusterID {
			o.LineEpoch = max(o.LineEpoch, w.store[i].epoch) // task's lineEpoch
		}
	}
	if i := w.newest(func(*snapshot) bool { return true }); i >= 0 {
		s := &w.store[i]
		end := s.chainEnd(n.damaged)
		if rec := o.Record; rec != nil && !w.cfg.Defects.AnyLineage && !ofLineage(rec, s) {
			o.RefusedSnapshot = &planner.RefusedSnapshot{Name: s.name, Epoch: s.epoch, Revision: end, BaseRevision: s.rev,
				Why: fmt.Sprintf("of another incarnation: cluster id %x, epoch %d (the record's: %x, %d)", s.clusterID, s.epoch, rec.ClusterID, rec.Epoch)}
			return
		}
		o.LatestSnapshot = &planner.SnapshotInfo{Name: s.name, Revision: end, Epoch: s.epoch}
	}
}

// ofLineage is snapshot.Lineage.Of for the model's snapshots: an
// unconfirmed record bounds its lineage by its epoch; a confirmed one
// takes lower epochs, and its own under its cluster id (or 0: taken
// before the record was confirmed).
func ofLineage(rec *planner.Record, s *snapshot) bool {
	if rec.ClusterID == 0 {
		return rec.Epoch == 0 || s.epoch <= rec.Epoch
	}
	return s.epoch < rec.Epoch || s.epoch == rec.Epoch && (s.clusterID == rec.ClusterID || s.clusterID == 0)
}
