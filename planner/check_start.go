package planner

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// The checks of the decisions that start etcd on this member's data
// dir: a seed, a rejoin on its own data, and a join (or resumed join) as
// a learner. Check calls them by decision kind; each keeps one invariant
// of docs/design.md's table.

// checkSeed checks a seed (invariants 1, 8 and 10): a new epoch seeded
// empty only where no copy of the cluster can exist.
func checkSeed(o Observation, d Decision) error {
	if err := checkSeedStartsEmpty(o); err != nil {
		return err
	}
	if err := checkSeedBesideKnownVoters(o, d); err != nil {
		return err
	}
	if seedTakeover(o, d) {
		return checkSeedTakeover(o, d)
	}
	if err := checkSeedAlone(o); err != nil {
		return err
	}
	return checkSeedAboveMeta(o, d)
}

// checkSeedStartsEmpty keeps invariant 1, "at most one seed per cluster
// epoch": a seed starts with no data here and nothing running.
func checkSeedStartsEmpty(o Observation) error {
	if o.Running || !o.Local.Empty {
		return fmt.Errorf("invariant 1: seed with data or while running")
	}
	return nil
}

// checkSeedBesideKnownVoters keeps invariant 10, "no recovery or takeover
// while any instance might hold a quorum": no seed while a member of the
// last known membership answers as a voter (listed or not), unless an
// operator's record asks for it.
func checkSeedBesideKnownVoters(o Observation, d Decision) error {
	if len(o.KnownHealthy)+len(o.UnlistedVoters) > 0 && (d.Record == nil || !d.Record.Operator) {
		return fmt.Errorf("invariant 10: seed (%s) while %s of the last known membership answer as voters", d.Reason, strings.Join(slices.Concat(o.KnownHealthy, o.UnlistedVoters), ", "))
	}
	return nil
}

// seedTakeover reports whether d takes over the unconfirmed empty seed
// of another member (a new token over a record of no source).
func seedTakeover(o Observation, d Decision) bool {
	r := o.Record
	return r != nil && r.ClusterID == 0 && r.Source == "" && r.Seeder != checkedName(o) && d.Record != nil && d.Record.Token != r.Token
}

// checkSeedTakeover keeps invariant 1, "at most one seed per cluster
// epoch", when a member takes over the empty seed of a gone seeder: as
// the next epoch, after the grace, with the seeder unlisted, every
// instance answering, and no copy of anything anywhere (no member list,
// snapshot or peer data). The next epoch is the one after the record's
// top, or after the epoch this member's metadata names without data when
// that is higher (aboveOwnMeta: a record of it existed; sim seed 2255
// found the checker still asking for the record's next after the planner
// took that rule).
func checkSeedTakeover(o Observation, d Decision) error {
	r := o.Record
	want := r.top() + 1
	if l := o.Local; l.Empty && (l.Cluster == "" || l.Cluster == o.ClusterName) && l.MetaEpoch >= want && l.MetaEpoch < math.MaxUint64 {
		want = l.MetaEpoch + 1 // above an epoch this member's metadata names, of this cluster (aboveOwnMeta, ownMetaEpoch; review rev19d W3)
	}
	if e := answeredMetaEpoch(o.Peers, knownEpoch(o)); e >= want {
		want = e + 1 // ...and a peer's (review rev18c N3)
	}
	if o.MembersKnown || o.RecoveryGrace <= 0 || o.SeederGoneFor < o.RecoveryGrace || inInstances(o.Instances, r.Seeder) || o.Unreachable > 0 || o.LatestSnapshot != nil || d.Record.Epoch != want {
		return fmt.Errorf("invariant 1: took over the seed of %s (gone %s, grace %s, listed %v, %d silent, snapshot %v, epoch %d over %d)", r.Seeder, o.SeederGoneFor, o.RecoveryGrace, inInstances(o.Instances, r.Seeder), o.Unreachable, o.LatestSnapshot != nil, d.Record.Epoch, r.Epoch)
	}
	for _, p := range o.Peers {
		if p.Token != "" {
			return fmt.Errorf("invariant 1: took over a seed while peer %s holds data", p.Name)
		}
	}
	return nil
}

// checkSeedAlone keeps invariants 1 and 8 for a first seed, or this
// member resuming its own unconfirmed one: "at most one seed per cluster
// epoch" (no other record, no peer holding the record's data, no resumed
// seed while an instance that may run it is silent) and "a lost record
// is re-written from the members' data, never seed anew" (no resumed
// empty seed beside a snapshot, no first seed while an instance is
// silent).
func checkSeedAlone(o Observation) error {
	if o.Record != nil && !(o.Record.ClusterID == 0 && o.Record.Seeder == checkedName(o) && !o.MembersKnown) {
		return fmt.Errorf("invariant 1: seed while record %+v exists", *o.Record)
	}
	for _, p := range o.Peers {
		if p.Token != "" && (o.Record == nil || p.Token == o.Record.Token) {
			return fmt.Errorf("invariant 1: seed while peer %s holds data", p.Name)
		}
	}
	if o.Record != nil && o.Unreachable > 0 {
		return fmt.Errorf("invariant 1: resumed the seed of epoch %d while %d instance(s) do not answer (they may run it)", o.Record.Epoch, o.Unreachable)
	}
	if o.Record != nil && o.LatestSnapshot != nil {
		return fmt.Errorf("invariant 8: resumed an empty seed of epoch %d while the store holds snapshot %s", o.Record.Epoch, o.LatestSnapshot.Name)
	}
	if o.Record == nil && o.Unreachable > 0 {
		return fmt.Errorf("invariant 8: seed with no record while %d instance(s) do not answer (they may hold the cluster's data)", o.Unreachable)
	}
	return nil
}

// checkSeedAboveMeta keeps invariant 9, "epochs only grow", for a first
// seed with no record: its epoch is above every epoch this member's or a
// peer's metadata names without data (a record of it existed before
// Consul lost its state, and a voter of it Nomad collected may run on;
// review rev18c N3).
func checkSeedAboveMeta(o Observation, d Decision) error {
	if o.Record != nil || d.Record == nil {
		return nil
	}
	e := answeredMetaEpoch(o.Peers, knownEpoch(o))
	if l := o.Local; l.Empty && (l.Cluster == "" || l.Cluster == o.ClusterName) && l.MetaEpoch < math.MaxUint64 {
		e = max(e, l.MetaEpoch)
	}
	if d.Record.Epoch <= e {
		return fmt.Errorf("invariant 9: seed with no record as epoch %d, not above epoch %d a member's metadata names", d.Record.Epoch, e)
	}
	return nil
}

// checkRejoin checks a start of this member's own data (invariants 10, 4,
// 5 and 9).
func checkRejoin(o Observation, _ Decision) error {
	if err := checkPendingForceNew(o, checkedName(o)); err != nil {
		return err
	}
	if err := checkRejoinData(o); err != nil {
		return err
	}
	if err := checkRejoinSupersededLine(o); err != nil {
		return err
	}
	if err := checkRejoinLineUnknown(o); err != nil {
		return err
	}
	return checkRejoinUnderOlderRecord(o)
}

// checkRejoinLineUnknown keeps invariant 9 where the store cannot say: data
// that would re-record its epoch (no record, or a confirmed older one) is
// not started while the snapshot store's listing does not answer and no
// line epoch is known, unless its cluster answers with a member list
// (review rev18f F4: a lost or rolled-back record is how a newer epoch of
// the data's line gets forgotten, and the store is where it shows).
func checkRejoinLineUnknown(o Observation) error {
	rec, l := o.Record, o.Local
	if o.ListingUnanswered == "" || l.ClusterID == 0 || rec != nil && (rec.ClusterID == 0 || rec.Epoch >= l.Epoch) {
		return nil
	}
	if o.MembersKnown && o.MembersClusterID == l.ClusterID {
		return nil
	}
	return fmt.Errorf("invariant 9: starting data of epoch %d (cluster id %x) to re-record it while the snapshot store's listing does not answer (%s): a newer epoch of its line may have run", l.Epoch, l.ClusterID, o.ListingUnanswered)
}

// checkRejoinSupersededLine keeps invariant 9, "epochs only grow": data
// does not start again once a newer epoch of its own line (a snapshot
// under its cluster id: LineEpoch) ran than the data's and any the record
// names, whether the record names the data's incarnation, an older one
// (review rev18c N1), or none (Consul lost its state: rev18c N2), unless
// its cluster answers with a member list (a quorum of it serves already).
func checkRejoinSupersededLine(o Observation) error {
	rec, l := o.Record, o.Local
	if l.ClusterID == 0 || rec != nil && rec.ClusterID == 0 {
		return nil
	}
	if o.MembersKnown && (o.MembersClusterID == l.ClusterID || rec != nil && o.MembersClusterID == rec.ClusterID) {
		return nil
	}
	top, under := l.Epoch, "no record"
	if rec != nil {
		top, under = max(l.Epoch, rec.top()), fmt.Sprintf("a record of epoch %d (top %d)", rec.Epoch, rec.top())
	}
	if o.LineEpoch > top {
		return fmt.Errorf("invariant 9: starting data of epoch %d (cluster id %x) under %s while the store holds a snapshot of its cluster id at epoch %d", l.Epoch, l.ClusterID, under, o.LineEpoch)
	}
	return nil
}

// checkRejoinData keeps invariant 5, "data of another cluster/epoch is
// never started": the data is verified, of this cluster, of the
// incarnation the record names (or newer than it), and its member was not
// removed from the membership.
func checkRejoinData(o Observation) error {
	if o.Local.Empty || o.Local.Token == "" {
		return fmt.Errorf("invariant 5: rejoin without verified data")
	}
	if o.Local.Cluster != o.ClusterName {
		return fmt.Errorf("invariant 5: starting data of cluster %q as %q", o.Local.Cluster, o.ClusterName)
	}
	if r := o.Record; r != nil && r.Epoch >= o.Local.Epoch && (r.Token != o.Local.Token || r.Epoch != o.Local.Epoch) {
		return fmt.Errorf("invariant 5: starting data of token %s epoch %d against record %s epoch %d", o.Local.Token, o.Local.Epoch, r.Token, r.Epoch)
	}
	if o.MembersKnown && o.Local.MemberID != 0 && findID(o.Members, o.Local.MemberID) < 0 && (o.Record != nil || o.MembersClusterID == o.Local.ClusterID && o.Local.ClusterID != 0) {
		return fmt.Errorf("invariant 5: starting the data of removed member %x", o.Local.MemberID)
	}
	return nil
}

// checkRejoinUnderOlderRecord keeps invariant 9, "epochs only grow": data
// newer than the record starts only while no peer holds a newer epoch
// still.
func checkRejoinUnderOlderRecord(o Observation) error {
	for _, p := range o.Peers {
		if o.Record != nil && o.Record.Epoch < o.Local.Epoch && p.Token != "" && p.Epoch > o.Local.Epoch {
			return fmt.Errorf("invariant 9: starting epoch %d over an older record while peer %s holds epoch %d", o.Local.Epoch, p.Name, p.Epoch)
		}
	}
	return nil
}

// checkJoin checks a join as a learner or a resumed join (invariants 5, 9
// and 3).
func checkJoin(o Observation, d Decision) error {
	if err := checkJoinStartsEmpty(o, d); err != nil {
		return err
	}
	if err := checkJoinUnderNewestRecord(o, d); err != nil {
		return err
	}
	if d.Kind != JoinAsLearner {
		return nil
	}
	if err := checkJoinOneChange(o); err != nil {
		return err
	}
	return checkJoinConfirmedCluster(o)
}

// checkJoinStartsEmpty keeps invariant 5, "data of another cluster/epoch
// is never started": a joiner starts with an empty data dir.
func checkJoinStartsEmpty(o Observation, d Decision) error {
	if !o.Local.Empty {
		return fmt.Errorf("invariant 5: %s with data in the data dir", d.Kind)
	}
	return nil
}

// checkJoinUnderNewestRecord keeps invariant 9, "epochs only grow": no
// join under a record older than an epoch a peer holds (Consul restored
// an older record).
func checkJoinUnderNewestRecord(o Observation, d Decision) error {
	for _, p := range o.Peers {
		if o.Record != nil && p.Token != "" && p.Epoch > o.Record.Epoch {
			return fmt.Errorf("invariant 9: %s under record epoch %d while peer %s holds epoch %d", d.Kind, o.Record.Epoch, p.Name, p.Epoch)
		}
	}
	return nil
}

// checkJoinOneChange keeps invariant 3, "one membership change at a
// time": a learner is added only with a known member list in which no
// learner or unstarted member is in flight.
func checkJoinOneChange(o Observation) error {
	for _, m := range o.Members {
		if m.Learner || m.Name == "" {
			return fmt.Errorf("invariant 3: join while member %x is in flight", m.ID)
		}
	}
	if !o.MembersKnown {
		return fmt.Errorf("invariant 3: join without a known member list")
	}
	return nil
}

// checkJoinConfirmedCluster keeps invariant 5, "a member joins only a
// confirmed cluster": the record names a cluster id (else the member list
// may be another cluster's).
func checkJoinConfirmedCluster(o Observation) error {
	if o.Record == nil || o.Record.ClusterID == 0 {
		return fmt.Errorf("invariant 5: join while the record names no confirmed cluster id (the member list may be another cluster's)")
	}
	return nil
}
