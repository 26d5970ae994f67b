package task

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// quorumLost is timed while the confirmed cluster has no quorum.
var quorumLost = condition{what: condQuorumLost}

// snapshotListEvery bounds how often a member without quorum lists the
// snapshot store.
const snapshotListEvery = 15 * time.Second

// snapshotListTimeout bounds one listing inside the loop: a store that
// accepts the connection and then stalls (an overloaded proxy, a
// black-holed route; the S3 client has no response-header timeout) would
// otherwise stop the loop of every member that lists, running ones too
// (no re-record, no summary heartbeat) for as long as it hangs (review
// rev19c F1). A listing that times out counts as unanswered.
var snapshotListTimeout = 5 * time.Second

// observeQuorumLoss fills the recovery inputs: how long quorum has been
// lost, the grace period, and the newest snapshot.
func (m *Member) observeQuorumLoss(ctx context.Context, o *planner.Observation, now time.Time) {
	o.RecoveryGrace = m.opts.Cluster.RecoveryGrace
	o.RecordMissingFor = m.heldSince.hold(condition{what: condRecordMissing}, o.Record == nil, now)
	m.observeSeeder(o, now)
	if o.Record == nil && !o.Running && o.Local.Empty {
		// No record and no data here: the store may hold the cluster's
		// snapshots, which a seed must not abandon (planner.seedFromSnapshot).
		m.heldSince.hold(quorumLost, false, now)
		m.observeLatestSnapshot(ctx, o, now)
		m.observeKnownHealthy(ctx, o, now) // the summary's members, the store's writers: Consul lost its state, a majority may serve
		return
	}
	if rec := o.Record; rec != nil && rec.ClusterID == 0 && rec.Seeder == o.Self.Name && !o.Running && o.Local.Empty {
		// This member's own unconfirmed seed or restore, with no data of
		// it: a newer snapshot means the incarnation ran and every copy
		// was lost since (planner.restoreOverOwnRecord).
		m.heldSince.hold(quorumLost, false, now)
		m.observeLatestSnapshot(ctx, o, now)
		m.observeKnownHealthy(ctx, o, now)
		return
	}
	if o.Record == nil && !o.Running && !o.Local.Empty && o.Local.ClusterID != 0 && !o.MembersKnown {
		// No record, stopped data, and its cluster does not answer: the
		// store may hold a newer epoch of the data's line, and a member
		// of it may serve unlisted (planner.supersededWithoutRecord).
		m.heldSince.hold(quorumLost, false, now)
		m.observeLatestSnapshot(ctx, o, now)
		m.observeKnownHealthy(ctx, o, now)
		return
	}
	if o.Record == nil && o.Running && !o.Local.Empty && o.Local.ClusterID != 0 && !o.MembersKnown {
		// No record, and this running member's cluster has no quorum:
		// the store may hold a newer epoch of the data's line (a
		// recovery from it ran, then Consul lost its state), and a
		// leaving member stops at once beside it rather than wait out
		// its leave with its old incarnation running (review rev18e F3;
		// planner.superseded: LineEpoch).
		m.heldSince.hold(quorumLost, false, now)
		m.observeLatestSnapshot(ctx, o, now)
		return
	}
	if o.MembersKnown || o.Record == nil || (o.Record.ClusterID == 0 && o.SeederGoneFor == 0) {
		m.heldSince.hold(quorumLost, false, now)
		if o.Running && !o.Local.Empty && o.Local.ClusterID != 0 && (o.Record == nil || o.Record.Epoch < o.Local.Epoch) {
			// A running member that re-records its epoch (no record,
			// or an older one): the store may hold a newer epoch of its
			// line, which that record would supersede (planner's
			// rerecordSuperseded, review rev18f F5).
			m.observeLatestSnapshot(ctx, o, now)
		}
		if rec := o.Record; rec != nil && rec.ClusterID == 0 && rec.Seeder == o.Self.Name {
			// A recovery of its own data it may resume: not beside a
			// voter it knows, nor below a newer snapshot
			// (invariant 10).
			m.observeKnownHealthy(ctx, o, now)
			if !o.Local.Empty {
				m.observeLatestSnapshot(ctx, o, now)
			}
		}
		return
	}
	if o.Record.ClusterID != 0 {
		o.QuorumLostFor = m.heldSince.hold(quorumLost, true, now)
	}
	m.observeLatestSnapshot(ctx, o, now)
	m.observeKnownHealthy(ctx, o, now)
}

// observeLatestSnapshot fills the newest snapshot, listing the store at
// most every snapshotListEvery. While the last listing failed, what the
// store holds is unknown: ListingUnanswered says why, with no snapshot
// nor refused object (the planner decides nothing on the store's
// contents then). Without a store there is nothing to list.
func (m *Member) observeLatestSnapshot(ctx context.Context, o *planner.Observation, now time.Time) {
	s := m.opts.Snapshots
	if s == nil {
		return
	}
	if now.Sub(m.snapshotListed) > snapshotListEvery {
		m.snapshotListed = now
		lctx, cancel := context.WithTimeout(ctx, snapshotListTimeout)
		list, refused, err := m.listSplit(lctx)
		cancel()
		m.snapshotListErr = err
		if err != nil {
			m.log.Warn("snapshot store unavailable during quorum loss", "error", err)
		} else {
			m.snapshotEpoch, m.lineEpochs = 0, map[string]uint64{}
			for _, meta := range list {
				m.snapshotEpoch = max(m.snapshotEpoch, meta.Epoch)
				if meta.Cluster == m.opts.Cluster.Name {
					m.lineEpochs[meta.ClusterID] = max(m.lineEpochs[meta.ClusterID], meta.Epoch)
				}
			}
			if s, ok := newestSnapshot(list, m.skipDeltas()); ok {
				lineage, foreign := m.lineageSnapshot(o.Record, list, s)
				m.latestSnapshot = lineage
				m.known.latestWriters = writersOf(list, s.Name)
				if foreign != nil {
					// Genuine, but of no incarnation of the record: data
					// that may exist beyond the lineage's, refused as an
					// object without a MAC is.
					refused = append(refused, *foreign)
				}
			}
			all := make([]snapshot.Meta, 0, len(list)+len(refused))
			all = append(all, list...)
			for _, r := range refused {
				all = append(all, r.meta)
			}
			m.refusedSnapshot = newestRefused(refused, all, m.opts.Cluster.Name)
		}
	}
	if !o.Local.Empty && o.Local.ClusterID != 0 {
		// A newer epoch under this data's cluster id is a recovery from
		// its line (planner's supersededLine). It holds while the
		// listing fails: lineEpochs is the last listing that answered,
		// and a snapshot of that epoch existed (review rev18f F4: a
		// listing that failed once hid it, and the data rejoined). Only
		// a listing that answers forgets it (an operator who deleted
		// that epoch's snapshots to keep this line).
		o.LineEpoch = m.lineEpochs[strconv.FormatUint(o.Local.ClusterID, 16)]
	}
	if m.snapshotListErr != nil {
		o.ListingUnanswered = m.snapshotListErr.Error()
		return
	}
	o.LatestSnapshot = m.latestSnapshot
	o.RefusedSnapshot = m.refusedSnapshot
	o.SnapshotEpoch = m.snapshotEpoch
}

// newestRefused is the newest object of cluster the member refused (the
// highest revision its chain reaches in the listing all, snapshot.Reach,
// then epoch), nil if none: data that may exist beyond what authenticates,
// which the planner never seeds or recovers past
// (planner.Observation.RefusedSnapshot). A refused snapshot reaches as far
// as any delta of it, those that authenticate included: an operator's
// adoption (snapshot.Adopt) that stopped part way leaves signed deltas
// whose snapshot is still refused, and their writes are in no chain a
// member replays. Its metadata is not vouched for: a store writer can
// raise it, which only makes the planner wait for an operator.
func newestRefused(refused []refusedObject, all []snapshot.Meta, cluster string) *planner.RefusedSnapshot {
	var best *refusedObject
	var bestReach int64
	for i, r := range refused {
		if r.meta.Cluster != cluster {
			continue
		}
		reach := snapshot.Reach(all, r.meta)
		if best == nil || reach > bestReach || reach == bestReach && r.meta.Epoch > best.meta.Epoch {
			best, bestReach = &refused[i], reach
		}
	}
	if best == nil {
		return nil
	}
	why := best.why.Error()
	switch {
	case errors.Is(best.why, snapshot.ErrUnauthenticated):
		why = "unauthenticated: no MAC"
	case errors.Is(best.why, snapshot.ErrForged):
		why = "forged: its MAC does not verify under this KEK"
	case errors.Is(best.why, snapshot.ErrCorruptMeta):
		why = "corrupt metadata: " + best.meta.Corrupt
	}
	rs := &planner.RefusedSnapshot{Name: best.meta.Name, Epoch: best.meta.Epoch, Revision: bestReach, Why: why, BaseRevision: best.meta.Revision,
		Corrupt: best.meta.Corrupt != "" || errors.Is(best.why, snapshot.ErrCorruptMeta)}
	if best.meta.Kind == snapshot.KindDelta {
		rs.Base, rs.BaseRevision = best.meta.Base, 0
		for _, m := range all {
			if m.Kind == snapshot.KindFull && m.Name == best.meta.Base {
				rs.BaseRevision = m.Revision
			}
		}
	}
	return rs
}

// writersOf are the members the metadata of the full snapshot name and
// of the newest segment of its delta chain name (their client URLs and
// cluster id): the one the snapshot was streamed from, and the one whose
// recorder wrote the segment (the leader of a few seconds before).
func writersOf(list []snapshot.Meta, name string) []knownMember {
	var out []knownMember
	add := func(what string, m snapshot.Meta) {
		if m.Endpoint != "" {
			id, _ := strconv.ParseUint(m.MemberID, 16, 64)
			out = append(out, knownMember{id: id, name: what + " " + m.Name, clientURLs: []string{m.Endpoint}, clusterID: m.ClusterID})
		}
	}
	for _, m := range list {
		if m.Name == name && m.Kind == snapshot.KindFull {
			add("taker of", m)
			if chain, _ := snapshot.Chain(list, m); len(chain) > 0 {
				add("recorder of", chain[len(chain)-1])
			}
		}
	}
	return out
}

// lineageSnapshot is s, the newest snapshot of list, when it is of rec's
// lineage (snapshot.Lineage.Of). Else it is nil, with s as a refused object
// (Observation.RefusedSnapshot, at its chain's end): a newer snapshot of
// another incarnation is never offered, nor an older one of this lineage
// in its place (it could be a Consul record restored from before that
// incarnation: only an operator can tell), and as with an object without
// a MAC the planner neither seeds nor starts from anything older beside
// it: it recovers from the members' data at or above its revision, or
// waits for an operator.
func (m *Member) lineageSnapshot(rec *planner.Record, list []snapshot.Meta, s *planner.SnapshotInfo) (*planner.SnapshotInfo, *refusedObject) {
	if rec == nil {
		return s, nil
	}
	for _, meta := range list {
		if meta.Name == s.Name {
			if why := lineageOf(rec).WhyNot(meta); why != "" {
				m.warnForeignOnce(s.Name, why)
				meta.Revision = s.Revision
				return nil, &refusedObject{meta: meta, why: fmt.Errorf("%w: cluster id %s, epoch %d (the record's: %x, %d)", errOtherIncarnation, meta.ClusterID, meta.Epoch, rec.ClusterID, rec.Epoch)}
			}
		}
	}
	return s, nil
}

// warnForeignOnce logs a snapshot of no incarnation of the record once,
// by name (with listAuthentic's refusals): the store is listed every
// snapshotListEvery while quorum is lost.
func (m *Member) warnForeignOnce(name, why string) {
	if m.backups.Refuse(name) {
		m.log.Warn("snapshot store: newest snapshot refused, never restored automatically", "snapshot", name, "why", why)
	}
}

// newestSnapshot is the newest full snapshot with the deltas that follow
// on from it: a recovery from it replays them, so it holds everything up
// to the chain's end. A segment an install found damaged ends the chain
// as a gap would (what follows it cannot be replayed): the planner
// compares the end a recovery can reach, never a higher one.
func newestSnapshot(list []snapshot.Meta, damaged map[string]bool) (*planner.SnapshotInfo, bool) {
	if len(damaged) > 0 {
		kept := make([]snapshot.Meta, 0, len(list))
		for _, m := range list {
			if !damaged[m.Name] {
				kept = append(kept, m)
			}
		}
		list = kept
	}
	full, _, end, ok := snapshot.Newest(list)
	if !ok {
		return nil, false
	}
	return &planner.SnapshotInfo{Name: full.Name, Revision: end, Epoch: full.Epoch}, true
}

// maxDamagedShared bounds the damaged segments a member names in its
// /status, and takes from each peer's.
const maxDamagedShared = 32

// takeDamaged takes the delta segments peers name damaged now (their
// /status) as peerDamaged: every member then sees the chain end where the
// member that read the damage saw it. Before, the member that found a
// damaged segment saw a survivor's data beat the snapshot and waited for
// that survivor to recover from it, while the survivor, seeing the whole
// chain, waited for that member to restore the snapshot: for good (sim
// seed 682 with CollectRunning). A peer's mark lasts while a peer names
// it: once none does (its finder forgot it, or is gone) the whole chain
// counts again (before, a peer's mark was kept for as long as the process
// ran: one false mark ended the chain for good). A change makes the next
// observation list the store again.
func (m *Member) takeDamaged(names []string) {
	now := map[string]bool{}
	for _, name := range names {
		now[name] = true
	}
	if !maps.Equal(now, m.peerDamaged) {
		m.snapshotListed = time.Time{}
	}
	m.peerDamaged = now
}

// skipDeltas is the delta segments left out of the chain: this member's
// own marks and its peers'.
func (m *Member) skipDeltas() map[string]bool {
	if len(m.peerDamaged) == 0 {
		return m.damagedDeltas
	}
	out := maps.Clone(m.peerDamaged)
	maps.Copy(out, m.damagedDeltas)
	return out
}

// observeSeeder fills SeederGoneFor: how long the seeder named by an
// unconfirmed recovery record has been missing from the provider's
// instances, so that a recovery whose seeder was lost can be taken over.
func (m *Member) observeSeeder(o *planner.Observation, now time.Time) {
	rec := o.Record
	listed := false
	if rec != nil {
		for _, in := range o.Instances {
			listed = listed || in.Name == rec.Seeder
		}
	}
	o.SeederGoneFor = m.heldSince.hold(condition{what: condSeederGone}, rec != nil && rec.ClusterID == 0 && !listed, now)
}

// recover carries out RecoverQuorum: the next epoch is recorded (fenced by
// the lock) before this member starts it, from its own data with
// ForceNewCluster or from a verified snapshot.
func (m *Member) recover(ctx context.Context, o planner.Observation, d planner.Decision) error {
	l, err := m.heldLock()
	if err != nil {
		return err
	}
	m.mu.Lock()
	cur := m.record
	m.mu.Unlock()
	if cur == nil && d.From != planner.FromSnapshot {
		return fmt.Errorf("recovery from data without a cluster record")
	}
	next := *d.Record
	if cur != nil {
		next = writeBack(*cur, next)
	}
	if d.From == planner.FromSnapshot {
		return m.recoverFromSnapshot(ctx, l, cur, next, d.Snapshot, planner.InstallWant(o, d, cur))
	}
	if cur.Token != next.Token {
		written, err := m.opts.Coordinator.UpdateRecord(ctx, l, next)
		if err != nil {
			return fmt.Errorf("record epoch %d: %w", next.Epoch, err)
		}
		m.setRecord(written)
		m.log.Warn("recovery recorded", "epoch", next.Epoch, "from", "this member's data")
	}
	m.stopEtcd()
	meta, err := m.dir.ReadMeta()
	if err != nil {
		return fmt.Errorf("read metadata: %w", err)
	}
	meta.ForceNewFrom(next.Token, next.Epoch)
	if err := m.dir.WriteMeta(meta); err != nil {
		return fmt.Errorf("write metadata: %w", err)
	}
	return m.start(meta.Name, "", "existing", m.initialCluster(meta.Name, nil))
}

func (m *Member) recoverFromSnapshot(ctx context.Context, l coord.Lock, cur *coord.Record, next coord.Record, name string, want int64) error {
	s := m.opts.Snapshots
	if s == nil {
		return fmt.Errorf("recovery from snapshot %s without a snapshot store", name)
	}
	src := datadir.Source{Store: s.Store, Encryption: s.Encryption, Name: name, Want: want, Skip: m.skipDeltas()}
	got, err := datadir.InstallNextEpoch(ctx, m.dir.Root, src, func(meta snapshot.Meta) (datadir.Incarnation, error) {
		if cur != nil && cur.Token != next.Token {
			// A recovery this member decides: from a snapshot of the
			// record's lineage only, whatever listing it was chosen from.
			// Under an operator's record (cur.Token == next.Token) the
			// snapshot is the one the record names, which the operator's
			// command chose with the same rule ("latest" is of the
			// lineage; another incarnation's only by name, and over
			// members' data only with -accept-data-loss): the record is
			// unconfirmed then (cluster id 0, which ties nothing) and
			// keeps no earlier cluster id, so the member has nothing of
			// its own to judge it by, and a Consul key writer, who could
			// write such a record, can name any genuine snapshot anyway.
			if why := (snapshot.Lineage{ClusterID: cur.ClusterID, Epoch: cur.Epoch}).WhyNot(meta); why != "" {
				return datadir.Incarnation{}, errors.New(why)
			}
		}
		if cur == nil || cur.Token != next.Token {
			// The next epoch is recorded before anything starts (invariant
			// 4); with no record at all (Consul lost its state, every member
			// its data) it is created, so a second restorer fails here.
			write := m.opts.Coordinator.UpdateRecord
			if cur == nil {
				write = m.opts.Coordinator.CreateRecord
			}
			written, err := write(ctx, l, next)
			if err != nil {
				return datadir.Incarnation{}, fmt.Errorf("record epoch %d: %w", next.Epoch, err)
			}
			m.setRecord(written)
			m.log.Warn("recovery recorded", "epoch", next.Epoch, "from", name, "revision", meta.Revision)
		}
		m.stopEtcd()
		return datadir.Incarnation{Cluster: m.opts.Cluster.Name, Name: m.opts.Name, PeerURL: m.peerURL(m.self),
			Token: next.Token, Epoch: next.Epoch, RevisionBump: m.backups.RevisionBump(ctx, meta)}, nil
	}, "recovered-over")
	if got.Gap {
		m.log.Warn("the delta chain after the snapshot has a gap: changes after it are not replayed", "snapshot", name, "deltas", len(got.Chain))
	}
	if got.Aside != "" {
		m.log.Warn("data dir set aside (not deleted) before restoring", "to", got.Aside)
	}
	var short *datadir.ChainShortError
	if errors.As(err, &short) {
		// Refused before anything was recorded: the planner decides
		// again from a chain that ends before the damaged segment.
		switch {
		case short.Damaged != "":
			if m.damagedDeltas == nil {
				m.damagedDeltas = map[string]bool{}
			}
			m.damagedDeltas[short.Damaged] = true
			m.mu.Lock()
			// Shared only when the object is what failed: a segment
			// that does not decrypt with this member's keys may be fine
			// for every other member (a wrong key here); a false mark
			// would end their chain too.
			if !short.Undecryptable && !slices.Contains(m.status.DamagedDeltas, short.Damaged) && len(m.status.DamagedDeltas) < maxDamagedShared {
				m.status.DamagedDeltas = append(m.status.DamagedDeltas, short.Damaged)
			}
			m.mu.Unlock()
		case len(m.damagedDeltas) > 0:
			// Short without a new damaged segment, while segments marked
			// damaged earlier were left out: the marks may be stale (an
			// object re-uploaded, a read that was what failed; an
			// operator's command verified the whole chain since). The next
			// try reads them again and marks what is still damaged.
			m.log.Warn("forgetting the delta segments marked damaged: the next try reads them again", "segments", len(m.damagedDeltas))
			m.damagedDeltas = nil
			m.mu.Lock()
			m.status.DamagedDeltas = nil
			m.mu.Unlock()
		}
		m.snapshotListed = time.Time{}
		m.log.Warn("recovery from snapshot refused before recording: its chain does not reach the revision it was chosen for", "snapshot", name, "want", short.Want, "verified_end", short.End, "damaged", short.Damaged, "why", short.Why)
		return err
	}
	if err == nil && len(got.Chain) > 0 {
		res := got.Replay
		m.log.Warn("deltas replayed over the snapshot", "segments", res.Segments, "events", res.Events, "txns", res.Txns, "keys_read_back", res.Keys, "last_revision", res.Last, "stopped", res.Stopped)
	}
	return err
}

func (m *Member) setRecord(r coord.Record) {
	m.mu.Lock()
	m.record = &r
	m.mu.Unlock()
}

// forceNewAllowed reports whether a ForceNew flag left in meta may still
// be honoured (invariant 10; TestStaleForceNewFlagIsNeverHonoured): only for the recovery this member recorded from
// its own data and that is not confirmed yet. Once the record is confirmed
// (or names another incarnation) a ForceNewCluster start would cut this
// member out of a cluster that has other members: it is refused.
func (m *Member) forceNewAllowed(meta datadir.Meta) bool {
	m.mu.Lock()
	rec := m.record
	m.mu.Unlock()
	return rec != nil && rec.ClusterID == 0 && rec.Source == planner.FromData && rec.Seeder == meta.Name &&
		rec.Token == meta.Token && rec.Epoch == meta.Epoch
}

// clearForceNew removes a ForceNew flag once etcd runs ready; called every
// loop, so a failed write in afterReady is retried until it sticks.
func (m *Member) clearForceNew() {
	m.mu.Lock()
	e := m.proc.Server()
	m.mu.Unlock()
	if e == nil {
		return
	}
	select {
	case <-e.Server.ReadyNotify():
	default:
		return
	}
	meta, err := m.dir.ReadMeta()
	if err != nil || !meta.ForceNew {
		return
	}
	meta.ForceNew, meta.SourceToken, meta.SourceEpoch, meta.SourceClusterID = false, "", 0, 0
	if err := m.dir.WriteMeta(meta); err != nil {
		m.log.Warn("clearing the ForceNew flag failed; retrying next loop", "error", err)
		return
	}
	m.log.Info("ForceNew flag cleared")
}
