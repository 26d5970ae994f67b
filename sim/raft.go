package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// The etcd model: raft facts (voters, learners, quorum, leader,
// revisions) recomputed after every step from who runs where.

// runningNode returns the node running member id of g, nil if none.
func (w *World) runningNode(g *group, id uint64) *node {
	for _, n := range w.nodes {
		if n.up && n.etcd != nil && n.etcd.group == g && n.etcd.memberID == id {
			return n
		}
	}
	return nil
}

func (g *group) member(id uint64) *gmember {
	for _, m := range g.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

func (g *group) voters() int {
	v := 0
	for _, m := range g.members {
		if !m.learner {
			v++
		}
	}
	return v
}

func (g *group) String() string {
	return fmt.Sprintf("cluster %x/g%d (epoch %d)", g.clusterID, g.n, g.epoch)
}

// refresh recomputes every group's quorum, leader and catch-up, stops
// removed members, renews or expires the lock's session.
func (w *World) refresh() {
	for _, g := range w.groups {
		w.refreshGroup(g)
	}
	c := &w.coord
	if c.holder != nil {
		if c.holder.up && !c.holder.noConsul && c.holder.lockSession == c.session {
			c.expires = w.now + lockTTL
		} else if w.now >= c.expires {
			c.holder = nil
		}
	}
}

func (w *World) refreshGroup(g *group) {
	// Members removed from the membership stop on their own.
	var run []*node
	for _, n := range w.nodes {
		if n.up && n.etcd != nil && n.etcd.group == g {
			if g.member(n.etcd.memberID) == nil {
				n.etcd = nil
				continue
			}
			run = append(run, n)
		}
	}
	if len(run) == 0 && g.quorum < 0 {
		return
	}
	voters := g.voters()
	count := map[int]int{}
	for _, n := range run {
		if !g.member(n.etcd.memberID).learner {
			count[n.side]++
		}
	}
	g.quorum = -1
	for _, n := range run {
		if voters > 0 && count[n.side] >= planner.Quorum(voters) {
			g.quorum = n.side
			break
		}
	}
	if g.quorum < 0 {
		g.leader = 0
	} else if ln := w.runningNode(g, g.leader); ln == nil || ln.side != g.quorum || g.member(g.leader).learner {
		g.leader = 0
		for _, n := range run {
			if n.side == g.quorum && !g.member(n.etcd.memberID).learner && (g.leader == 0 || n.etcd.memberID < g.leader) {
				g.leader = n.etcd.memberID
			}
		}
	}
	now := map[uint64]bool{}
	for _, n := range run {
		if g.quorum >= 0 && n.side == g.quorum {
			now[n.etcd.memberID] = true
			n.data.rev = g.committed
		}
	}
	for _, m := range g.members {
		if now[m.id] && !m.active {
			m.activeSince = w.now
		}
		m.active = now[m.id]
	}
}

// write is a client write to every cluster that has a quorum: it raises
// the committed revision, and the members with the leader apply it.
func (w *World) write() {
	for _, g := range w.groups {
		if g.quorum < 0 {
			continue
		}
		g.committed++
		g.branch.acked = g.committed
		for _, n := range w.nodes {
			if n.up && n.etcd != nil && n.etcd.group == g && n.side == g.quorum {
				n.data.rev = g.committed
			}
		}
	}
}

// newGroup starts a new cluster incarnation with one member, self.
func (w *World) newGroup(src *node, clusterID uint64, token string, epoch uint64, br *branch, rev int64, self *gmember, why string) *group {
	g := &group{n: len(w.groups) + 1, clusterID: clusterID, token: token, epoch: epoch, branch: br, committed: rev, quorum: -1, members: []*gmember{self}}
	w.groups = append(w.groups, g)
	w.checkNewGroup(src, g, why)
	return g
}

// client models the clientv3 client a supervisor opens on the provider's
// instances: a request goes to the first endpoint that can serve it (it
// runs etcd, is reachable and is with its cluster's quorum).
func (w *World) client(n *node, inclSelf bool) (*group, *node, error) {
	for _, in := range w.listed() {
		if in == n && !inclSelf {
			continue
		}
		if !reachable(n, in) || in.etcd == nil {
			continue
		}
		g := in.etcd.group
		if g.quorum == in.side {
			return g, in, nil
		}
	}
	return nil, nil, errors.New("no endpoint with a quorum answers")
}

// The strict-reconfiguration checks of etcd's server
// (isReadyToRemoveVotingMember, isReadyToAddVotingMember).
func (w *World) readyToRemove(g *group, id uint64) bool {
	m := g.member(id)
	if m == nil || m.learner {
		return true
	}
	remaining, active := 0, 0
	for _, x := range g.members {
		if x.learner || x.id == id {
			continue
		}
		remaining++
		if x.active && (x.id == g.leader || w.now-x.activeSince >= strictWindow) {
			active++
		}
	}
	return remaining > 0 && active >= planner.Quorum(remaining)
}

func (w *World) readyToPromote(g *group, id uint64) bool {
	voters, active := 1, 0
	for _, x := range g.members {
		if x.learner && x.id != id {
			continue
		}
		if !x.learner {
			voters++
		}
		if x.active && (x.id == g.leader || x.id == id || w.now-x.activeSince >= strictWindow) {
			active++
		}
	}
	return active >= planner.Quorum(voters)
}

func (w *World) memberAddLearner(g *group, peerURL string) (*gmember, error) {
	for _, m := range g.members {
		if m.learner || m.name == "" {
			return nil, errors.New("etcdserver: too many learner members in cluster")
		}
	}
	m := &gmember{id: w.id(), peerURL: peerURL, learner: true}
	g.members = append(g.members, m)
	return m, nil
}

func (w *World) memberRemove(g *group, id uint64) error {
	if g.member(id) == nil {
		return errors.New("etcdserver: member not found")
	}
	if !w.readyToRemove(g, id) {
		return errors.New("etcdserver: re-configuration failed due to not enough started members")
	}
	for i, m := range g.members {
		if m.id == id {
			g.members = append(g.members[:i], g.members[i+1:]...)
			break
		}
	}
	if g.leader == id {
		g.leader = 0
	}
	w.refreshGroup(g)
	return nil
}

func (w *World) memberPromote(g *group, id uint64) error {
	m := g.member(id)
	if m == nil {
		return errors.New("etcdserver: member not found")
	}
	if !m.learner {
		return errors.New("etcdserver: member is not a learner")
	}
	n := w.runningNode(g, id)
	if n == nil || !m.active || n.data.rev < g.committed || w.now-m.activeSince < time.Second {
		return errors.New("etcdserver: can only promote a learner member which is in sync with leader")
	}
	if !w.readyToPromote(g, id) {
		return errors.New("etcdserver: re-configuration failed due to not enough started members")
	}
	m.learner = false
	w.refreshGroup(g)
	return nil
}
