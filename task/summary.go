package task

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// summaryState is the cluster summary this member last wrote.
type summaryState struct {
	last []byte    // last cluster summary written (without its time)
	at   time.Time // when it was written
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
	// BeatMS is the writer's summaryBeat in milliseconds (0 from a
	// writer before it was written: 5 s). A reader whose own beat is
	// shorter (members run different recovery_grace values while a job
	// update rolls) keeps the rewrite's leader named for four of the
	// writer's beats, the writer's grace (heldFor).
	BeatMS int64 `json:"beat_ms,omitempty"`
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

// publishSummary writes the summary (SideJobs.PublishSummary: this member
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
// or restored an older one meanwhile (invariant 10: an idle
// leader never wrote it again).
//
// The beat is a quarter of the recovery grace, as in the simulation
// (sim/world.go: 5 s beside a 20 s grace), between summaryBeatMin and
// summaryBeatMax: with the default grace (5 min) a leader writes it
// twice a minute, not twelve times (bench h.idle-api counted 12 of the
// 16 idle Consul requests a minute on the leader's host). With automatic
// recovery off the operator's recovery still reads it: summaryBeatMin.
func summaryBeat(recoveryGrace time.Duration) time.Duration {
	if recoveryGrace <= 0 {
		return summaryBeatMin
	}
	return min(max(recoveryGrace/4, summaryBeatMin), summaryBeatMax)
}

// heldFor is how long a reader with recovery grace grace names a leader
// after it saw the leader's summary rewritten, when the writer beats every
// writerBeat (Summary.BeatMS; 0 for a writer that did not say: 5 s): its
// own grace, or four of the writer's beats when those are slower than its
// own (review rev18a F1: a leader under the default 5 min grace beats
// every 30 s; a member already updated to a 20 s grace kept its name for
// 20 s, and recovered beside it in the 10 s of every 30 without a name).
// A writer's beat counts up to summaryBeatMax: a summary planted with a
// long one holds recoveries back no longer than 2 min.
func heldFor(grace, writerBeat time.Duration) time.Duration {
	if writerBeat <= 0 {
		writerBeat = summaryBeatMin
	}
	writerBeat = min(writerBeat, summaryBeatMax)
	if writerBeat <= summaryBeat(grace) {
		return grace
	}
	return max(grace, 4*writerBeat)
}

// notOverdue reports whether a summary a reader with recovery grace grace
// has read unchanged for unchanged, from a writer that beats every
// writerBeat, may still be rewritten by a serving leader, when that
// writer beats slower than the reader would: for two of its beats and
// summaryBeatMin. With one config everywhere it never holds (nothing
// changes: a rewrite alone names a leader, as the simulation models).
func notOverdue(grace, writerBeat, unchanged time.Duration) bool {
	writerBeat = min(writerBeat, summaryBeatMax)
	return writerBeat > summaryBeat(grace) && unchanged < 2*writerBeat+summaryBeatMin
}

const (
	summaryBeatMin = 5 * time.Second
	summaryBeatMax = 30 * time.Second
)

// writeSummary writes s when it changed since this member last wrote it,
// or summaryBeat after that write, with the time it is written.
func (m *Member) writeSummary(ctx context.Context, sw summaryWriter, s Summary) {
	view, err := json.Marshal(s)
	if err != nil || bytes.Equal(view, m.summary.last) && m.now().Sub(m.summary.at) < summaryBeat(m.opts.Cluster.RecoveryGrace) {
		return
	}
	s.Written = m.now().UTC()
	s.BeatMS = summaryBeat(m.opts.Cluster.RecoveryGrace).Milliseconds()
	b, err := json.Marshal(s)
	if err != nil {
		return
	}
	if err := sw.Put(ctx, "summary", b); err != nil {
		m.log.Debug("summary not written", "error", err)
		return
	}
	m.summary.last, m.summary.at = view, m.now()
}

// publishSummaryUnobserved writes the summary when the loop's observation
// failed (the provider does not answer: this host may be cut off from the
// Nomad servers while Nomad collects its allocation) and this member's
// server leads the cluster of the record it read last: the membership
// its own server knows, with the client URLs a member without data probes
// (observeKnownHealthy). Without it the summary kept naming members gone
// since, and an empty replacement recovered beside a collected majority
// that still served (sim seed 63 with CollectRunning). When the record it
// read last was none (Consul lost its state), it writes it for its own
// data's confirmed cluster (the metadata's cluster id is the server's):
// Nomad collected a leader right after it found no record, Consul then
// restored an older record and summary, and nothing a replacement read
// named the cluster that leader served (sim seed 1004733).
func (m *Member) publishSummaryUnobserved(ctx context.Context) {
	sw, ok := m.opts.Coordinator.(summaryWriter)
	m.mu.Lock()
	e, rec := m.proc.Server(), m.record
	m.mu.Unlock()
	if !ok || e == nil {
		return
	}
	srv := e.Server
	if srv.Leader() == 0 || srv.Leader() != srv.MemberID() {
		return
	}
	clusterID := uint64(srv.Cluster().ID())
	if rec == nil {
		meta, err := m.dir.ReadMeta()
		if err != nil || meta.Cluster != m.opts.Cluster.Name || meta.ClusterID == 0 || meta.ClusterID != clusterID {
			return
		}
		rec = &planner.Record{ClusterID: clusterID, Token: meta.Token, Epoch: meta.Epoch}
	}
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
