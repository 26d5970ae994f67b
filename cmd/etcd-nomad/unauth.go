package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// requireSnapshotKey refuses to read cl's snapshots without the MAC key
// when the cluster has one: with tls auto and a shared coordinator the
// job holds the KEK, every member authenticates its snapshots with it,
// and a reader without it would take an object without a MAC (anyone's
// who can write the store) as genuine and refuse every genuine one, so
// that "latest" would be the store writer's. As 'tls fingerprint' does
// for the sealed CA, the local coordinator is left alone (its directory
// is the machine's own).
func requireSnapshotKey(cl *config.Cluster) error {
	if cl.Snapshot == nil || cl.TLS.Mode != config.TLSAuto || cl.Coordination.Kind == config.CoordLocal {
		return nil
	}
	if kek, err := clusterca.KEKFromEnv(); err != nil || kek != nil {
		return err // a malformed key is refused as such
	}
	return fmt.Errorf("%s is not set: with tls auto and %s coordination the members authenticate every snapshot with a MAC keyed from it, "+
		"and without it a snapshot with no MAC (which anyone who can write the store can write) would read as genuine and every genuine one as unreadable; "+
		"export %s=\"$(nomad var get -item %s nomad/jobs/JOB)\" and run it again", certs.KEKEnv, cl.Coordination.Kind, certs.KEKEnv, jobs.CAKEKKey)
}

// acceptance is what an operator's restore takes beyond what
// authenticates, and what it may leave out.
type acceptance struct {
	// snapshot (-accept-unauthenticated): the snapshot named, without a
	// MAC.
	snapshot bool
	// deltas (-accept-unauthenticated-deltas): the deltas without a MAC
	// after it, by name, comma separated.
	deltas string
	// loss (recover's and snapshot restore's -accept-data-loss): restore
	// although deltas of the snapshot that do not authenticate hold
	// revisions past the chain end; their writes are dropped.
	loss bool
	// noDeltas (snapshot restore -no-deltas): the snapshot alone, every
	// delta left out by choice.
	noDeltas bool
}

// any reports whether the operator accepts an object without a MAC.
func (a acceptance) any() bool { return a.snapshot || a.deltas != "" }

// recordLineage reads cl's cluster record, without the lock, for the
// lineage an operator's "latest" is chosen in (snapshot.Lineage.Of); the
// zero Lineage, which ties nothing, when there is no record.
func recordLineage(ctx context.Context, cl *config.Cluster) (snapshot.Lineage, error) {
	co, err := backends.Coordinator(cl)
	if err != nil {
		return snapshot.Lineage{}, err
	}
	rec, err := co.Record(ctx)
	if errors.Is(err, coord.ErrNoRecord) {
		return snapshot.Lineage{}, nil
	}
	if err != nil {
		return snapshot.Lineage{}, fmt.Errorf("read the cluster record (\"latest\" is the newest snapshot of its lineage; or name the snapshot): %w", err)
	}
	return snapshot.Lineage{ClusterID: rec.ClusterID, Epoch: rec.Epoch}, nil
}

// newestOfLineage is what "latest" names among kept (the objects that
// authenticate): the newest snapshot of lineage (snapshot.Newest over
// what lineage.Of keeps), and its chain end. A newer snapshot of another
// incarnation (a store writer put back a genuine one of an earlier
// incarnation of the job, same name and key, at a higher epoch) is never
// "latest": it is named in a warning, with why and how it is restored
// by name.
func newestOfLineage(ui cli.Ui, kept []snapshot.Meta, lineage snapshot.Lineage) (snapshot.Meta, int64, bool) {
	mine, foreign := lineage.Split(kept)
	full, _, end, found := snapshot.Newest(mine)
	if f, _, _, ok := snapshot.Newest(foreign); ok && (!found || snapshot.Later(f, full)) {
		ui.Warn("\"latest\" is the newest snapshot of the cluster record's lineage, not " + lineage.WhyNot(f))
	}
	return full, end, found
}

// chooseRestore is the one path by which an operator's restore ('recover
// -from snapshot:NAME', 'snapshot restore NAME') chooses from the store
// listing all: it resolves name ("latest": the newest snapshot that
// authenticates and is of lineage, the cluster record's (newestOfLineage),
// warning of a newer object that does not authenticate; never with
// -accept-unauthenticated or -accept-unauthenticated-deltas; a snapshot
// of another incarnation only by name, with a warning), lets enc
// take the objects without a MAC the operator named (acceptNamed), and
// refuses while deltas of that snapshot that do not authenticate hold
// revisions past the chain end the restore reaches (refusedBeyond). It
// returns the snapshot and that chain end. Nothing is recorded or
// written before it returns.
func chooseRestore(ui cli.Ui, all []snapshot.Meta, enc *snapshot.Encryption, lineage snapshot.Lineage, name string, acc acceptance) (snapshot.Meta, int64, error) {
	enc.AcceptUnauthenticated, enc.AcceptNames = false, nil
	kept, _ := enc.Authentic(all)
	var full snapshot.Meta
	found := false
	if name == "latest" {
		var end int64
		full, end, found = newestOfLineage(ui, kept, lineage)
		newer := newestRefusedAfter(all, kept, end, full.Name)
		if acc.any() {
			// "latest" among objects anyone who can write the store can
			// add is the newest of theirs: what is taken without a MAC
			// is named.
			return snapshot.Meta{}, 0, fmt.Errorf("-accept-unauthenticated and -accept-unauthenticated-deltas take the snapshot you name, never latest: find it with 'etcd-nomad snapshot list'%s", describeRefused(newer))
		}
		if newer != nil {
			ui.Warn(fmt.Sprintf("\"latest\" is the newest snapshot that authenticates (chain end %d)%s", end, describeRefused(newer)))
		}
	} else {
		for _, m := range snapshot.Full(all) {
			if m.Name == name {
				full, found = m, true
			}
		}
	}
	if !found {
		if name == "latest" {
			return snapshot.Meta{}, 0, errors.New("the store holds no snapshot of the cluster record's lineage that authenticates")
		}
		return snapshot.Meta{}, 0, fmt.Errorf("the store holds no full snapshot %q ('etcd-nomad snapshot list' shows them)", name)
	}
	if why := lineage.WhyNot(full); why != "" {
		ui.Warn(why + ": restoring it because you named it; the members' data of the record's lineage is set aside for it ('recover' asks for -accept-data-loss when members hold data)")
	}
	if err := acceptNamed(all, enc, full, acc); err != nil {
		return snapshot.Meta{}, 0, err
	}
	if acc.noDeltas {
		return full, full.Revision, nil
	}
	kept, _ = enc.Authentic(all)
	end := full.Revision
	if chain, _ := snapshot.Chain(kept, full); len(chain) > 0 {
		// The restore replays the deltas recorded after it.
		end = chain[len(chain)-1].Revision
	}
	if f, fend, ok := newerForeign(kept, lineage, full, end); ok {
		// A genuine snapshot newer than the one restored, of no
		// incarnation of the record's lineage: put back by a store
		// writer, or taken of an incarnation that ran after the record
		// (Consul restored an older one), whose writes this restore would
		// set aside; the members wait beside it (invariant 8).
		what := fmt.Sprintf("the store holds snapshot %s (cluster id %s, epoch %d, its chain reaching revision %d), newer than %s (epoch %d, revision %d) and of no incarnation of the cluster record's lineage: "+
			"put back by someone who can write the store, or taken of an incarnation that ran after the record (Consul restored an older one); only you can tell",
			f.Name, f.ClusterID, f.Epoch, fend, full.Name, full.Epoch, end)
		if !acc.loss {
			return snapshot.Meta{}, 0, fmt.Errorf("%s: not restoring, nothing recorded; if it is this cluster's newest data, restore it by name (snapshot %s); to restore %s all the same (its writes are not taken), add -accept-data-loss", what, f.Name, full.Name)
		}
		ui.Warn(what + ": not taken, as -accept-data-loss accepts")
	}
	if name != "latest" {
		// A snapshot named while the store holds a newer object of
		// another chain that does not authenticate: as with latest, its
		// writes may be the cluster's newest, and this restore sets
		// them aside; the operator says so with -accept-data-loss.
		if newer := newestRefusedAfter(all, kept, end, full.Name); newer != nil {
			what := fmt.Sprintf("snapshot %s's chain reaches revision %d%s", full.Name, end, describeRefused(newer))
			if !acc.loss {
				return snapshot.Meta{}, 0, fmt.Errorf("%s: not restoring, nothing recorded; to restore %s all the same (the newer object's writes are not taken), add -accept-data-loss", what, full.Name)
			}
			ui.Warn(what + ": not taken, as -accept-data-loss accepts")
		}
	}
	return full, end, refusedBeyond(ui, *enc, all, kept, full, end, acc)
}

// newerForeign is the newest snapshot of kept (what authenticates) of no
// incarnation of lineage, other than full, when it is newer than full
// (snapshot.Later: a higher epoch, or the same at a higher revision) or
// its chain reaches past end, with its chain end.
func newerForeign(kept []snapshot.Meta, lineage snapshot.Lineage, full snapshot.Meta, end int64) (snapshot.Meta, int64, bool) {
	_, foreign := lineage.Split(kept)
	var others []snapshot.Meta
	for _, m := range foreign {
		if m.Name != full.Name && !(m.Kind == snapshot.KindDelta && m.Base == full.Name) {
			others = append(others, m)
		}
	}
	f, _, fend, ok := snapshot.Newest(others)
	if !ok || !snapshot.Later(f, full) && fend <= end {
		return snapshot.Meta{}, 0, false
	}
	return f, fend, true
}

// acceptNamed lets enc take, without a MAC, the objects the operator
// named and no other: snapshot full itself with acc.snapshot
// (-accept-unauthenticated, which names it), and the delta segments of
// full listed in acc.deltas (-accept-unauthenticated-deltas). A store
// writer can append a delta without a MAC to any chain, so the
// snapshot's acceptance never extends to what follows it: each delta is
// named, as the operator saw it in refusedBeyond's list, and one
// appended since is not among the names. A name that is no delta of full
// without a MAC is refused.
func acceptNamed(all []snapshot.Meta, enc *snapshot.Encryption, full snapshot.Meta, acc acceptance) error {
	enc.AcceptUnauthenticated, enc.AcceptNames = false, nil
	if len(enc.MACKey) == 0 {
		return nil // nothing is authenticated: nothing to accept
	}
	names := map[string]bool{}
	if acc.snapshot && full.MAC == "" {
		names[full.Name] = true
	}
	if acc.deltas != "" {
		var unauth []snapshot.Meta
		for _, m := range all {
			if m.Kind == snapshot.KindDelta && m.Base == full.Name && m.MAC == "" {
				unauth = append(unauth, m)
			}
		}
		var missing []string
		for _, n := range strings.Split(acc.deltas, ",") {
			n = strings.TrimSpace(n)
			if !slices.ContainsFunc(unauth, func(m snapshot.Meta) bool { return m.Name == n }) {
				missing = append(missing, n)
				continue
			}
			names[n] = true
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			sort.SliceStable(unauth, func(i, j int) bool { return unauth[i].FirstRevision < unauth[j].FirstRevision })
			return fmt.Errorf("-accept-unauthenticated-deltas names %q, not among the deltas without a MAC of snapshot %s (%s); nothing recorded",
				missing, full.Name, listDeltas(unauth, nil))
		}
	}
	if len(names) > 0 {
		enc.AcceptNames = names
	}
	return nil
}

// refusedBeyond is the one check of what a restore from full leaves out:
// the deltas of full that do not authenticate (no MAC and not named with
// -accept-unauthenticated-deltas; or a MAC under a KEK since created
// again, which no flag accepts) and hold revisions past end, the chain
// end the restore reaches (kept: what authenticates, with what the
// operator named). Their writes would be dropped silently: it refuses,
// listing each and what takes it, unless acc.loss, which drops them with
// a warning. A store writer can append such a delta to any chain: that
// costs the operator a flag, never a restore of it.
func refusedBeyond(ui cli.Ui, enc snapshot.Encryption, all, kept []snapshot.Meta, full snapshot.Meta, end int64, acc acceptance) error {
	ok := map[string]bool{}
	for _, m := range kept {
		ok[m.Name] = true
	}
	var left, unauth []snapshot.Meta
	why := map[string]string{}
	forged := false
	last := end
	for _, m := range all {
		if m.Kind != snapshot.KindDelta || m.Base != full.Name || ok[m.Name] || m.Revision <= end {
			continue
		}
		left = append(left, m)
		last = max(last, m.Revision)
		if err := enc.Authenticated(m); errors.Is(err, snapshot.ErrUnauthenticated) {
			why[m.Name] = "no MAC"
			unauth = append(unauth, m)
		} else {
			why[m.Name] = "a MAC that does not verify"
			forged = true
		}
	}
	if len(left) == 0 {
		return nil
	}
	sort.SliceStable(left, func(i, j int) bool { return left[i].FirstRevision < left[j].FirstRevision })
	what := fmt.Sprintf("snapshot %s's chain reaches revision %d, and %d delta(s) of it that do not authenticate hold revisions up to %d: %s",
		full.Name, end, len(left), last, listDeltas(left, why))
	if acc.loss {
		ui.Warn(what + ": not replayed, their writes dropped, as -accept-data-loss accepts")
		return nil
	}
	var how []string
	if len(unauth) > 0 {
		sort.SliceStable(unauth, func(i, j int) bool { return unauth[i].FirstRevision < unauth[j].FirstRevision })
		var names []string
		for _, m := range unauth {
			names = append(names, m.Name)
		}
		snap := ""
		if full.MAC == "" {
			snap = " with -accept-unauthenticated"
		}
		how = append(how, fmt.Sprintf("anyone who can write the store can append a delta without a MAC: check them, then name the ones you vouch for with -accept-unauthenticated-deltas %s%s (replayed, and signed with the key)",
			strings.Join(names, ","), snap))
	}
	if forged {
		how = append(how, `a MAC that does not verify (written under a KEK since created again, or a store writer's) is taken by no flag: if they are genuine, delete the "mac" line of their .meta.json (and of the snapshot's) and name them`)
	}
	how = append(how, "to restore without them, add -accept-data-loss")
	return fmt.Errorf("%s: not restoring, nothing recorded. %s", what, strings.Join(how, "; "))
}

// newestRefusedAfter is the newest object of all that does not
// authenticate (not in kept) and may hold revisions past end (its chain's
// reach, snapshot.Reach: a refused snapshot's deltas that authenticate
// count), nil if none; snapshot base and its deltas are left to
// refusedBeyond. The object returned carries its reach as its revision.
func newestRefusedAfter(all, kept []snapshot.Meta, end int64, base string) *snapshot.Meta {
	ok := map[string]bool{}
	for _, m := range kept {
		ok[m.Name] = true
	}
	var newest *snapshot.Meta
	for _, m := range all {
		if ok[m.Name] || base != "" && (m.Name == base || m.Kind == snapshot.KindDelta && m.Base == base) {
			continue
		}
		m.Revision = snapshot.Reach(all, m)
		if m.Revision > end && (newest == nil || m.Revision > newest.Revision) {
			newest = &m
		}
	}
	return newest
}

// describeRefused names a newer object that does not authenticate, and
// how it is restored if it is genuine ("" for none).
func describeRefused(m *snapshot.Meta) string {
	if m == nil {
		return ""
	}
	if m.Corrupt != "" {
		// Only its name is known (a delta's base is not): no restore of
		// it can be named.
		return fmt.Sprintf("; the store holds %s (epoch %d, revision %d), newer, whose metadata cannot be read (%s): nothing restores it without its metadata; if you know it is genuine, put its metadata back in the store, else delete it",
			m.Name, m.Epoch, m.Revision, m.Corrupt)
	}
	base := m.Name
	if m.Kind == snapshot.KindDelta {
		base = m.Base
	}
	return fmt.Sprintf("; the store holds %s (epoch %d, revision %d), newer, which does not authenticate: anyone who can write the store can write one, so it is taken only by name, if you know it is genuine (snapshot %s; -accept-unauthenticated for a snapshot without a MAC, -accept-unauthenticated-deltas for deltas without one)",
		m.Name, m.Epoch, m.Revision, base)
}

// listDeltas describes deltas for an operator choosing among them, with
// why each is left out when why names it.
func listDeltas(ms []snapshot.Meta, why map[string]string) string {
	if len(ms) == 0 {
		return "there are none"
	}
	var b []string
	for _, m := range ms {
		w := ""
		if why[m.Name] != "" {
			w = ", " + why[m.Name]
		}
		b = append(b, fmt.Sprintf("%s (revisions %d-%d, %d events, written %s%s)", m.Name, m.FirstRevision, m.Revision, m.Events, m.Created.UTC().Format(time.RFC3339), w))
	}
	return strings.Join(b, "; ")
}
