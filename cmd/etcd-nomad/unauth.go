package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
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

// acceptNamed lets enc take, without a MAC, the objects the operator
// named and no other: snapshot full itself when acceptSnap
// (-accept-unauthenticated, which names it), and the delta segments
// after it listed in deltas (-accept-unauthenticated-deltas, comma
// separated; "none" for none). A store writer can append a delta without
// a MAC to any chain, so the snapshot's acceptance never extends to what
// follows it: each delta is named, as the operator saw it in the
// refusal's list, and one appended since is not among the names. With
// acceptSnap and unauthenticated deltas after the snapshot but no
// -accept-unauthenticated-deltas, it refuses, listing them. left are the
// unauthenticated deltas after full that are not taken: the chain ends
// before the first of them.
func acceptNamed(all []snapshot.Meta, enc *snapshot.Encryption, full snapshot.Meta, acceptSnap bool, deltas string) (left []snapshot.Meta, err error) {
	enc.AcceptUnauthenticated, enc.AcceptNames = false, nil
	if len(enc.MACKey) == 0 {
		return nil, nil // nothing is authenticated: nothing to accept
	}
	names := map[string]bool{}
	if acceptSnap && full.MAC == "" {
		names[full.Name] = true
	}
	var unauth []snapshot.Meta
	for _, m := range all {
		if m.Kind == snapshot.KindDelta && m.Base == full.Name && m.MAC == "" {
			unauth = append(unauth, m)
		}
	}
	sort.SliceStable(unauth, func(i, j int) bool { return unauth[i].FirstRevision < unauth[j].FirstRevision })
	switch {
	case deltas == "none":
		left = unauth
	case deltas != "":
		want := map[string]bool{}
		for _, n := range strings.Split(deltas, ",") {
			want[strings.TrimSpace(n)] = true
		}
		for _, m := range unauth {
			if want[m.Name] {
				names[m.Name] = true
				delete(want, m.Name)
			} else {
				left = append(left, m)
			}
		}
		if len(want) > 0 {
			var missing []string
			for n := range want {
				missing = append(missing, n)
			}
			sort.Strings(missing)
			return nil, fmt.Errorf("-accept-unauthenticated-deltas names %s, not among the deltas without a MAC after snapshot %s (%s); nothing recorded",
				strings.Join(missing, ", "), full.Name, listDeltas(unauth))
		}
	case len(unauth) > 0 && acceptSnap:
		var flag []string
		for _, m := range unauth {
			flag = append(flag, m.Name)
		}
		return nil, fmt.Errorf("snapshot %s is followed by %d delta(s) without a MAC, which anyone who can write the store can append: %s. "+
			"-accept-unauthenticated takes the snapshot you named and nothing after it: check those deltas, then name the ones you vouch for with "+
			"-accept-unauthenticated-deltas %s (they are replayed, and signed with the key), or restore the snapshot without them with "+
			"-accept-unauthenticated-deltas none; nothing recorded", full.Name, len(unauth), listDeltas(unauth), strings.Join(flag, ","))
	default:
		left = unauth
	}
	if len(names) > 0 {
		enc.AcceptNames = names
	}
	return left, nil
}

// listDeltas describes deltas for an operator choosing among them.
func listDeltas(ms []snapshot.Meta) string {
	if len(ms) == 0 {
		return "there are none"
	}
	var b []string
	for _, m := range ms {
		b = append(b, fmt.Sprintf("%s (revisions %d-%d, %d events, written %s)", m.Name, m.FirstRevision, m.Revision, m.Events, m.Created.UTC().Format(time.RFC3339)))
	}
	return strings.Join(b, "; ")
}
