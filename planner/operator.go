package planner

import (
	"fmt"
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
	// data, which the new epoch then sets aside.
	Snapshot   *SnapshotInfo
	AcceptLoss bool
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
func OperatorRecovery(v OperatorView) (Record, error) {
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
	epoch := v.Record.Epoch
	var aside []string
	for _, p := range v.Answered {
		if p.Token == "" || p.Name == v.From {
			continue
		}
		if p.Epoch > src.Epoch {
			return Record{}, fmt.Errorf("member %s holds epoch %d, newer than %s's epoch %d: recover from %s, or set its data aside first", p.Name, p.Epoch, v.From, src.Epoch, p.Name)
		}
		if p.Token == src.Token && p.Epoch == src.Epoch && p.Revision > src.Revision {
			return Record{}, fmt.Errorf("member %s holds the same incarnation at revision %d, newer than %s's %d: recover from %s", p.Name, p.Revision, v.From, src.Revision, p.Name)
		}
		// Data of another incarnation is set aside by the new epoch: an
		// older epoch at a higher revision, or another incarnation of the
		// source's epoch, may hold writes the source lacks.
		if p.Token != src.Token && (p.Epoch == src.Epoch || p.Revision > src.Revision) {
			aside = append(aside, fmt.Sprintf("%s (token %s epoch %d, revision %d)", p.Name, short(p.Token), p.Epoch, p.Revision))
		}
		epoch = max(epoch, p.Epoch)
	}
	if len(aside) > 0 && !v.AcceptLoss {
		sort.Strings(aside)
		return Record{}, fmt.Errorf("the recovery from %s (token %s epoch %d, revision %d) would set aside the data of %s, another incarnation that may hold writes %s lacks: run again with -accept-data-loss to go ahead (that data is set aside, not deleted)",
			v.From, short(src.Token), src.Epoch, src.Revision, strings.Join(aside, ", "), v.From)
	}
	epoch = max(epoch, src.Epoch)
	return Record{Token: v.NewToken, Epoch: epoch + 1, Seeder: v.From, Source: FromData,
		LastConfirmedToken: src.Token, LastConfirmedEpoch: src.Epoch, Operator: true}, nil
}

// OperatorSnapshotRecovery decides an operator's recovery from a stored
// snapshot (v.Snapshot), restored by member v.From: the record to write
// (the next epoch, Source the snapshot, marked Operator so that it
// proceeds while paused and its seeder never trades it for a newer
// snapshot), or why not. The fencing is OperatorRecovery's: every
// instance answers and none is a healthy voter. Invariant 4 (recover from
// the highest revision known): it refuses while any member holds data
// newer than the snapshot (of a newer epoch, or of the snapshot's epoch at
// a higher revision), naming the member to recover from instead, unless
// the operator accepts losing it (v.AcceptLoss: the new epoch sets that
// data aside; nothing is deleted).
func OperatorSnapshotRecovery(v OperatorView) (Record, error) {
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
	epoch := max(v.Record.Epoch, s.Epoch)
	var newer []string
	for _, p := range v.Answered {
		if p.Healthy {
			return Record{}, fmt.Errorf("member %s answers as a healthy voter of token %s epoch %d: a quorum answers; not recovering beside it", p.Name, short(p.Token), p.Epoch)
		}
		seeder = seeder || p.Name == v.From
		if p.Token == "" {
			continue
		}
		epoch = max(epoch, p.Epoch)
		if p.Epoch > s.Epoch || p.Epoch == s.Epoch && p.Revision > s.Revision {
			newer = append(newer, fmt.Sprintf("%s (epoch %d, revision %d)", p.Name, p.Epoch, p.Revision))
		}
	}
	if !seeder {
		return Record{}, fmt.Errorf("member %s is not among the provider's instances", v.From)
	}
	if len(newer) > 0 && !v.AcceptLoss {
		return Record{}, fmt.Errorf("member(s) %s hold data newer than snapshot %s (epoch %d, revision %d): recover from a member with -from MEMBER, "+
			"or accept losing the newer writes with -accept-data-loss (the new epoch sets that data aside, nothing is deleted)", strings.Join(sorted(newer), ", "), s.Name, s.Epoch, s.Revision)
	}
	lastToken, lastEpoch := v.Record.lastConfirmed()
	return Record{Token: v.NewToken, Epoch: epoch + 1, Seeder: v.From, Source: SnapshotSource(s.Name),
		LastConfirmedToken: lastToken, LastConfirmedEpoch: lastEpoch, Operator: true, SourceRevision: s.Revision}, nil
}

// OperatorRecordLive decides 'etcd-nomad recover -record-live': the
// record that names the cluster running with a quorum again, as a new
// epoch, or why not. It is the way out of a wait the planner leaves to an
// operator: the record names an epoch newer than the live cluster's that
// never ran here as recorded (Consul restored an old record, or its
// seeder is gone for good), so no member may take it over beside the live
// cluster (invariant 10), and none may re-record the live cluster's older
// epoch over it (invariant 9).
//
// The fence, every part of it over what the command saw under the lock:
//   - the record is not confirmed (a confirmed one names a cluster that
//     ran: its members follow it) and names another incarnation than the
//     live one (the live cluster's members confirm their own record);
//   - every instance answers (a silent one may hold the newer epoch's
//     data, or another quorum);
//   - a member answers as a healthy voter (its cluster has a quorum);
//   - every member that holds data holds the live cluster's (its token
//     and cluster id): the new record sets nothing aside.
//
// The record it returns names the live cluster's token and cluster id,
// confirmed, at an epoch above the stored record's and every member's
// (epochs only grow), with the lowest-named healthy voter as its seeder.
// The members adopt that epoch in their metadata (AdoptEpoch) without
// restarting etcd. The caller writes it with a compare-and-set on the
// record it read.
func OperatorRecordLive(v OperatorView) (Record, error) {
	if v.Record == nil {
		return Record{}, fmt.Errorf("there is no cluster record: the running members re-record their cluster themselves")
	}
	rec := v.Record
	if rec.ClusterID != 0 {
		return Record{}, fmt.Errorf("the record is confirmed (token %s epoch %d, cluster %x): it names a cluster that ran; not recording another over it (its members follow it, and a record older than a member's data is re-recorded by that member)", short(rec.Token), rec.Epoch, rec.ClusterID)
	}
	if len(v.Silent) > 0 {
		return Record{}, fmt.Errorf("instance(s) %s do not answer: they may hold epoch %d's data or another quorum; not recording (bring them back, or stop them for good so that the provider no longer lists them)", strings.Join(sorted(v.Silent), ", "), rec.Epoch)
	}
	var live *PeerStatus
	for i, p := range v.Answered {
		if p.Healthy && p.Token != "" && (live == nil || p.Name < live.Name) {
			live = &v.Answered[i]
		}
	}
	if live == nil {
		return Record{}, fmt.Errorf("no member answers as a healthy voter: no cluster runs with a quorum to record (recover a lost quorum with -from MEMBER or -from snapshot:NAME)")
	}
	if live.ClusterID == 0 {
		return Record{}, fmt.Errorf("member %s answers as a healthy voter but names no cluster id", live.Name)
	}
	epoch := rec.Epoch
	var others []string
	for _, p := range v.Answered {
		if p.Token == "" {
			continue
		}
		if p.Token != live.Token || p.ClusterID != live.ClusterID {
			others = append(others, fmt.Sprintf("%s (token %s epoch %d, cluster %x)", p.Name, short(p.Token), p.Epoch, p.ClusterID))
		}
		epoch = max(epoch, p.Epoch)
	}
	if len(others) > 0 {
		return Record{}, fmt.Errorf("member(s) %s hold data of another incarnation than the cluster that runs with a quorum (token %s, cluster %x, healthy voter %s): not recording it over them (recording it would set their data aside)",
			strings.Join(sorted(others), ", "), short(live.Token), live.ClusterID, live.Name)
	}
	if rec.Token == live.Token {
		return Record{}, fmt.Errorf("the record already names the cluster that runs (token %s epoch %d): its members confirm it themselves", short(rec.Token), rec.Epoch)
	}
	return Record{ClusterID: live.ClusterID, Token: live.Token, Epoch: epoch + 1, Seeder: live.Name}, nil
}

func sorted(xs []string) []string {
	out := append([]string(nil), xs...)
	sort.Strings(out)
	return out
}
