package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

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

// lastKnownMembers returns the membership this member's data knows: its
// running server's, or, stopped, what its database holds.
func (m *Member) lastKnownMembers() ([]knownMember, error) {
	m.mu.Lock()
	e := m.etcd
	m.mu.Unlock()
	if e != nil {
		var out []knownMember
		for _, mem := range e.Server.Cluster().Members() {
			out = append(out, knownMember{id: uint64(mem.ID), name: mem.Name, clientURLs: mem.ClientURLs})
		}
		return out, nil
	}
	db := filepath.Join(m.dir.EtcdDir(), "member", "snap", "db")
	if _, err := os.Stat(db); err != nil {
		return nil, nil // no data: no membership to probe
	}
	b, err := bolt.Open(db, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", db, err)
	}
	defer b.Close()
	var out []knownMember
	err = b.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte("members"))
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(_, v []byte) error {
			var sm storedMember
			if err := json.Unmarshal(v, &sm); err != nil {
				return fmt.Errorf("member %s: %w", v, err)
			}
			out = append(out, knownMember{id: sm.ID, name: sm.Name, clientURLs: sm.ClientURLs})
			return nil
		})
	})
	return out, err
}

// observeKnownHealthy fills o.KnownHealthy during a quorum loss: every
// member of this member's last known membership (other than itself) is
// asked on its client URLs, whatever the provider lists; one that answers
// for this member's cluster with a leader proves a quorum serves writes
// there (a majority Nomad forgot: its allocations garbage-collected while
// a partition hid them), and the planner recovers nothing beside it.
// The members of the leader's last summary in the coordinator are asked
// too, for the record's cluster or the summary's (Consul lost the record:
// observeQuorumLoss asks without one): a member without data (a
// replacement) has no membership of its own (sim seed 5 with CollectRunning: two
// voters collected while they served, the third replaced, and an empty
// replacement recovered from the store beside them). A stale or planted
// summary only adds probes: only an answer for the record's cluster id
// with a leader, over the peer TLS, blocks.
func (m *Member) observeKnownHealthy(ctx context.Context, o *planner.Observation) {
	if o.MembersKnown {
		return
	}
	type probe struct {
		k          knownMember
		clusterIDs []uint64
	}
	var probes []probe
	if o.Record != nil && !o.Local.Empty && o.Local.ClusterID != 0 {
		known, err := m.lastKnownMembers()
		if err != nil {
			m.log.Warn("last known membership unreadable: its members are not probed before a recovery", "error", err)
		}
		for _, k := range known {
			probes = append(probes, probe{k, []uint64{o.Local.ClusterID}})
		}
	}
	summary, members := m.summaryMembers(ctx)
	var ids []uint64
	if o.Record != nil && o.Record.ClusterID != 0 {
		ids = append(ids, o.Record.ClusterID)
	}
	if summary != 0 {
		ids = append(ids, summary)
	}
	if len(ids) > 0 {
		for _, k := range members {
			probes = append(probes, probe{k, ids})
		}
	}
	if t := m.latestSnapshotTaker; o.Record == nil && len(t.clientURLs) > 0 {
		// No record (Consul lost its state, the summary with it): the
		// newest snapshot's metadata names the member it was streamed
		// from, for its cluster.
		if id, err := strconv.ParseUint(t.clusterID, 16, 64); err == nil && id != 0 {
			probes = append(probes, probe{t, []uint64{id}})
		}
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		healthy = map[string]string{} // name → the URL that answered
	)
	asked := map[string]bool{}
	for _, p := range probes {
		k := p.k
		key := fmt.Sprintf("%s %x %v", k.name, p.clusterIDs, k.clientURLs)
		if k.id != 0 && k.id == o.SelfID || k.name == m.opts.Name || len(k.clientURLs) == 0 || asked[key] {
			continue
		}
		asked[key] = true
		wg.Add(1)
		go func(k knownMember, clusterIDs []uint64) {
			defer wg.Done()
			if url, ok := m.answersWithLeader(ctx, k.clientURLs, clusterIDs...); ok {
				mu.Lock()
				if _, seen := healthy[k.name]; !seen {
					healthy[k.name] = url
				}
				mu.Unlock()
			}
		}(k, p.clusterIDs)
	}
	wg.Wait()
	for name, url := range healthy {
		o.KnownHealthy = append(o.KnownHealthy, fmt.Sprintf("%s (%s)", name, url))
	}
	sort.Strings(o.KnownHealthy)
}

// maxSummaryProbes and maxSummaryURLs bound what a summary makes a member
// probe: a Consul writer may plant one (README, threat model).
const (
	maxSummaryProbes = 16
	maxSummaryURLs   = 4
)

// summaryMembers returns the cluster id of the leader's last summary in
// the coordinator and its members with their client URLs; none when it
// cannot be read.
func (m *Member) summaryMembers(ctx context.Context) (uint64, []knownMember) {
	sr, ok := m.opts.Coordinator.(summaryReader)
	if !ok {
		return 0, nil
	}
	b, err := sr.Get(ctx, "summary")
	if err != nil {
		if !errors.Is(err, coord.ErrNotStored) {
			m.log.Warn("cluster summary unreadable: its members are not probed before a recovery", "error", err)
		}
		return 0, nil
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		m.log.Warn("cluster summary undecodable: its members are not probed before a recovery", "error", err)
		return 0, nil
	}
	if len(s.Members) > maxSummaryProbes {
		m.log.Warn("cluster summary lists too many members: only the first are probed before a recovery", "members", len(s.Members), "probed", maxSummaryProbes)
		s.Members = s.Members[:maxSummaryProbes]
	}
	var out []knownMember
	for _, sm := range s.Members {
		if len(sm.ClientURLs) > maxSummaryURLs {
			sm.ClientURLs = sm.ClientURLs[:maxSummaryURLs]
		}
		id, _ := strconv.ParseUint(sm.ID, 16, 64)
		out = append(out, knownMember{id: id, name: sm.Name, clientURLs: sm.ClientURLs})
	}
	clusterID, _ := strconv.ParseUint(s.ClusterID, 16, 64)
	return clusterID, out
}

// answersWithLeader reports whether any of urls answers etcd's Status for
// one of clusterIDs as a voter with a leader, and which one. A learner is
// not asked to count: it never campaigns, so after its voters are gone it
// names its last leader forever, and a summary listing one wedged every
// recovery (data review, session 11). Alarms do not count against it: a
// quorum under NOSPACE still serves deletes, and puts again once
// disarmed.
func (m *Member) answersWithLeader(ctx context.Context, urls []string, clusterIDs ...uint64) (string, bool) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: rpcTimeout, TLS: m.peerTLS, Logger: zap.NewNop()})
	if err != nil {
		return "", false
	}
	defer cli.Close()
	for _, u := range urls {
		sctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		st, err := cli.Status(sctx, u)
		cancel()
		if err == nil && st.Leader != 0 && !st.IsLearner && st.Header != nil && slices.Contains(clusterIDs, st.Header.ClusterId) {
			return u, true
		}
	}
	return "", false
}
