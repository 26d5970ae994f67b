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
func PlanUnobserved(o Observation) Decision { return rules{}.PlanUnobserved(o) }

func (r rules) planUnobserved(o Observation) Decision {
	name := o.Self.Name
	if o.Local.Name != "" {
		name = o.Local.Name
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
