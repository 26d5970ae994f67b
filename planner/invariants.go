package planner

import (
	"fmt"
	"slices"
	"strings"
)

// refuse returns d, or a Wait naming the broken rule when d fails Check:
// a planner bug Check sees costs progress (the member waits and says
// why, in its log and status), never safety.
func refuse(o Observation, d Decision) Decision {
	if err := Check(o, d); err != nil {
		return Decision{Kind: Wait, Name: d.Name, Reason: fmt.Sprintf("refused to %s (a planner bug: %v): %s", d.Kind, err, d.Reason)}
	}
	return d
}

// Check returns an error when d, decided for o, breaks a safety rule that
// one decision can break: the invariants 1 to 10 of docs/design.md's table
// "Safety invariants and where they are tested" (one seed
// per epoch, quorum kept by removals and replacements, one membership
// change in flight, recovery only after the grace and from the best
// source, no foreign or stale data started, the persisted identity,
// nothing set aside that is needed, the record as derived truth, epochs
// only grow, no recovery while a quorum may answer), and beside them: a
// decision that acts under the lock (seed, membership change, record
// write, maintenance) holds it; an operator's pause holds back every
// action but a wait, a rejoin and the operator's own recovery; an
// instance is replaced only when unhealthy long enough and with a quorum
// left, one at a time; a peer URL is updated only by the running member
// for itself. Invariants 11 and 12 and the whole-system properties (one
// cluster id, no acknowledged write lost) are checked over time by sim/.
//
// It is a naive reference written apart from Plan, so that a planner bug
// is not mirrored here, and pure and cheap: Plan runs it on every
// decision and refuses one that fails it (refuse).
func Check(o Observation, d Decision) error {
	name := o.Self.Name
	if o.Local.Name != "" {
		name = o.Local.Name
	}
	// Invariant 5 for running members: an incarnation the record no longer
	// names is never kept running by a membership decision. (Taking over a
	// recovery restarts it as the next epoch: invariant 4 checks that.)
	if o.Running && o.Record != nil && o.Local.Token != "" && (o.Record.Token != o.Local.Token || o.Record.Epoch != o.Local.Epoch) && d.Kind != SetAside && d.Kind != Wait && d.Kind != RecoverQuorum && !(d.Kind == RecordCluster && o.Record.Epoch < o.Local.Epoch) {
		return fmt.Errorf("invariant 5: %s while running epoch %d against record epoch %d", d.Kind, o.Local.Epoch, o.Record.Epoch)
	}
	// An operator's pause: nothing but waiting, starting this member's
	// own data, and the operator's own recovery by its source.
	if o.Paused != "" && (d.Kind != Wait || d.NeedsLock) && d.Kind != Rejoin {
		r := o.Record
		own := r != nil && r.Operator && r.ClusterID == 0 && r.Seeder == d.Name && (d.Kind == RecoverQuorum || d.Kind == RecordCluster || d.Kind == Wait)
		if !own {
			return fmt.Errorf("pause: %s while paused", d.Kind)
		}
	}
	starts := d.Kind == Seed || d.Kind == Rejoin || d.Kind == JoinAsLearner || d.Kind == ResumeJoin

	// Invariant 6: identity is the persisted name.
	if starts && o.Local.Name != "" && d.Name != o.Local.Name {
		return fmt.Errorf("invariant 6: runs as %q but the data dir says %q", d.Name, o.Local.Name)
	}
	// Every decision that acts under the lock must hold it.
	if (d.Kind == Seed || d.ChangesMembership() || d.Kind == RecordCluster || d.Kind == ReclaimSpace) && !o.HoldsLock {
		return fmt.Errorf("%s without holding the lock", d.Kind)
	}
	if err := checkOperatorAccepted(o, d); err != nil {
		return err
	}
	if err := checkRefused(o, d); err != nil {
		return err
	}
	if err := checkListing(o, d); err != nil {
		return err
	}
	if err := checkAboveSnapshots(o, d); err != nil {
		return err
	}
	switch d.Kind {
	case DisarmCorrupt:
		// A member's CORRUPT alarm is disarmed only once it has left the
		// membership: its corrupt data never serves unnoticed.
		for _, id := range d.Alarms {
			if !o.MembersKnown || id == 0 || findID(o.Members, id) >= 0 {
				return fmt.Errorf("invariant 7: disarmed the CORRUPT alarm of member %x, still in the membership", id)
			}
		}
	case Seed:
		// Invariant 1: one seed per epoch. Only with no record (or resuming
		// our own unconfirmed one), no data here or at any peer.
		if o.Running || !o.Local.Empty {
			return fmt.Errorf("invariant 1: seed with data or while running")
		}
		if len(o.KnownHealthy)+len(o.UnlistedVoters) > 0 && (d.Record == nil || !d.Record.Operator) {
			return fmt.Errorf("invariant 10: seed (%s) while %s of the last known membership answer as voters", d.Reason, strings.Join(slices.Concat(o.KnownHealthy, o.UnlistedVoters), ", "))
		}
		if r := o.Record; r != nil && r.ClusterID == 0 && r.Source == "" && r.Seeder != name && d.Record != nil && d.Record.Token != r.Token {
			// Taking over the empty seed of a gone seeder: as the next
			// epoch, only with no copy of anything anywhere.
			if o.MembersKnown || o.RecoveryGrace <= 0 || o.SeederGoneFor < o.RecoveryGrace || inInstances(o.Instances, r.Seeder) || o.Unreachable > 0 || o.LatestSnapshot != nil || d.Record.Epoch != r.top()+1 {
				return fmt.Errorf("invariant 1: took over the seed of %s (gone %s, grace %s, listed %v, %d silent, snapshot %v, epoch %d over %d)", r.Seeder, o.SeederGoneFor, o.RecoveryGrace, inInstances(o.Instances, r.Seeder), o.Unreachable, o.LatestSnapshot != nil, d.Record.Epoch, r.Epoch)
			}
			for _, p := range o.Peers {
				if p.Token != "" {
					return fmt.Errorf("invariant 1: took over a seed while peer %s holds data", p.Name)
				}
			}
			break
		}
		if o.Record != nil && !(o.Record.ClusterID == 0 && o.Record.Seeder == name && !o.MembersKnown) {
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
	case Rejoin:
		if err := checkPendingForceNew(o, name); err != nil {
			return err
		}
		// Invariant 5: never start foreign or stale data.
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
		for _, p := range o.Peers {
			if o.Record != nil && o.Record.Epoch < o.Local.Epoch && p.Token != "" && p.Epoch > o.Local.Epoch {
				return fmt.Errorf("invariant 9: starting epoch %d over an older record while peer %s holds epoch %d", o.Local.Epoch, p.Name, p.Epoch)
			}
		}
	case JoinAsLearner, ResumeJoin:
		if !o.Local.Empty {
			return fmt.Errorf("invariant 5: %s with data in the data dir", d.Kind)
		}
		for _, p := range o.Peers {
			if o.Record != nil && p.Token != "" && p.Epoch > o.Record.Epoch {
				return fmt.Errorf("invariant 9: %s under record epoch %d while peer %s holds epoch %d", d.Kind, o.Record.Epoch, p.Name, p.Epoch)
			}
		}
		if d.Kind == JoinAsLearner {
			// Invariant 3: one membership change in flight.
			for _, m := range o.Members {
				if m.Learner || m.Name == "" {
					return fmt.Errorf("invariant 3: join while member %x is in flight", m.ID)
				}
			}
			if !o.MembersKnown {
				return fmt.Errorf("invariant 3: join without a known member list")
			}
			if o.Record == nil || o.Record.ClusterID == 0 {
				return fmt.Errorf("invariant 5: join while the record names no confirmed cluster id (the member list may be another cluster's)")
			}
		}
	case RecordCluster:
		// Invariant 9: epochs only grow; a re-record needs this
		// incarnation's quorum and no peer at a newer epoch.
		if d.Record == nil {
			return fmt.Errorf("record-cluster without a record")
		}
		if o.Record != nil && d.Record.Epoch < o.Record.Epoch {
			return fmt.Errorf("invariant 9: recording epoch %d over epoch %d", d.Record.Epoch, o.Record.Epoch)
		}
		if o.Record != nil && d.Record.top() < o.Record.top() {
			// Epochs never repeat: a record names the highest epoch a
			// record it replaces named (review rev13b D3).
			return fmt.Errorf("invariant 9: recording epoch %d (highest %d) over a record that named epoch %d", d.Record.Epoch, d.Record.HighestEpoch, o.Record.top())
		}
		if r := o.Record; r != nil && r.ClusterID != 0 && d.Record.Epoch == r.Epoch && d.Record.ClusterID != r.ClusterID {
			// Another cluster id for the recorded incarnation: only the
			// one that answers with a quorum, every instance answering.
			if !o.Running || !o.MembersKnown || o.MembersClusterID != d.Record.ClusterID || o.Local.ClusterID != d.Record.ClusterID || o.Unreachable > 0 {
				return fmt.Errorf("invariant 5: recording cluster %x over %x without that cluster answering with a quorum here (members known %v, cluster %x, %d silent)", d.Record.ClusterID, r.ClusterID, o.MembersKnown, o.MembersClusterID, o.Unreachable)
			}
		}
		if o.Record == nil || d.Record.Epoch > o.Record.Epoch {
			if !o.Running || !o.MembersKnown && o.Unreachable > 0 {
				return fmt.Errorf("invariant 9: re-recording epoch %d without this incarnation's quorum while %d instance(s) do not answer", d.Record.Epoch, o.Unreachable)
			}
			for _, p := range o.Peers {
				// A voter of this member's own cluster runs its
				// incarnation, whatever epoch its metadata names.
				if p.Token != "" && p.Epoch > d.Record.Epoch && !fellowVoter(o, p) {
					return fmt.Errorf("invariant 9: re-recording epoch %d while peer %s holds epoch %d", d.Record.Epoch, p.Name, p.Epoch)
				}
				// Nor an epoch this member's own cluster does not run (its
				// metadata rewritten for a recovery that never started:
				// review rv14-data RV14-4).
				if fellowVoter(o, p) && p.Epoch < d.Record.Epoch && d.Record.Token == o.Local.Token {
					return fmt.Errorf("invariant 9: re-recording epoch %d while voter %s of this member's cluster %x runs it as epoch %d", d.Record.Epoch, p.Name, o.Local.ClusterID, p.Epoch)
				}
			}
		}
	case UpdatePeerURL:
		if !o.Running || !o.MembersKnown || d.MemberID != o.SelfID {
			return fmt.Errorf("peer URL update of %x by %x (running %v, members known %v)", d.MemberID, o.SelfID, o.Running, o.MembersKnown)
		}
	case Promote:
		if !o.Running || d.MemberID != o.SelfID {
			return fmt.Errorf("invariant 3: promote of %x by %x", d.MemberID, o.SelfID)
		}
	case RemoveMember:
		if !o.MembersKnown {
			return fmt.Errorf("invariant 2: remove without a known member list")
		}
		i := findID(o.Members, d.MemberID)
		if i < 0 {
			return fmt.Errorf("remove of unknown member %x", d.MemberID)
		}
		m := o.Members[i]
		if !m.Learner {
			// Invariant 2: quorum of the new membership stays healthy.
			after, healthy := 0, 0
			for _, x := range o.Members {
				if x.Learner || x.ID == m.ID {
					continue
				}
				after++
				if x.Healthy {
					healthy++
				}
			}
			if after == 0 || healthy < after/2+1 {
				return fmt.Errorf("invariant 2: removing %x leaves %d healthy of %d voters", m.ID, healthy, after)
			}
			// Invariant 3: no voter removed while a learner is in flight.
			for _, x := range o.Members {
				if x.Learner || x.Name == "" {
					return fmt.Errorf("invariant 3: voter removal while %x is in flight", x.ID)
				}
			}
		}
		// Invariant 3: never the leader while another choice exists.
		if m.ID == o.LeaderID {
			for _, x := range o.Members {
				if x.ID != m.ID && x.ID != o.SelfID && o.StaleAfter > 0 && x.AbsentFor >= o.StaleAfter {
					return fmt.Errorf("invariant 3: removing leader %x while %x is also stale", m.ID, x.ID)
				}
			}
		}
	case ReplaceInstance:
		// One replacement at a time, of a long-unhealthy voter, with quorum.
		if o.ReplacementInFlight {
			return fmt.Errorf("replacement of %s while another replacement is in flight", d.Target)
		}
		for _, x := range o.Members {
			if x.Learner || x.Name == "" {
				return fmt.Errorf("replacement of %s while member %x is in flight", d.Target, x.ID)
			}
		}
		found := false
		healthy, all := 0, 0
		for _, x := range o.Members {
			if !x.Learner {
				all++
				if x.Healthy {
					healthy++
				}
			}
			if x.ID == d.MemberID {
				found = true
				if x.Healthy || o.ReplaceAfter <= 0 || x.UnhealthyFor < o.ReplaceAfter {
					return fmt.Errorf("replacement of %s, which is healthy or not unhealthy long enough", d.Target)
				}
			}
		}
		if !found || !inInstances(o.Instances, d.Target) || healthy < all/2+1 {
			return fmt.Errorf("invariant 2: replacement of %s with %d healthy of %d voters", d.Target, healthy, all)
		}
	case RecoverQuorum:
		if len(o.KnownHealthy)+len(o.UnlistedVoters) > 0 && (d.Record == nil || !d.Record.Operator) {
			return fmt.Errorf("invariant 10: recovery (%s) while %s of the last known membership answer as voters", d.Reason, strings.Join(slices.Concat(o.KnownHealthy, o.UnlistedVoters), ", "))
		}
		if o.Record != nil && d.Record != nil && d.Record.Token == o.Record.Token && o.Record.Seeder == name && o.Record.ClusterID == 0 {
			// Resuming the recovery this member recorded. From a snapshot
			// (this member holds no data of it): never while an instance
			// is silent or a peer holds the incarnation (invariant 1).
			if d.From == FromData {
				// Invariant 10: a ForceNewCluster start beside a quorum
				// makes a second live cluster; and it must start the
				// data the recovery was recorded from.
				if o.MembersKnown {
					return fmt.Errorf("invariant 10: resumed the recovery of epoch %d from data while cluster %x answers with a quorum", o.Record.Epoch, o.MembersClusterID)
				}
				for _, p := range o.Peers {
					if p.Healthy {
						return fmt.Errorf("invariant 10: resumed the recovery of epoch %d from data while peer %s is a healthy voter", o.Record.Epoch, p.Name)
					}
				}
				if o.Unreachable > 0 {
					return fmt.Errorf("invariant 10: resumed the recovery of epoch %d from data while %d instance(s) do not answer", o.Record.Epoch, o.Unreachable)
				}
				for _, p := range o.Peers {
					if p.Token == o.Local.Token && p.Epoch == o.Local.Epoch && p.Revision > o.Local.Revision {
						return fmt.Errorf("invariant 4: resumed the recovery of epoch %d from revision %d while peer %s holds revision %d", o.Record.Epoch, o.Local.Revision, p.Name, p.Revision)
					}
				}
				if r := o.Record; r.LastConfirmedEpoch != 0 && (o.Local.Token != r.LastConfirmedToken || o.Local.Epoch != r.LastConfirmedEpoch) {
					return fmt.Errorf("invariant 4: resumed the recovery of epoch %d from data of token %s epoch %d with data of token %s epoch %d", r.Epoch, r.LastConfirmedToken, r.LastConfirmedEpoch, o.Local.Token, o.Local.Epoch)
				}
				if s := o.LatestSnapshot; s != nil && s.Epoch >= o.Record.Epoch {
					return fmt.Errorf("invariant 4: resumed the recovery of epoch %d from data of epoch %d while the store holds snapshot %s of epoch %d, taken after the record", o.Record.Epoch, o.Local.Epoch, s.Name, s.Epoch)
				}
				if o.SnapshotEpoch >= o.Record.Epoch {
					return fmt.Errorf("invariant 4: resumed the recovery of epoch %d from data of epoch %d while the store holds a snapshot of epoch %d, taken after the record", o.Record.Epoch, o.Local.Epoch, o.SnapshotEpoch)
				}
			}
			if d.From == FromSnapshot {
				// An operator's restore of the snapshot they chose
				// (OperatorSnapshotRecovery refused it over newer data
				// unless they accepted the loss) is not traded for the
				// newest one.
				if s := o.LatestSnapshot; s != nil && o.Record.Source != SnapshotSource(s.Name) && (!o.Record.Operator || s.Epoch >= o.Record.Epoch) {
					return fmt.Errorf("invariant 4: resumed the restore of %s while the store holds a newer snapshot %s", o.Record.Source, s.Name)
				}
				if o.Unreachable > 0 {
					return fmt.Errorf("invariant 1: resumed the restore of epoch %d while %d instance(s) do not answer (they may run it)", o.Record.Epoch, o.Unreachable)
				}
				for _, p := range o.Peers {
					if p.Token == o.Record.Token {
						return fmt.Errorf("invariant 1: resumed the restore of epoch %d while peer %s holds it", o.Record.Epoch, p.Name)
					}
					if p.Token != "" && p.Epoch >= o.Record.Epoch {
						return fmt.Errorf("invariant 1: resumed the restore of epoch %d while peer %s holds another incarnation of epoch %d", o.Record.Epoch, p.Name, p.Epoch)
					}
				}
			}
			break
		}
		held := !o.Local.Empty && o.Local.Token != ""
		for _, p := range o.Peers {
			held = held || p.Token != ""
		}
		if r := o.Record; r != nil && r.ClusterID == 0 && r.Source == "" && r.Seeder != name && !held {
			// Taking over the empty seed of a gone seeder from the newest
			// snapshot, no member holding data. (With data, it is taken
			// over as a recovery, checked below.)
			s := o.LatestSnapshot
			if d.From != FromSnapshot || s == nil || d.Target != s.Name || d.Record == nil || d.Record.Epoch <= max(r.Epoch, s.Epoch) ||
				o.MembersKnown || o.RecoveryGrace <= 0 || o.SeederGoneFor < o.RecoveryGrace || inInstances(o.Instances, r.Seeder) || o.Unreachable > 0 || !o.Local.Empty || o.Running {
				return fmt.Errorf("invariant 4: took over the seed of %s other than by a restore of the newest snapshot as a newer epoch, after grace, with every instance answering", r.Seeder)
			}
			for _, p := range o.Peers {
				if p.Token != "" {
					return fmt.Errorf("invariant 4: took over a seed while peer %s holds data", p.Name)
				}
			}
			break
		}
		if r := o.Record; r != nil && r.ClusterID == 0 && r.Seeder == name && r.Source != FromData {
			// This member's own seed or restore, abandoned for the newest
			// snapshot (no copy of it anywhere): only the newest, as an
			// epoch newer than both, with no data here or at any peer and
			// every instance answering (invariants 1, 4, 8).
			s := o.LatestSnapshot
			if d.From != FromSnapshot || s == nil || d.Target != s.Name || r.Source == SnapshotSource(s.Name) || d.Record == nil || d.Record.Epoch <= max(r.Epoch, s.Epoch, o.SnapshotEpoch) {
				return fmt.Errorf("invariant 4: recovery over this member's own unconfirmed record %+v other than a restore of the newest snapshot as a newer epoch", *r)
			}
			if !o.Local.Empty || o.Running || o.Unreachable > 0 {
				return fmt.Errorf("invariant 1: restore over this member's own record with data here or %d instance(s) silent", o.Unreachable)
			}
			for _, p := range o.Peers {
				if p.Token != "" {
					return fmt.Errorf("invariant 1: restore over this member's own record while peer %s holds data", p.Name)
				}
			}
			break
		}
		// Invariant 4: after the grace period, by the lock holder, from the
		// highest revision known, with the next epoch recorded, with every
		// instance answering.
		if o.Unreachable > 0 {
			return fmt.Errorf("invariant 4: recovery while %d instances do not answer", o.Unreachable)
		}
		if o.Record == nil {
			// Invariant 8: with no record, only a restore of the newest
			// snapshot when no member holds data.
			if d.From != FromSnapshot || o.LatestSnapshot == nil || d.Target != o.LatestSnapshot.Name || d.Record == nil || d.Record.Epoch <= o.LatestSnapshot.Epoch {
				return fmt.Errorf("invariant 8: recovery with no record other than a restore of the newest snapshot as a newer epoch")
			}
			if o.RecoveryGrace <= 0 || o.RecordMissingFor < o.RecoveryGrace {
				return fmt.Errorf("invariant 10: restore with no record after %s without one (grace %s): a majority the provider no longer lists may still serve", o.RecordMissingFor, o.RecoveryGrace)
			}
			if !o.Local.Empty || o.Running {
				return fmt.Errorf("invariant 8: restore with no record while this member holds data")
			}
			for _, p := range o.Peers {
				if p.Token != "" {
					return fmt.Errorf("invariant 8: restore with no record while peer %s holds data", p.Name)
				}
			}
			break
		}
		for _, p := range o.Peers {
			if p.Token != "" && p.Epoch > o.Record.Epoch {
				return fmt.Errorf("invariant 9: recovery over record epoch %d while peer %s holds epoch %d", o.Record.Epoch, p.Name, p.Epoch)
			}
		}
		if o.Record == nil || d.Record == nil || d.Record.Epoch != (rules{}).nextEpoch(o) {
			return fmt.Errorf("invariant 4: recovery without recording the next epoch (above the record's and the newest snapshot's)")
		}
		// The data a recovery may start from: this incarnation's, or, when
		// taking over an unconfirmed recovery whose seeder is gone, the
		// incarnation before it (of any token).
		dataEpoch, dataToken := o.Record.Epoch, o.Record.Token
		if o.Record.ClusterID == 0 {
			if o.Record.Seeder == name {
				return fmt.Errorf("invariant 4: recovery over an unconfirmed record %+v", *o.Record)
			}
			if o.RecoveryGrace <= 0 || o.SeederGoneFor < o.RecoveryGrace || inInstances(o.Instances, o.Record.Seeder) || o.MembersKnown {
				return fmt.Errorf("invariant 4: took over the recovery of %s after it was gone for %s (grace %s, listed %v, members known %v)", o.Record.Seeder, o.SeederGoneFor, o.RecoveryGrace, inInstances(o.Instances, o.Record.Seeder), o.MembersKnown)
			}
			for _, p := range o.Peers {
				if p.Token == o.Record.Token {
					return fmt.Errorf("invariant 4: took over while peer %s holds data of epoch %d", p.Name, o.Record.Epoch)
				}
			}
			dataEpoch, dataToken = o.Record.Epoch-1, ""
			if o.Record.LastConfirmedEpoch != 0 {
				dataEpoch, dataToken = o.Record.LastConfirmedEpoch, o.Record.LastConfirmedToken
			}
		} else if o.RecoveryGrace <= 0 || o.QuorumLostFor < o.RecoveryGrace || o.MembersKnown {
			return fmt.Errorf("invariant 4: recovery after %s of quorum loss (grace %s, members known %v)", o.QuorumLostFor, o.RecoveryGrace, o.MembersKnown)
		}
		holds := func(token string, epoch uint64) bool {
			return token != "" && epoch == dataEpoch && (dataToken == "" || token == dataToken)
		}
		// Two incarnations of one epoch: recovering from either loses the
		// other's writes; an operator chooses.
		other := func(token string, epoch uint64) bool {
			return token != "" && (epoch == o.Record.Epoch && token != o.Record.Token || dataToken != "" && epoch == dataEpoch && token != dataToken)
		}
		if !o.Local.Empty && o.Local.Cluster == o.ClusterName && other(o.Local.Token, o.Local.Epoch) {
			return fmt.Errorf("invariant 4: recovery while this member holds another incarnation (token %s) of epoch %d", o.Local.Token, o.Local.Epoch)
		}
		for _, p := range o.Peers {
			if other(p.Token, p.Epoch) {
				return fmt.Errorf("invariant 4: recovery while peer %s holds another incarnation (token %s) of epoch %d", p.Name, p.Token, p.Epoch)
			}
		}
		best := int64(-1)
		ownData := !o.Local.Empty && o.Local.Cluster == o.ClusterName && holds(o.Local.Token, o.Local.Epoch)
		if ownData && !o.Local.Learner {
			best = o.Local.Revision
		}
		for _, p := range o.Peers {
			if holds(p.Token, p.Epoch) && !p.Learner {
				best = max(best, p.Revision)
			}
		}
		var src int64
		switch d.From {
		case FromData:
			if !ownData {
				return fmt.Errorf("invariant 4: recovery from data this member does not hold")
			}
			if o.Local.Learner {
				return fmt.Errorf("invariant 4: recovery from a learner's data")
			}
			src = o.Local.Revision
		case FromSnapshot:
			if o.LatestSnapshot == nil || d.Target != o.LatestSnapshot.Name {
				return fmt.Errorf("invariant 4: recovery from a snapshot that is not the newest")
			}
			src = o.LatestSnapshot.Revision
		default:
			return fmt.Errorf("invariant 4: recovery from %q", d.From)
		}
		if src < best || (o.LatestSnapshot != nil && o.LatestSnapshot.Epoch >= dataEpoch && src < o.LatestSnapshot.Revision) {
			return fmt.Errorf("invariant 4: recovery from revision %d while %d is known (snapshot %v)", src, best, o.LatestSnapshot)
		}
		// Nor below a learner's data of the incarnation, nor beside it
		// from a snapshot of an older epoch (another line: revisions do
		// not compare; the learner may be its incarnation's only copy).
		learnerAhead := func(learner bool, token string, epoch uint64, rev int64) bool {
			return learner && holds(token, epoch) && (rev > src || d.From == FromSnapshot && o.LatestSnapshot.Epoch < dataEpoch)
		}
		if !o.Local.Empty && o.Local.Cluster == o.ClusterName && learnerAhead(o.Local.Learner, o.Local.Token, o.Local.Epoch, o.Local.Revision) {
			return fmt.Errorf("invariant 4: recovery from revision %d while this member, a learner, holds epoch %d at revision %d", src, o.Local.Epoch, o.Local.Revision)
		}
		for _, p := range o.Peers {
			if learnerAhead(p.Learner, p.Token, p.Epoch, p.Revision) {
				return fmt.Errorf("invariant 4: recovery from revision %d while learner %s holds epoch %d at revision %d", src, p.Name, p.Epoch, p.Revision)
			}
		}
		// Nor below data of another epoch older than the record's (older
		// than the source's: its later incarnations lost every copy but
		// an older snapshot; newer: an incarnation the restored record
		// does not know of).
		// Data of an epoch above a snapshot source's is another line:
		// its revisions do not compare with the snapshot's.
		srcEpoch := dataEpoch
		if d.From == FromSnapshot {
			srcEpoch = o.LatestSnapshot.Epoch
		}
		skipped := func(token string, epoch uint64, rev int64) bool {
			return token != "" && epoch < o.Record.Epoch && epoch != dataEpoch && (rev > src || epoch > srcEpoch)
		}
		if !o.Local.Empty && o.Local.Cluster == o.ClusterName && skipped(o.Local.Token, o.Local.Epoch, o.Local.Revision) {
			return fmt.Errorf("invariant 4: recovery from revision %d (epoch %d) while this member holds epoch %d at revision %d", src, srcEpoch, o.Local.Epoch, o.Local.Revision)
		}
		for _, p := range o.Peers {
			if skipped(p.Token, p.Epoch, p.Revision) {
				return fmt.Errorf("invariant 4: recovery from revision %d (epoch %d) while peer %s holds epoch %d at revision %d", src, srcEpoch, p.Name, p.Epoch, p.Revision)
			}
		}
	case SetAside:
		if o.Local.Empty && !o.Running {
			return fmt.Errorf("invariant 7: set aside an empty data dir")
		}
		if err := checkCorruptSetAside(o); err != nil {
			return err
		}
		// Invariant 9: data of this cluster is set aside because of the
		// record only when a confirmed newer epoch (or this member's own
		// recovery) names another incarnation; never for an unconfirmed,
		// same-epoch or older record, nor for a missing one.
		l := o.Local
		if l.Token != "" && l.Cluster == o.ClusterName && o.Local.Unreadable == "" {
			removed := o.MembersKnown && l.MemberID != 0 && findID(o.Members, l.MemberID) < 0 && (o.Record != nil || o.MembersClusterID == l.ClusterID && l.ClusterID != 0)
			if o.Running && o.MembersKnown && findID(o.Members, o.SelfID) < 0 {
				removed = true
			}
			r := o.Record
			switch {
			case r == nil && !removed:
				return fmt.Errorf("invariant 9: set aside data of epoch %d with no record", l.Epoch)
			case r != nil && (r.Token != l.Token || r.Epoch != l.Epoch):
				orphan := !o.Running && r.ClusterID != 0 && r.Epoch == l.Epoch && o.MembersKnown && o.MembersClusterID == r.ClusterID && o.Unreachable == 0
				for _, p := range o.Peers {
					orphan = orphan && p.Token != l.Token
				}
				// Data of a recovery whose ForceNewCluster start never
				// happened is a prefix of the confirmed cluster that
				// answers with a quorum, whether it still lists its member
				// (rev13b) or removed it (rv14-data RV14-2); an installed
				// restore that never started, a copy of what the store
				// keeps (rv14-data RV14-1).
				prefix := !o.Running && r.ClusterID != 0 && o.MembersKnown && o.MembersClusterID == r.ClusterID &&
					(l.ForceNewPending && l.MemberID != 0 && (l.Unstarted || r.top() >= l.Epoch) || l.Unstarted && !l.ForceNewPending && l.MemberID == 0 && r.Epoch < l.Epoch || startedRestore(r, l))
				if (r.Epoch <= l.Epoch || r.ClusterID == 0 && !(r.Seeder == name && r.Source != "")) && !orphan && !prefix {
					return fmt.Errorf("invariant 9: set aside data of token %s epoch %d for record token %s epoch %d (confirmed %v)", l.Token, l.Epoch, r.Token, r.Epoch, r.ClusterID != 0)
				}
				// This member's own unconfirmed recovery: never one from
				// data (it starts from this data), never while a quorum
				// answers (invariant 10: Consul may have restored an old
				// record).
				if r.ClusterID == 0 && r.Epoch > l.Epoch && r.Seeder == name && !orphan {
					if r.Source == FromData {
						return fmt.Errorf("invariant 7: set aside data of epoch %d for this member's own recovery from data", l.Epoch)
					}
					if o.MembersKnown {
						return fmt.Errorf("invariant 10: set aside data of epoch %d for this member's own unconfirmed record while cluster %x answers with a quorum", l.Epoch, o.MembersClusterID)
					}
					if o.Unreachable > 0 {
						return fmt.Errorf("invariant 10: set aside data of epoch %d for this member's own unconfirmed record while %d instance(s) do not answer", l.Epoch, o.Unreachable)
					}
					for _, p := range o.Peers {
						if p.Healthy {
							return fmt.Errorf("invariant 10: set aside data of epoch %d for this member's own unconfirmed record while peer %s is a healthy voter", l.Epoch, p.Name)
						}
					}
				}
				// A confirmed newer record sets data aside only once a
				// peer shows its incarnation running with a quorum: the
				// record alone does not prove a copy of it is left.
				if r.ClusterID != 0 && r.Epoch > l.Epoch {
					runs := false
					for _, p := range o.Peers {
						runs = runs || p.Token == r.Token && p.Epoch == r.Epoch && p.Running && p.Healthy
					}
					if !runs {
						return fmt.Errorf("invariant 7: set aside data of epoch %d for record epoch %d while no peer shows it running with a quorum", l.Epoch, r.Epoch)
					}
				}
			case r != nil && !removed && o.Corrupt == "":
				// Data found corrupt is the one exception, under
				// checkCorruptSetAside's quorum rule.
				return fmt.Errorf("set aside data of the recorded incarnation that was not removed")
			}
		}
	}
	return nil
}

// checkCorruptSetAside: data of the incarnation the record names, of a
// member still in the membership, readable and of this cluster, is set
// aside only while a quorum of the voters, healthy, besides this member
// and named by no CORRUPT alarm, holds good copies (invariant 2: the
// quorum stays; invariant 7: never the last good copy).
func checkCorruptSetAside(o Observation) error {
	l, r := o.Local, o.Record
	if l.Empty || l.Unreadable != "" || l.Token == "" || l.Cluster != o.ClusterName || r == nil || r.Token != l.Token || r.Epoch != l.Epoch || !o.MembersKnown {
		return nil
	}
	id := l.MemberID
	if o.Running {
		id = o.SelfID
	}
	if id == 0 || findID(o.Members, id) < 0 {
		return nil // removed: nothing of the quorum to keep
	}
	good, v := 0, 0
	for _, m := range o.Members {
		if m.Learner {
			continue
		}
		v++
		accused := false
		for _, a := range o.CorruptAlarms {
			accused = accused || a == m.ID
		}
		if m.Healthy && m.ID != id && !accused {
			good++
		}
	}
	if good < v/2+1 {
		return fmt.Errorf("invariant 7: set aside the current incarnation's data while %d good healthy voter(s) besides this member are below the quorum of %d voters", good, v)
	}
	return nil
}

// checkRefused: an object of the store members refuse (unauthenticated or
// forged, Observation.RefusedSnapshot) is data that exists and may not be
// taken: no seed beside it (invariant 8), and no new recovery or restore
// from a source older than it (invariant 4). A resumed recovery was
// decided before; an operator's record restores what the operator chose.
func checkRefused(o Observation, d Decision) error {
	rs := o.RefusedSnapshot
	if rs == nil || d.Record == nil {
		return nil
	}
	switch d.Kind {
	case Seed:
		return fmt.Errorf("invariant 8: seeded epoch %d empty while the store holds %s (revision %d), which members refuse (%s)", d.Record.Epoch, rs.Name, rs.Revision, rs.Why)
	case RecoverQuorum:
		if d.Record.Operator || o.Record != nil && d.Record.Token == o.Record.Token {
			return nil
		}
		src := o.Local.Revision
		if d.From == FromSnapshot {
			if o.LatestSnapshot == nil || d.Target != o.LatestSnapshot.Name {
				return nil // not the newest: the rules below refuse it
			}
			src = o.LatestSnapshot.Revision
		}
		if src < rs.Revision {
			return fmt.Errorf("invariant 4: recovery (%s) from revision %d while the store holds %s at revision %d, which members refuse (%s)", d.From, src, rs.Name, rs.Revision, rs.Why)
		}
	}
	return nil
}

// checkListing: while the snapshot store's listing does not answer
// (Observation.ListingUnanswered) what it holds is unknown: no seed
// (invariant 8: the store may hold the cluster's snapshots), and no new
// recovery or restore (invariant 4: it may hold a newer chain, or an
// object members refuse, than the source). A resumed recovery from data
// was decided before, on data that is here; a resumed restore, an
// operator's too, is not: the store may hold a snapshot of an incarnation
// that ran after the record was written (review rev13-data 1).
func checkListing(o Observation, d Decision) error {
	if o.ListingUnanswered == "" || d.Record == nil {
		return nil
	}
	switch d.Kind {
	case Seed:
		return fmt.Errorf("invariant 8: seeded epoch %d while the snapshot store's listing does not answer (%s)", d.Record.Epoch, o.ListingUnanswered)
	case RecoverQuorum:
		if o.Record != nil && d.Record.Token == o.Record.Token {
			if d.From == FromSnapshot {
				return fmt.Errorf("invariant 4: resumed the restore of %s as epoch %d while the snapshot store's listing does not answer (%s)", d.Target, d.Record.Epoch, o.ListingUnanswered)
			}
			return nil
		}
		return fmt.Errorf("invariant 4: recovery (%s) as epoch %d while the snapshot store's listing does not answer (%s)", d.From, d.Record.Epoch, o.ListingUnanswered)
	}
	return nil
}

// checkAboveSnapshots: a new recovery, restore or seed over a record
// records an epoch above every snapshot of the store that authenticates,
// of the record's lineage or not (invariant 9, epochs only grow):
// snapshots are ordered by epoch first, and one the lineage calls
// foreign, of an incarnation that ran after a record Consul restored,
// would share the new epoch (review rev13-data 3). A resumed record was
// decided before.
func checkAboveSnapshots(o Observation, d Decision) error {
	if d.Record == nil || o.SnapshotEpoch == 0 || d.Kind != RecoverQuorum && d.Kind != Seed {
		return nil
	}
	if o.Record != nil && d.Record.Token == o.Record.Token {
		return nil
	}
	if d.Record.Epoch <= o.SnapshotEpoch {
		return fmt.Errorf("invariant 9: %s recorded epoch %d while the store holds a snapshot of epoch %d that authenticates", d.Kind, d.Record.Epoch, o.SnapshotEpoch)
	}
	return nil
}

// checkOperatorAccepted: an operator's restore never sets aside, nor
// restores over, data of a line beyond what its command accepted of that
// line (Record.Accepted; lines' revisions never compared): writes
// acknowledged after the record are not the operator's to lose (invariant
// 4: from the highest revision known).
func checkOperatorAccepted(o Observation, d Decision) error {
	r := o.Record
	if r == nil || !r.Operator || r.ClusterID != 0 {
		return nil
	}
	if _, bounded := r.acceptedUpTo("", 0, rules{}); !bounded {
		return nil
	}
	l := o.Local
	if d.Kind == SetAside && d.Aside == AsideForeign && r.Seeder == d.Name && !l.Empty && l.Token != "" && l.Token != r.Token && l.Cluster == o.ClusterName {
		if up, _ := r.acceptedUpTo(l.Token, l.Epoch, rules{}); l.Revision > up {
			return fmt.Errorf("invariant 4: set aside its data of token %s at revision %d for the operator's restore, which accepted that line up to %d", l.Token, l.Revision, up)
		}
	}
	if d.Kind == RecoverQuorum && d.From == FromSnapshot && d.Record != nil && d.Record.Token == r.Token {
		for _, p := range o.Peers {
			if p.Token == "" || p.Token == r.Token {
				continue
			}
			if up, _ := r.acceptedUpTo(p.Token, p.Epoch, rules{}); p.Revision > up {
				return fmt.Errorf("invariant 4: restored the operator's snapshot over peer %s's data of token %s at revision %d, beyond the %d it accepted of that line", p.Name, p.Token, p.Revision, up)
			}
		}
	}
	return nil
}

// checkPendingForceNew checks a start of this member's own recovery from
// data whose ForceNewCluster start is pending (the start honours the flag
// while the record names that recovery), or of its own installed restore
// (review rv14-data RV14-1): such a start beside a quorum of another line
// makes a second live cluster, and its record's confirmation sets that
// line's later writes aside (invariant 10, review rev13b); nor while an
// instance is silent, or a peer holds the source line at a higher
// revision (invariant 4; a restore's revisions are bumped), as for a
// resumed one.
func checkPendingForceNew(o Observation, name string) error {
	what := "the pending ForceNewCluster recovery"
	switch {
	case ownPendingForceNew(o, name):
	case ownInstalledRestore(o, name):
		what = "the installed restore"
	default:
		return nil
	}
	rec := o.Record
	if o.MembersKnown {
		return fmt.Errorf("invariant 10: started %s of epoch %d while cluster %x answers with a quorum", what, rec.Epoch, o.MembersClusterID)
	}
	for _, p := range o.Peers {
		if p.Healthy {
			return fmt.Errorf("invariant 10: started %s of epoch %d while peer %s is a healthy voter", what, rec.Epoch, p.Name)
		}
	}
	if o.Unreachable > 0 {
		return fmt.Errorf("invariant 10: started %s of epoch %d while %d instance(s) do not answer", what, rec.Epoch, o.Unreachable)
	}
	if len(o.KnownHealthy)+len(o.UnlistedVoters) > 0 {
		return fmt.Errorf("invariant 10: started %s of epoch %d while %s of the last known membership answer as voters", what, rec.Epoch, strings.Join(slices.Concat(o.KnownHealthy, o.UnlistedVoters), ", "))
	}
	if rec.Source != FromData {
		return nil
	}
	for _, p := range o.Peers {
		if sourceLine(rec, p.Token, p.Epoch) && p.Revision > o.Local.Revision {
			return fmt.Errorf("invariant 4: started %s of epoch %d from revision %d while peer %s holds its source at revision %d", what, rec.Epoch, o.Local.Revision, p.Name, p.Revision)
		}
	}
	return nil
}
