package task

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// knownMember is a member of this member's last known membership: what
// its own data (etcd's members bucket) or its running server knows.
type knownMember struct {
	id         uint64
	name       string
	clientURLs []string
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
func (m *Member) observeKnownHealthy(ctx context.Context, o *planner.Observation) {
	if o.MembersKnown || o.Record == nil || o.Local.Empty || o.Local.ClusterID == 0 {
		return
	}
	known, err := m.lastKnownMembers()
	if err != nil {
		m.log.Warn("last known membership unreadable: its members are not probed before a recovery", "error", err)
		return
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		healthy []string
	)
	for _, k := range known {
		if k.id == o.SelfID || k.name == m.opts.Name || len(k.clientURLs) == 0 {
			continue
		}
		wg.Add(1)
		go func(k knownMember) {
			defer wg.Done()
			if url, ok := m.answersWithLeader(ctx, k.clientURLs, o.Local.ClusterID); ok {
				mu.Lock()
				healthy = append(healthy, fmt.Sprintf("%s (%s)", k.name, url))
				mu.Unlock()
			}
		}(k)
	}
	wg.Wait()
	sort.Strings(healthy)
	o.KnownHealthy = healthy
}

// answersWithLeader reports whether any of urls answers etcd's Status for
// cluster clusterID with a leader and no error, and which one.
func (m *Member) answersWithLeader(ctx context.Context, urls []string, clusterID uint64) (string, bool) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: rpcTimeout, TLS: m.peerTLS, Logger: zap.NewNop()})
	if err != nil {
		return "", false
	}
	defer cli.Close()
	for _, u := range urls {
		sctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		st, err := cli.Status(sctx, u)
		cancel()
		if err == nil && st.Leader != 0 && len(st.Errors) == 0 && st.Header != nil && st.Header.ClusterId == clusterID {
			return u, true
		}
	}
	return "", false
}
