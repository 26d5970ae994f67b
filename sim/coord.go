package sim

import (
	"errors"
	"slices"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// coordinator models Consul: one session lock with a TTL, and the cluster
// record written create-only or by CAS, each write fenced by the lock.
type coordinator struct {
	record  *planner.Record
	index   uint64
	holder  *node
	session uint64
	expires time.Duration
	history []recordVersion // every record written, for a restore of an older state
	// summary is the cluster summary the leader publishes (task's
	// publishSummary): the members' peer URLs (their client URLs in
	// task) and the cluster id. Informational, not fenced; an empty
	// member probes its members (knownHealthy).
	summary *clusterSummary
	// pause is the operator's pause ('etcd-nomad pause': who and why),
	// "" when none; Consul KV, lost with Consul's state.
	pause string
	// ca is the cluster CA, rot the CA rotation record (rotation.go).
	ca  int
	rot *rotationRec
}

type recordVersion struct {
	rec     *planner.Record
	index   uint64
	summary *clusterSummary // the summary stored when the record was written
	pause   string          // the pause then
	ca      int             // the cluster CA then
	rot     *rotationRec    // the CA rotation record then
}

// clusterSummary is task's Summary, as far as the model reads it: each
// write is a new value (task's Summary.Written), so a reader tells a
// rewrite.
type clusterSummary struct {
	clusterID uint64
	leader    string
	members   []summaryMember
}

type summaryMember struct {
	id      uint64
	name    string
	peerURL string
}

// publishSummary is task's publishSummary (the side job PublishSummary
// of planner.PlanSideJobs: the confirmed leader, a record read): the
// members it observed, written when they changed.
func (w *World) publishSummary(n *node, o planner.Observation) {
	s := &clusterSummary{clusterID: o.Record.ClusterID, leader: n.name}
	for _, m := range o.Members {
		url := ""
		if len(m.PeerURLs) > 0 {
			url = m.PeerURLs[0]
		}
		s.members = append(s.members, summaryMember{id: m.ID, name: m.Name, peerURL: url})
	}
	w.storeSummary(n, s)
}

// publishSummaryUnlisted is task's publishSummaryUnobserved: a
// leader whose observation failed on the provider (its host cut off from
// the Nomad servers) still writes the membership its own server knows,
// for the cluster of the record it read last: Nomad may collect its
// allocation while it serves (sim seed 63 with CollectRunning: the
// summary named only members gone, and an empty replacement recovered
// beside the collected majority).
func (w *World) publishSummaryUnlisted(n *node) {
	if n.etcd == nil || n.noConsul || w.cfg.Defects.NoSummaryProbe {
		return
	}
	g := n.etcd.group
	if g.leader != n.etcd.memberID || g.quorum != n.side {
		return
	}
	if n.record == nil {
		// task's: the last record read was none (Consul lost its
		// state): a leader of its own data's confirmed cluster beats
		// the summary all the same, for that cluster (sim seed
		// 1004733: Nomad collected the leader right after it found no
		// record, and Consul restored an older record and summary, so
		// nothing a replacement read named the cluster it served).
		if w.cfg.Defects.NoRecordlessSummary || n.data == nil || n.data.token != g.token || n.data.clusterID != g.clusterID {
			return
		}
		s := &clusterSummary{clusterID: g.clusterID, leader: n.name}
		for _, m := range g.members {
			s.members = append(s.members, summaryMember{id: m.id, name: m.name, peerURL: m.peerURL})
		}
		w.storeSummary(n, s)
		return
	}
	// Its own seed or recovery, started and not confirmed yet, counts
	// as the record's cluster: Nomad may collect the seeder right after
	// the start, before it could confirm (sim seed 466 with
	// CollectRunning: a takeover beside the seeder's cluster).
	own := n.record.ClusterID == 0 && n.record.Seeder == n.data.name && n.record.Token == g.token && !w.cfg.Defects.NoUnconfirmedSummary
	if n.record.ClusterID != g.clusterID && !own {
		return
	}
	s := &clusterSummary{clusterID: g.clusterID, leader: n.name}
	for _, m := range g.members {
		s.members = append(s.members, summaryMember{id: m.id, name: m.name, peerURL: m.peerURL})
	}
	w.storeSummary(n, s)
}

// storeSummary is task's writeSummary: n writes s when it changed since
// n last wrote it, or summaryBeat after that write (unchanged: its
// heartbeat). NoSummaryBeat writes on change only.
func (w *World) storeSummary(n *node, s *clusterSummary) {
	same := false
	if old := w.coord.summary; old != nil && old.clusterID == s.clusterID && old.leader == s.leader && slices.Equal(old.members, s.members) {
		same = true
	}
	if same && (w.cfg.Defects.NoSummaryBeat || w.now-n.summaryAt < summaryBeat) {
		return
	}
	w.coord.summary, n.summaryAt = s, w.now
	if !same {
		w.logf("summary", "cluster %x by %s: %v", s.clusterID, s.leader, s.members)
	}
}

var (
	errConsul   = errors.New("consul unreachable")
	errLockLost = errors.New("lock lost")
	errConflict = errors.New("record changed (CAS failed)")
	errExists   = errors.New("record exists (create-only)")
)

// lock takes the lock for n when it is free.
func (w *World) lock(n *node) error {
	c := &w.coord
	if n.noConsul {
		return errConsul
	}
	if c.holder != nil && c.holder != n {
		return errors.New("lock held by " + c.holder.name)
	}
	// Held by this member's own session that its process no longer holds
	// (a previous process, or one released while Consul was out of
	// reach: task's releaseLock forgets the session even when Consul
	// does not answer): coord/consul's Lock ends that session and takes
	// the lock at once, without waiting for its TTL (sim seeds 20989,
	// 27521 and four others: a leaving member waited out the TTL of its
	// own old session past its leave deadline).
	w.nextID++
	c.holder, c.session, c.expires = n, w.nextID, w.now+lockTTL
	n.lockSession = c.session
	return nil
}

// unlock releases n's lock, if n still holds it.
func (w *World) unlock(n *node) {
	c := &w.coord
	if c.holder == n && c.session == n.lockSession && !n.noConsul {
		c.holder = nil
	}
	n.lockSession = 0
}

// fenced reports whether a write by n is fenced by the lock it holds.
func (w *World) fenced(n *node) error {
	c := &w.coord
	if n.noConsul {
		return errConsul
	}
	if n.lockSession == 0 || c.holder != n || c.session != n.lockSession {
		return errLockLost
	}
	return nil
}

// createRecord is the create-only write.
func (w *World) createRecord(n *node, r planner.Record) error {
	if err := w.fenced(n); err != nil {
		return err
	}
	if w.coord.record != nil {
		return errExists
	}
	w.setRecord(r)
	return nil
}

// updateRecord is the CAS write against the index n read.
func (w *World) updateRecord(n *node, r planner.Record) error {
	if err := w.fenced(n); err != nil {
		return err
	}
	if w.coord.record == nil || w.coord.index != n.recIndex {
		return errConflict
	}
	w.setRecord(r)
	return nil
}

func (w *World) setRecord(r planner.Record) {
	w.coord.index = w.id()
	w.coord.record = &r
	w.coord.history = append(w.coord.history, recordVersion{rec: &r, index: w.coord.index, summary: w.coord.summary, pause: w.coord.pause, ca: w.coord.ca, rot: w.coord.rot})
}

// listed is the provider's current instance list: allocations that run,
// and (unless ProviderDropsUnknown) those that might still run, which provider/nomad
// lists as Unknown: a disconnected client's, and a stopping one's (desired
// status stop) until its client reports the task exited (here: until the
// member's process has left, runLeave's exit). A replaced slot's stopping
// allocation stays listed beside its replacement.
func (w *World) listed() []*node {
	var out []*node
	for _, n := range w.nodes {
		out = appendListed(out, n, w.cfg.Defects.ProviderDropsUnknown)
	}
	return out
}

func appendListed(out []*node, n *node, dropUnknown bool) []*node {
	switch {
	case n == nil, n.alloc == allocTerminal:
	case (n.alloc == allocUnknown || n.alloc == allocStopping) && dropUnknown:
	default:
		out = append(out, n)
	}
	return out
}

// listChanged records a new version of the provider's list.
func (w *World) listChanged() {
	w.lists = append(w.lists, listVersion{at: w.now, nodes: w.listed()})
	// Keep what a lagging watcher may still serve.
	for len(w.lists) > 2 && w.lists[1].at < w.now-2*staleListMax {
		w.lists = w.lists[1:]
	}
}

// instances is the list n's provider serves: possibly stale (a watch that
// has not seen the newest change yet).
func (w *World) instances(n *node) []*node {
	at := w.now - time.Duration(w.rng.Int64N(int64(staleListMax)))
	list := w.lists[0].nodes
	for _, v := range w.lists {
		if v.at <= at {
			list = v.nodes
		}
	}
	return list
}

// takeSnapshot saves the content of g's leader to the store.
func (w *World) takeSnapshot(g *group) string {
	w.nextID++
	s := snapshot{name: "snap-" + itoa(int(w.nextID)), branch: g.branch, rev: g.committed, epoch: g.epoch, created: w.now, clusterID: g.clusterID}
	if ln := w.runningNode(g, g.leader); ln != nil {
		s.created += ln.skew
		s.taker = ln.peerURL
	}
	w.store = append(w.store, s)
	return s.name
}

// recordDeltas is the leader's recorder (task/backup/deltas.go): for every
// cluster with a quorum it extends the chain of the newest full snapshot
// of that incarnation with a segment holding the writes since the chain's
// end.
func (w *World) recordDeltas() {
	for _, g := range w.groups {
		if g.quorum < 0 {
			continue
		}
		i := w.newest(func(s *snapshot) bool { return s.branch == g.branch && s.epoch == g.epoch })
		if i < 0 {
			continue
		}
		if s := &w.store[i]; g.committed > s.chainEnd(nil) {
			// Named within its snapshot: the world's id counter (member
			// ids, tokens) stays what it was before chains were modeled.
			seg := segment{name: s.name + "-d" + itoa(len(s.chain)+1), end: g.committed}
			if ln := w.runningNode(g, g.leader); ln != nil {
				seg.recorder = ln.peerURL
			}
			s.chain = append(s.chain, seg)
		}
	}
}

// damageSegment damages one segment of the newest snapshot's chain: it
// fails its checksum from now on.
func (w *World) damageSegment() {
	i := w.newest(func(*snapshot) bool { return true })
	if i < 0 {
		return
	}
	s := &w.store[i]
	if len(s.chain) == 0 {
		return
	}
	g := &s.chain[w.crng.IntN(len(s.chain))]
	if !g.damaged {
		g.damaged = true
		w.logf("fault", "delta segment %s of %s (end %d) damaged", g.name, s.name, g.end)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for i > 0 {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
	}
	return string(b)
}
