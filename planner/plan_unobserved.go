// PlanUnobserved: what a running member does while its provider does not
// answer (the loop's observation failed).

package planner

import "fmt"

// PlanUnobserved decides like the package's PlanUnobserved with the rules
// f switches off.
func (f Faults) PlanUnobserved(o Observation) Decision { return f.planUnobserved(o) }

// PlanUnobserved decides what a running member does when the loop's
// observation failed on the provider (its host cut off from the Nomad
// servers, or Nomad collected its allocation while it runs): the loop
// skips until the provider answers, and a member that only skipped never
// followed a newer record (planRunning) while it ran blind. It reads only
// what the member reads without the provider: o.Running, o.SelfID,
// o.Local (its data's metadata), o.Record (read from the coordinator
// after the provider failed), o.Self and o.MembersKnown (its own server
// answered a linearizable member list: its incarnation has a quorum).
//
// A running member without a quorum stops its etcd, keeping its data and
// its membership (StopSuperseded), once the record names a newer epoch
// than its data's, confirmed (the new incarnation started and its seeder
// recorded its cluster id), recorded by another member: while it runs, a
// partition that heals gives the old incarnation its quorum back beside
// the new one (sim seed 41704: m2-3, collected while it ran, and m1-2,
// whose Nomad client was disconnected, ran epoch 2 blind while m0-3
// recovered epoch 3; the heal gave epoch 2 its quorum back). Without a
// quorum it serves no write, so stopping loses none; the next observation
// that succeeds decides what its data becomes (plan_data's rules for data
// of a replaced epoch). Not on an unconfirmed record (a recovery that
// may never start: Consul may have restored one, or 'recover
// -keep-running' abandoned it), not on its own recorded recovery (its
// seeder is this member: resumeRecovery restarts it as the new epoch), not
// while its incarnation has a quorum (then the normal loop's settles
// decides once the provider answers: stopping a serving quorum on a
// record alone would trust a planted record over a live cluster).
//
// A member it stopped (o.Fenced: not running, no observation succeeded
// since) starts its data again (Rejoin) without the provider once a
// peer (o.Peers: the instances last listed, asked again) answers as a
// healthy voter, with a quorum, of its own incarnation: the fence's
// reason, an incarnation without a quorum that a heal could give one
// back, is gone, and its start gives no quorum to an incarnation that
// has none (review rev18g R3; and R2: a member a planted record stopped
// comes back beside its serving peers). Never on the record alone: a
// record naming its epoch again may be an older one Consul restored from
// a backup, or no record one Consul lost, while the newer incarnation
// runs (41704 again); those wait for the provider, whose observation
// decides what the data becomes.
func PlanUnobserved(o Observation) Decision { return rules{}.PlanUnobserved(o) }

func (r rules) planUnobserved(o Observation) Decision {
	name := o.Self.Name
	if o.Local.Name != "" {
		name = o.Local.Name
	}
	if !o.Running && o.Fenced {
		return r.resumeFenced(o, name)
	}
	if !o.Running || o.MembersKnown || !r.leaveGuard(stopBlindWhenSuperseded) {
		return Decision{Kind: Wait, Name: name, Reason: "observation failed: skipping until the provider answers"}
	}
	if o.Paused != "" {
		// An operator's pause holds back every stop the loop would
		// make (review rev18g R4); unknown counts as paused.
		return Decision{Kind: Wait, Name: name, Reason: fmt.Sprintf("observation failed, running without a quorum; the cluster is paused (%s): not stopping", o.Paused)}
	}
	l, rec := o.Local, o.Record
	if l.Token == "" || rec == nil || rec.ClusterID == 0 || rec.Seeder == name || rec.Seeder == o.Self.Name || rec.Epoch <= l.Epoch {
		return Decision{Kind: Wait, Name: name, Reason: "observation failed, running without a quorum: skipping until the provider answers"}
	}
	return Decision{Kind: StopSuperseded, Name: name, Reason: fmt.Sprintf("observation failed, running without a quorum, and the record names epoch %d (token %s, cluster %x, by %s), newer than this member's epoch %d: its incarnation was replaced; stopping etcd, keeping the data, so that it never gives the old incarnation its quorum back beside the new one", rec.Epoch, short(rec.Token), rec.ClusterID, rec.Seeder, l.Epoch)}
}

// resumeFenced decides for a member the blind fence stopped, while its
// observation still fails (PlanUnobserved).
func (r rules) resumeFenced(o Observation, name string) Decision {
	l := o.Local
	wait := Decision{Kind: Wait, Name: name, Reason: "stopped as superseded while the provider does not answer: starting again once the provider answers or a peer serves this member's incarnation with a quorum"}
	if !r.leaveGuard(resumeFencedBesideOwnQuorum) || l.Token == "" || l.ClusterID == 0 {
		return wait
	}
	if o.Paused != "" {
		wait.Reason = fmt.Sprintf("stopped as superseded while the provider does not answer; the cluster is paused (%s): not starting", o.Paused)
		return wait
	}
	if rec := o.Record; rec != nil && rec.ClusterID != 0 && rec.Epoch > l.Epoch && rec.Seeder != name && rec.Seeder != o.Self.Name {
		wait.Reason = fmt.Sprintf("stopped as superseded while the provider does not answer, and the record still names epoch %d (confirmed, by %s), newer than this member's epoch %d: a peer serving this incarnation is an old quorum beside the new one, and this member does not add a voter to it; not starting", rec.Epoch, rec.Seeder, l.Epoch)
		return wait
	}
	for _, p := range o.Peers {
		if p.Running && !p.Learner && p.Healthy && p.Token == l.Token && p.Epoch == l.Epoch && p.ClusterID == l.ClusterID {
			return Decision{Kind: Rejoin, Name: name, Reason: fmt.Sprintf("stopped as superseded while the provider does not answer, and %s serves this member's incarnation (epoch %d, token %s, cluster %x) with a quorum: the reason for the stop is gone; starting the data again", p.Name, l.Epoch, short(l.Token), l.ClusterID)}
		}
	}
	return wait
}
