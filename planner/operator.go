package planner

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// OperatorView is what 'etcd-nomad recover' saw, under the lock: the
// record, and every provider instance's status.
type OperatorView struct {
	Record *Record
	// From is the member whose data the operator chose.
	From string
	// Answered are the statuses of the instances that answered (From
	// among them); Silent names those that did not.
	Answered []PeerStatus
	Silent   []string
	// NewToken is the token of the new incarnation.
	NewToken string
	// Snapshot, for a recovery from a snapshot (OperatorSnapshotRecovery),
	// is the snapshot the operator chose; From is then the member that
	// restores it. AcceptLoss lets it go ahead although members hold newer
	// data, which the new epoch then sets aside; with -keep-running
	// (OperatorKeepRunning), although the record's seeder holds its data
	// from a start that began and never completed (startedIncomplete).
	Snapshot   *SnapshotInfo
	AcceptLoss bool
	// Latest is the store's newest full snapshot (snapshot.Later) with
	// the end of its delta chain as listed; nil when the definition has
	// no store or the store holds none.
	Latest *SnapshotInfo
	// SnapshotEpoch is the highest epoch of any snapshot of the store
	// that authenticates, of the record's lineage or not (Latest is the
	// lineage's): the new epoch is recorded above it, as nextEpoch does
	// (invariant 9).
	SnapshotEpoch uint64
	// Beyond is the store's newest full snapshot that authenticates
	// outside the record's lineage (of an incarnation that ran after an
	// older record Consul restored: a recovery from the data's line),
	// with the end of its delta chain; nil if none. A recovery from a
	// member goes ahead beside it, when its chain reaches further than
	// the source (a put-back one below it holds nothing back), only
	// with AcceptLoss, as the command's refusedPast says, and the
	// record carries what the command saw of it (Record.Accepted): the
	// seeder's lineage under the new record takes it, and without that
	// it would wait for an operator again (laterWrites; review rev18c
	// N4).
	Beyond *SnapshotInfo
}

// OperatorRecovery decides an operator's recovery from From's data: the
// record to write (the next epoch, a recovery from data seeded by From,
// marked Operator), or why not. The fencing is the automatic path's
// (invariants 4 and 10): every instance answers, none is a healthy voter
// (no quorum answers anywhere), the source is no learner, and no member
// holds newer data — of a newer epoch, or of the same incarnation at a
// higher revision. What it does not require is the grace period, automatic
// recovery being on, or the source being the last confirmed incarnation:
// the operator chooses among incarnations the automatic path leaves alone.
func OperatorRecovery(v OperatorView) (Record, error) { return rules{}.OperatorRecovery(v) }

// OperatorRecovery decides like the package's OperatorRecovery with the
// rules f switches off.
func (f Faults) OperatorRecovery(v OperatorView) (Record, error) {
	if v.Record == nil {
		return Record{}, fmt.Errorf("there is no cluster record: members holding data re-record it themselves, and 'etcd-nomad snapshot restore' seeds from a snapshot")
	}
	if len(v.Silent) > 0 {
		return Record{}, fmt.Errorf("instance(s) %s do not answer: they may hold a quorum or newer data; not recovering (bring them back, or stop them for good so that the provider no longer lists them)", strings.Join(sorted(v.Silent), ", "))
	}
	var src *PeerStatus
	for i, p := range v.Answered {
		if p.Healthy {
			return Record{}, fmt.Errorf("member %s answers as a healthy voter of token %s epoch %d: a quorum answers; not recovering beside it", p.Name, short(p.Token), p.Epoch)
		}
		if p.Name == v.From {
			src = &v.Answered[i]
		}
	}
	if src == nil {
		return Record{}, fmt.Errorf("member %s is not among the provider's instances", v.From)
	}
	switch {
	case src.Token == "":
		return Record{}, fmt.Errorf("member %s holds no data", v.From)
	case src.Learner:
		return Record{}, fmt.Errorf("member %s holds a learner's data (revision %d): a learner may lack committed writes; choose a voter", v.From, src.Revision)
	}
	epoch := v.Record.plausibleTop() // never above a planted highest_epoch (invariant 9)
	var aside, names []string
	for _, p := range v.Answered {
		if p.Token == "" || p.Name == v.From {
			continue
		}
		// Data of a newer epoch whose ForceNewCluster start began and
		// never completed is a recovery that may have been overtaken (a
		// record Consul restored, the older line running on beside it):
		// the operator may keep the older line over it, setting it aside
		// like any other line's data, with -accept-data-loss (review
		// rev15d F3: no command freed the older line's voters, which wait
		// beside it). Any other newer epoch ran as a cluster: recover from it.
		startedNewer := p.ForceNewPending && !p.Unstarted && !p.Running
		if p.Epoch > src.Epoch && !startedNewer {
			return Record{}, fmt.Errorf("member %s holds epoch %d, newer than %s's epoch %d: recover from %s, or set its data aside first", p.Name, p.Epoch, v.From, src.Epoch, p.Name)
		}
		if p.Token == src.Token && p.Epoch == src.Epoch && p.Revision > src.Revision {
			return Record{}, fmt.Errorf("member %s holds the same incarnation at revision %d, newer than %s's %d: recover from %s", p.Name, p.Revision, v.From, src.Revision, p.Name)
		}
		// Data of another incarnation is set aside by the new epoch: an
		// older epoch at a higher revision, or another incarnation of the
		// source's epoch, may hold writes the source lacks.
		// Data whose recovery start began and never completed forked
		// from its source line at a revision it does not record: that
		// line may have run on (a record Consul restored), so any other
		// line's data may hold writes it lacks (invariant 10).
		forked := src.ForceNewPending && !src.Unstarted
		if p.Token != src.Token && (p.Epoch == src.Epoch || p.Revision > src.Revision || forked || p.Epoch > src.Epoch) {
			aside = append(aside, fmt.Sprintf("%s (token %s epoch %d, revision %d)", p.Name, short(p.Token), p.Epoch, p.Revision))
			names = append(names, p.Name)
		}
		epoch = max(epoch, p.Epoch)
	}
	var snaps []string
	if l := v.Latest; l != nil && f.operatorGuard(notBelowStore) && (l.Epoch > src.Epoch || l.Revision > src.Revision) {
		// The store's newest snapshot with its deltas goes further than
		// the source (as the automatic path compares them): it may hold
		// writes no member holds any more.
		snaps = append(snaps, l.Name)
	}
	// A snapshot beyond the lineage under the source's cluster id, of a
	// newer epoch than the source's, is of a line forked from it: its
	// revisions do not compare with the source's, whatever they say (review rev18f F2: one at 170 beside a
	// source at 177 went ahead without -accept-data-loss, and its
	// acceptance was recorded unasked).
	forkedFrom := func(b *SnapshotInfo) bool {
		return b.Epoch > src.Epoch && b.ClusterID != 0 && b.ClusterID == src.ClusterID && f.operatorGuard(acceptBeyondLineage)
	}
	if b := v.Beyond; b != nil && (b.Revision > src.Revision || forkedFrom(b)) && !v.AcceptLoss && f.operatorGuard(notBelowStore) {
		return Record{}, &LossError{Members: sorted(names), Snapshots: []string{b.Name}, Revision: src.Revision, msg: fmt.Sprintf("the store holds %s (epoch %d, its chain reaching revision %d) outside the record's lineage, which may hold writes %s (revision %d) lacks: restore it by name, or run again with -accept-data-loss to recover from %s all the same (it stays in the store)",
			b.Name, b.Epoch, b.Revision, v.From, src.Revision, v.From)}
	}
	if (len(aside) > 0 || len(snaps) > 0) && !v.AcceptLoss {
		sort.Strings(aside)
		var msg string
		switch srcText := fmt.Sprintf("%s (token %s epoch %d, revision %d)", v.From, short(src.Token), src.Epoch, src.Revision); {
		case len(snaps) == 0:
			msg = fmt.Sprintf("the recovery from %s would set aside the data of %s, another incarnation that may hold writes %s lacks: run again with -accept-data-loss to go ahead (that data is set aside, not deleted)",
				srcText, strings.Join(aside, ", "), v.From)
		case len(aside) == 0:
			msg = fmt.Sprintf("the store's newest snapshot %s (epoch %d, revision %d with its deltas) may hold writes %s lacks: recover -from snapshot:%s instead, or run again with -accept-data-loss to go ahead (the snapshot stays in the store)",
				v.Latest.Name, v.Latest.Epoch, v.Latest.Revision, srcText, v.Latest.Name)
		default:
			msg = fmt.Sprintf("the recovery from %s would set aside the data of %s, another incarnation that may hold writes %s lacks, and the store's newest snapshot %s (epoch %d, revision %d with its deltas) may hold writes it lacks too: run again with -accept-data-loss to go ahead (that data is set aside, not deleted; the snapshot stays in the store)",
				srcText, strings.Join(aside, ", "), v.From, v.Latest.Name, v.Latest.Epoch, v.Latest.Revision)
		}
		return Record{}, &LossError{Members: sorted(names), Snapshots: snaps, Revision: src.Revision, msg: msg}
	}
	epoch = max(epoch, src.Epoch)
	if v.Latest != nil {
		// Above the store's newest snapshot too, as nextEpoch is: the
		// snapshots are ordered by epoch first, so one of a higher epoch
		// would stay "newest" over every write of the new line and a
		// later recovery would restore it over them (invariant 9).
		epoch = max(epoch, v.Latest.Epoch)
	}
	epoch = max(epoch, v.SnapshotEpoch)
	if f.operatorGuard(aboveMetaEpochs) {
		epoch = max(epoch, answeredMetaEpoch(v.Answered, f.metaReach(epoch)))
	}
	if err := roomAbove(epoch); err != nil {
		return Record{}, err
	}
	// What the command saw of each line, as a snapshot recovery records
	// it: the source (and snapshots of its epoch) up to its revision,
	// each other member's line, the store's newest snapshot. Data or a
	// snapshot beyond it when the recovery resumes was written after the
	// record, by a cluster the command did not see (sim seed 1018653:
	// laterWrites).
	accepted := []AcceptedLine{{Token: src.Token, Epoch: src.Epoch, Revision: src.Revision}, {Epoch: src.Epoch, Revision: src.Revision}}
	for _, p := range v.Answered {
		if p.Token != "" {
			accepted = acceptLine(accepted, AcceptedLine{Token: p.Token, Epoch: p.Epoch, Revision: p.Revision})
		}
	}
	if l := v.Latest; l != nil {
		accepted = acceptLine(accepted, AcceptedLine{Epoch: l.Epoch, Revision: l.Revision})
	}
	if b := v.Beyond; b != nil && f.operatorGuard(acceptBeyondLineage) && (v.AcceptLoss || !forkedFrom(b)) {
		accepted = acceptLine(accepted, AcceptedLine{Epoch: b.Epoch, Revision: b.Revision})
	}
	return Record{Token: v.NewToken, Epoch: epoch + 1, Seeder: v.From, Source: FromData,
		LastConfirmedToken: src.Token, LastConfirmedEpoch: src.Epoch, Operator: true, Accepted: accepted, AcceptedRevision: narrowest(accepted)}, nil
}

// answeredMetaEpoch is the highest epoch a member's metadata names
// without data (PeerStatus.MetaEpoch), as the automatic path's
// aboveOwnMeta counts it: a record of that epoch existed before Consul
// lost or rolled it back, and a voter of it Nomad collected may still run
// (review rev18c N3). One too close to 2^64 counts for nothing, as there,
// and so does one more than maxEpochAhead above known, the highest epoch
// otherwise known (the record's plausible top, data and snapshot epochs;
// at least 1): etcd-nomad records one epoch above the last it knows, so
// an answer that far ahead was not written by it (one forged /status
// answer would otherwise push every later epoch to the top for good;
// review rev19d W1). known = math.MaxUint64 leaves only the first bound.
func answeredMetaEpoch(answered []PeerStatus, known uint64) uint64 {
	var e uint64
	for _, p := range answered {
		if p.Token == "" && p.MetaEpoch <= math.MaxUint64-maxEpochAhead && metaWithinReach(p.MetaEpoch, known) {
			e = max(e, p.MetaEpoch)
		}
	}
	return e
}

// metaWithinReach reports whether epoch e lies at most maxEpochAhead
// above known (at least 1).
func metaWithinReach(e, known uint64) bool {
	known = max(known, 1)
	return known > math.MaxUint64-maxEpochAhead || e <= known+maxEpochAhead
}

// ignoredMetaEpochs names the answers whose metadata answeredMetaEpoch
// leaves out for lying too far above known: a reason says so.
func ignoredMetaEpochs(answered []PeerStatus, known uint64) string {
	var out []string
	for _, p := range answered {
		if p.Token == "" && p.MetaEpoch != 0 && (p.MetaEpoch > math.MaxUint64-maxEpochAhead || !metaWithinReach(p.MetaEpoch, known)) {
			out = append(out, fmt.Sprintf("%s's epoch %d", p.Name, p.MetaEpoch))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return fmt.Sprintf(" (ignoring the metadata of %s: more than %d above every epoch otherwise known, %d; not written by etcd-nomad)", strings.Join(out, ", "), maxEpochAhead, max(known, 1))
}

// metaReach is the known bound answeredMetaEpoch takes under f: known,
// or no bound with the rule switched off.
func (f Faults) metaReach(known uint64) uint64 {
	if !f.recoveryGuard(peersMetaWithinReach) {
		return math.MaxUint64
	}
	return known
}

// roomAbove refuses a new epoch above epoch that would come too close to
// 2^64 (Record.implausibleTop): epochs never wrap.
func roomAbove(epoch uint64) error {
	if epoch > math.MaxUint64-maxEpochAhead {
		return fmt.Errorf("the highest epoch seen, %d, leaves no room for a next epoch below 2^64: not recording one (an epoch that high was not written by etcd-nomad; correct the record in Consul by hand)", epoch)
	}
	return nil
}

// NextEpochAbove is the epoch a restore by hand (`snapshot restore`)
// records over r beside a snapshot of epoch e: above r's plausible top
// and e, never wrapping (invariant 9: it took a planted
// highest_epoch as it was).
func (r *Record) NextEpochAbove(e uint64) (uint64, error) {
	top := max(r.plausibleTop(), e)
	if err := roomAbove(top); err != nil {
		return 0, err
	}
	return top + 1, nil
}

// HandRestoreEpoch is the epoch a restore by hand ('etcd-nomad snapshot
// restore') records over r (the zero record when there is none) for a
// snapshot of epoch e, beside the members that answered: above r's
// plausible top and e (NextEpochAbove), and above every epoch a member's
// data or its metadata without data names (review rev18c N3: Consul lost
// or rolled back that epoch's record, and a voter of it Nomad collected
// may run on; a member holding data of a higher epoch would re-record it
// over the restore, epochs only growing, and set the restore aside).
func HandRestoreEpoch(r *Record, e uint64, answered []PeerStatus) (uint64, error) {
	return rules{}.HandRestoreEpoch(r, e, answered)
}

// HandRestoreEpoch decides like the package's HandRestoreEpoch with the
// rules f switches off.
func (f Faults) HandRestoreEpoch(r *Record, e uint64, answered []PeerStatus) (uint64, error) {
	if f.operatorGuard(aboveMetaEpochs) {
		// A member's data epoch, as its metadata's, counts within
		// maxEpochAhead of what the record and the snapshot name (review
		// rev19d W1, W4): an answer further ahead was not written by
		// etcd-nomad.
		known := max(r.plausibleTop(), e)
		reach := f.metaReach(known)
		for _, p := range answered {
			if p.Token != "" && p.Epoch <= math.MaxUint64-maxEpochAhead && metaWithinReach(p.Epoch, reach) {
				e = max(e, p.Epoch)
			}
		}
		e = max(e, answeredMetaEpoch(answered, f.metaReach(max(known, e))))
	}
	return r.NextEpochAbove(e)
}

// OperatorSnapshotRecovery decides an operator's recovery from a stored
// snapshot (v.Snapshot), restored by member v.From: the record to write
// (the next epoch, Source the snapshot, marked Operator so that it
// proceeds while paused and its seeder never trades it for a newer
// snapshot), or why not. The fencing is OperatorRecovery's: every
// instance answers and none is a healthy voter. Invariant 4 (recover from
// the highest revision known): it refuses while any member holds data
// newer than the snapshot (of a newer epoch, or of the snapshot's epoch at
// a higher revision; any member's data when the snapshot is of another
// incarnation than the record's, v.Snapshot.Foreign), naming the member
// to recover from instead, unless the operator accepts losing it (v.AcceptLoss: the new epoch sets that
// data aside; nothing is deleted).
func OperatorSnapshotRecovery(v OperatorView) (Record, error) {
	return rules{}.OperatorSnapshotRecovery(v)
}

// OperatorSnapshotRecovery decides like the package's
// OperatorSnapshotRecovery with the rules f switches off.
func (f Faults) OperatorSnapshotRecovery(v OperatorView) (Record, error) {
	s := v.Snapshot
	if s == nil {
		return Record{}, fmt.Errorf("no snapshot chosen")
	}
	if v.Record == nil {
		return Record{}, fmt.Errorf("there is no cluster record: members holding data re-record it themselves, and members with no data restore the newest snapshot on their own")
	}
	if len(v.Silent) > 0 {
		return Record{}, fmt.Errorf("instance(s) %s do not answer: they may hold a quorum or newer data; not recovering (bring them back, or stop them for good so that the provider no longer lists them)", strings.Join(sorted(v.Silent), ", "))
	}
	seeder := false
	epoch := max(v.Record.plausibleTop(), s.Epoch)
	// What the command sees of each line, the snapshot's own (by its
	// epoch: it carries no token) first.
	accepted := []AcceptedLine{{Epoch: s.Epoch, Revision: s.Revision}}
	var newer, names []string
	for _, p := range v.Answered {
		if p.Healthy {
			return Record{}, fmt.Errorf("member %s answers as a healthy voter of token %s epoch %d: a quorum answers; not recovering beside it", p.Name, short(p.Token), p.Epoch)
		}
		seeder = seeder || p.Name == v.From
		if p.Token == "" {
			continue
		}
		epoch = max(epoch, p.Epoch)
		accepted = acceptLine(accepted, AcceptedLine{Token: p.Token, Epoch: p.Epoch, Revision: p.Revision})
		// A snapshot of another incarnation (s.Foreign) is no later state
		// of any member's data, whatever its epoch: every member's data
		// counts as newer.
		if s.Foreign || p.Epoch > s.Epoch || p.Epoch == s.Epoch && p.Revision > s.Revision {
			newer = append(newer, fmt.Sprintf("%s (epoch %d, revision %d)", p.Name, p.Epoch, p.Revision))
			names = append(names, p.Name)
		}
	}
	if !seeder {
		return Record{}, fmt.Errorf("member %s is not among the provider's instances", v.From)
	}
	var short shortfall
	if f.operatorGuard(notBelowReplacedRestore) {
		short = replacedShortfall(v.Record, s)
	}
	if len(newer) > 0 && !v.AcceptLoss && s.Foreign {
		return Record{}, short.add(&LossError{Members: sorted(names), Revision: s.Revision, msg: fmt.Sprintf("snapshot %s (epoch %d, revision %d) is of another incarnation than the cluster record's, and member(s) %s hold data of the record's: recover from a member with -from MEMBER, "+
			"or accept setting their data aside for it with -accept-data-loss (nothing is deleted)", s.Name, s.Epoch, s.Revision, strings.Join(sorted(newer), ", "))})
	}
	var snaps []string
	if l := v.Latest; l != nil && l.Name != s.Name && f.operatorGuard(notBelowStore) && (l.Epoch > s.Epoch || l.Revision > s.Revision) {
		snaps = append(snaps, l.Name)
	}
	if len(newer) > 0 && !v.AcceptLoss {
		return Record{}, short.add(&LossError{Members: sorted(names), Snapshots: snaps, Revision: s.Revision, msg: fmt.Sprintf("member(s) %s hold data newer than snapshot %s (epoch %d, revision %d): recover from a member with -from MEMBER, "+
			"or accept losing the newer writes with -accept-data-loss (the new epoch sets that data aside, nothing is deleted)", strings.Join(sorted(newer), ", "), s.Name, s.Epoch, s.Revision)})
	}
	if len(snaps) > 0 {
		// Accepted with the loss (below): its writes are not "after the
		// record" for the seeder (laterWrites).
		accepted = acceptLine(accepted, AcceptedLine{Epoch: v.Latest.Epoch, Revision: v.Latest.Revision})
	}
	if len(snaps) > 0 && !v.AcceptLoss {
		return Record{}, short.add(&LossError{Snapshots: snaps, Revision: s.Revision, msg: fmt.Sprintf("the store's newest snapshot %s (epoch %d, revision %d with its deltas) is newer than snapshot %s (epoch %d, revision %d): recover -from snapshot:%s (or snapshot:latest), "+
			"or accept losing the newer writes with -accept-data-loss (the snapshot stays in the store)", v.Latest.Name, v.Latest.Epoch, v.Latest.Revision, s.Name, s.Epoch, s.Revision, v.Latest.Name)})
	}
	if short.rev > 0 && !v.AcceptLoss {
		return Record{}, short.add(&LossError{Revision: s.Revision, msg: "run again with -accept-data-loss to go ahead"})
	}
	if v.Latest != nil {
		epoch = max(epoch, v.Latest.Epoch) // as for a recovery from a member
	}
	epoch = max(epoch, v.SnapshotEpoch)
	if f.operatorGuard(aboveMetaEpochs) {
		epoch = max(epoch, answeredMetaEpoch(v.Answered, f.metaReach(epoch)))
	}
	if err := roomAbove(epoch); err != nil {
		return Record{}, err
	}
	lastToken, lastEpoch := v.Record.lastConfirmed()
	return Record{Token: v.NewToken, Epoch: epoch + 1, Seeder: v.From, Source: SnapshotSource(s.Name),
		LastConfirmedToken: lastToken, LastConfirmedEpoch: lastEpoch, Operator: true, SourceRevision: s.Revision, Accepted: accepted, AcceptedRevision: narrowest(accepted)}, nil
}

// acceptLine adds a to what an operator's command accepted: one entry per
// line (token; a snapshot's by its epoch), at the highest revision seen.
func acceptLine(lines []AcceptedLine, a AcceptedLine) []AcceptedLine {
	for i, l := range lines {
		if l.Token == a.Token && (a.Token != "" || l.Epoch == a.Epoch) {
			lines[i].Revision = max(l.Revision, a.Revision)
			lines[i].Epoch = max(l.Epoch, a.Epoch)
			return lines
		}
	}
	return append(lines, a)
}

// narrowest is the one-number bound a record with per-line acceptance
// carries for members of an older release (Record.AcceptedRevision): the
// lowest revision accepted of any line, at least 1 (0 means no bound).
func narrowest(lines []AcceptedLine) int64 {
	n := int64(0)
	for i, l := range lines {
		if i == 0 || l.Revision < n {
			n = l.Revision
		}
	}
	return max(n, 1)
}

// OperatorKeepRunning decides 'etcd-nomad recover -keep-running': a
// cluster runs with a quorum beside an unconfirmed record of another
// incarnation (Consul brought back a restore or recovery record, or an
// operator's restore record was written while the old cluster regained
// its quorum), and every member waits: the running members keep their
// data (invariant 9: only a confirmed newer record sets it aside), the
// record's seeder never starts beside a quorum (invariant 10), and
// 'recover' refuses beside a quorum. The record to write names the
// running incarnation, confirmed (its token, epoch and cluster id), or
// why not. Fenced as the automatic path would need it: a quorum of the
// provider's instances answers as healthy voters of one incarnation (one
// token, epoch and cluster id) and no member answers as a healthy voter of
// another; every instance answers; the record is not confirmed and
// names another incarnation; no member holds data of the record's
// incarnation (it never started: nothing of it is lost; or, with
// AcceptLoss, its seeder's start began and never completed) nor of an epoch
// newer than the running one's (that data would be older than a record it
// then re-records over, invariant 9: recover from it instead).
func OperatorKeepRunning(v OperatorView) (Record, error) { return rules{}.OperatorKeepRunning(v) }

// OperatorKeepRunning decides like the package's OperatorKeepRunning with
// the rules f switches off.
func (f Faults) OperatorKeepRunning(v OperatorView) (Record, error) {
	rec := v.Record
	if rec == nil {
		return Record{}, fmt.Errorf("there is no cluster record: members holding data re-record it themselves")
	}
	type line struct {
		token string
		epoch uint64
		id    uint64
	}
	healthy := map[line][]string{}
	var lines []line
	for _, p := range v.Answered {
		if !p.Healthy || p.Learner || p.Token == "" {
			continue
		}
		l := line{p.Token, p.Epoch, p.ClusterID}
		if healthy[l] == nil {
			lines = append(lines, l)
		}
		healthy[l] = append(healthy[l], p.Name)
	}
	n := len(v.Answered) + len(v.Silent)
	if len(lines) > 1 {
		return Record{}, fmt.Errorf("members answer as healthy voters of %d incarnations: not choosing between them", len(lines))
	}
	if len(lines) == 0 || len(healthy[lines[0]]) < Quorum(n) && f.operatorGuard(keepOnlyAQuorum) {
		got := 0
		if len(lines) > 0 {
			got = len(healthy[lines[0]])
		}
		return Record{}, fmt.Errorf("no quorum of a running cluster answers (%d of %d instances answer as its healthy voters, %d needed): nothing to keep; 'etcd-nomad recover -from MEMBER|snapshot:NAME' recovers", got, n, Quorum(n))
	}
	run := lines[0]
	if run.id == 0 {
		return Record{}, fmt.Errorf("the healthy voters of token %s epoch %d report no cluster id: not recording it", short(run.token), run.epoch)
	}
	if len(v.Silent) > 0 {
		return Record{}, fmt.Errorf("instance(s) %s do not answer: they may hold data of the recorded incarnation; not recording over it (bring them back, or stop them for good so that the provider no longer lists them)", strings.Join(sorted(v.Silent), ", "))
	}
	if rec.Token == run.token && rec.Epoch == run.epoch {
		return keepOverStartedNewer(rec, run.id, v)
	}
	if rec.ClusterID != 0 {
		return Record{}, fmt.Errorf("the record names cluster %x (token %s epoch %d), confirmed: it ran, and members follow it (an older record is re-recorded by the newer data's members); not recording over it", rec.ClusterID, short(rec.Token), rec.Epoch)
	}
	for _, p := range v.Answered {
		switch {
		case p.Token == "":
		case p.Token == rec.Token && neverStarted(rec, p, run.token, run.epoch, healthy[run], v.Answered):
			// The seeder of a recovery from data rewrote its metadata
			// and stopped before its ForceNewCluster start: its data is
			// a prefix of the running source line, set aside under the
			// rewritten record at no loss (invariant 10). Or the
			// restorer installed the snapshot and never started it: a
			// copy of what the store keeps (invariant 10).
		case p.Token == rec.Token && startedIncomplete(rec, p, run.token, run.epoch) && v.AcceptLoss:
			// Its start began and never completed (invariant 10): the
			// operator accepts losing what it may hold; the
			// record carries its epoch (HighestEpoch), and its member
			// sets it aside.
		case p.Token == rec.Token && startedIncomplete(rec, p, run.token, run.epoch):
			return Record{}, fmt.Errorf("member %s holds data of the recorded epoch %d (token %s, revision %d) whose start began and never completed: it may hold writes acknowledged while it ran; run again with -accept-data-loss to record the running cluster and set %s's data aside", p.Name, rec.Epoch, short(rec.Token), p.Revision, p.Name)
		case p.Token == rec.Token:
			return Record{}, fmt.Errorf("member %s holds data of the recorded epoch %d (token %s, revision %d): it started; not recording over it", p.Name, rec.Epoch, short(rec.Token), p.Revision)
		case p.Epoch > run.epoch:
			return Record{}, fmt.Errorf("member %s holds epoch %d (token %s, revision %d), newer than the running cluster's epoch %d: recording the older one over it would go back; recover from it (-from %s) or set its data aside first", p.Name, p.Epoch, short(p.Token), p.Revision, run.epoch, p.Name)
		}
	}
	seeder := sorted(healthy[run])[0]
	// The replaced record's epoch (or a higher one it carried) stays the
	// floor of every later epoch: whatever it left behind is of that epoch
	// (invariant 9).
	return Record{ClusterID: run.id, Token: run.token, Epoch: run.epoch, Seeder: seeder, HighestEpoch: rec.carried(run.epoch)}, nil
}

// neverStarted reports whether p's data of rec's epoch is its seeder's
// recovery from data whose ForceNewCluster start never happened
// (PeerStatus.ForceNewPending), recorded from the running line (token,
// epoch) that voters answer for at a revision at least p's: the data is a
// prefix of what the running cluster holds. Or its restorer's installed
// copy of a snapshot, recorded from the running line, that never started
// (PeerStatus.Unstarted): the store keeps what it holds.
func neverStarted(rec *Record, p PeerStatus, token string, epoch uint64, voters []string, answered []PeerStatus) bool {
	if rec.Source != FromData && rec.Source != "" {
		// An installed restore that never started (the start marks it
		// before etcd runs), recorded beside the running line.
		return p.Unstarted && !p.Running && rec.ClusterID == 0 && rec.Seeder == p.Name && p.Epoch == rec.Epoch && sourceLine(rec, token, epoch)
	}
	if !p.ForceNewPending || !p.Unstarted || p.Running || rec.ClusterID != 0 || rec.Source != FromData || rec.Seeder != p.Name || p.Epoch != rec.Epoch || !sourceLine(rec, token, epoch) {
		return false
	}
	for _, q := range answered {
		if slices.Contains(voters, q.Name) && q.Revision >= p.Revision {
			return true
		}
	}
	return false
}

// keepOverStartedNewer is 'recover -keep-running' when the record already
// names the running cluster: a member that holds data of a newer epoch
// whose ForceNewCluster start began and never completed waits under it
// (the record is an older one Consul restored; the data may hold writes
// acknowledged while it ran: invariant 10). With -accept-data-loss
// the record is written again carrying that epoch as HighestEpoch, under
// which the member sets its data aside; without, the command names it.
func keepOverStartedNewer(rec *Record, id uint64, v OperatorView) (Record, error) {
	var newer []string
	top := rec.top()
	for _, p := range v.Answered {
		if p.ForceNewPending && !p.Unstarted && !p.Running && p.Epoch > rec.top() {
			newer = append(newer, fmt.Sprintf("%s (epoch %d, token %s, revision %d)", p.Name, p.Epoch, short(p.Token), p.Revision))
			top = max(top, p.Epoch)
		}
	}
	if len(newer) == 0 || rec.ClusterID != id {
		return Record{}, fmt.Errorf("the record already names the running cluster (token %s epoch %d): members confirm it themselves", short(rec.Token), rec.Epoch)
	}
	if !v.AcceptLoss {
		return Record{}, fmt.Errorf("member(s) %s hold data of a newer epoch whose start began and never completed: it may hold writes acknowledged while it ran; 'etcd-nomad recover -from MEMBER' recovers from it, or run again with -accept-data-loss to keep the running cluster and set that data aside", strings.Join(sorted(newer), ", "))
	}
	kept := *rec
	kept.HighestEpoch = top
	return kept, nil
}

// startedIncomplete reports whether p's data of rec's epoch is its
// seeder's recovery (from data, or an installed restore) recorded from
// the running line (token, epoch), whose start began and never completed
// (PeerStatus.ForceNewPending, or a restore with no member id; the cluster
// id never written) and that does not run: it may hold writes
// acknowledged while it ran, which only -accept-data-loss sets aside.
func startedIncomplete(rec *Record, p PeerStatus, token string, epoch uint64) bool {
	if p.Running || rec.ClusterID != 0 || rec.Seeder != p.Name || p.Epoch != rec.Epoch || p.ClusterID != 0 || rec.Source == "" || !sourceLine(rec, token, epoch) {
		return false
	}
	if rec.Source == FromData {
		return p.ForceNewPending
	}
	return p.MemberID == 0
}

// shortfall is what replacing an unconfirmed restore record loses
// (replacedShortfall): the revisions from its new source's end + 1 to
// rev, which the replaced record's command verified its source to reach.
type shortfall struct {
	rev  int64
	text string
}

// replacedShortfall is the shortfall of replacing rec with a restore of
// s: rec is a restore not confirmed yet (cluster id 0) whose command
// verified its source to a revision above s's (SourceRevision), as when
// a segment of the chain an operator's first restore verified was found
// damaged since, and the way out restores the same snapshot to its
// shorter end (sim seed 121: verified to 545, then to 540; 541..545 sat
// only in the seeder's set-aside copy, and the second command named
// neither). Zero when nothing is short.
func replacedShortfall(rec *Record, s *SnapshotInfo) shortfall {
	if rec == nil || rec.ClusterID != 0 || rec.SourceRevision <= s.Revision {
		return shortfall{}
	}
	return shortfall{rev: rec.SourceRevision, text: fmt.Sprintf("the record it replaces, epoch %d (not confirmed), restores %s verified to revision %d: snapshot %s reaches revision %d, so revisions %d..%d are lost (the seeder of that record, %s, may hold them in data it set aside)",
		rec.Epoch, rec.Source, rec.SourceRevision, s.Name, s.Revision, s.Revision+1, rec.SourceRevision, rec.Seeder)}
}

// add names the shortfall in e, a refusal: its revisions are what the
// operator accepts to lose too with -accept-data-loss.
func (sf shortfall) add(e *LossError) *LossError {
	if sf.rev == 0 {
		return e
	}
	e.ReplacedRevision = sf.rev
	e.msg = sf.text + "; " + e.msg
	return e
}

// LossError is the refusal of an operator's recovery that would leave
// out writes its source may lack (OperatorRecovery,
// OperatorSnapshotRecovery without AcceptLoss): Members names the members
// whose data the new epoch would set aside, Snapshots the store's newer
// snapshot; their writes beyond the source are what the operator accepts
// to lose by running the command again with -accept-data-loss.
type LossError struct {
	Members   []string
	Snapshots []string
	// ReplacedRevision, when not 0, is the revision the replaced record
	// (an unconfirmed restore) was verified to reach, above the new
	// source's end: the revisions between are lost too.
	ReplacedRevision int64
	// Revision is the revision the refused recovery's source reaches (the
	// member's data, or the snapshot with its verified chain): copies of
	// data members set aside beyond it may hold what it loses (the
	// command names them).
	Revision int64
	msg      string
}

func (e *LossError) Error() string { return e.msg }

// Restorer is the member that restores an operator's snapshot when the
// command names none ('recover -from snapshot:NAME' without -member): the
// first answering instance by name, "" when none answers.
func Restorer(v OperatorView) string {
	var names []string
	for _, p := range v.Answered {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

func sorted(xs []string) []string {
	out := append([]string(nil), xs...)
	sort.Strings(out)
	return out
}
