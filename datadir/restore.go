package datadir

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Source is a stored snapshot to install, with the deltas recorded after
// it (its chain, snapshot.Chain).
type Source struct {
	Store      snapshot.Store
	Encryption snapshot.Encryption
	Name       string
	// NoDeltas installs the full snapshot alone.
	NoDeltas bool
	// Progress, optional, reports the fetch.
	Progress snapshot.Progress
}

// Installed reports an InstallNextEpoch.
type Installed struct {
	// Snapshot is the fetched snapshot's metadata (zero if the fetch
	// failed).
	Snapshot snapshot.Meta
	// Aside is where the member's previous data went ("" if none).
	Aside string
	// Chain is the deltas replayed over the snapshot; Gap says the chain
	// after it has a gap (changes after the gap are not replayed).
	Chain []snapshot.Meta
	Gap   bool
	// Replay is the replay's result.
	Replay snapshot.ReplayResult
}

// InstallNextEpoch installs snapshot src.Name in the member directory root
// as the next incarnation, the one way both 'etcd-nomad snapshot restore'
// and a member's automatic recovery do it. The snapshot is fetched and
// verified first (into root); then next names the incarnation from it,
// under the caller's lock, and may record it before anything changes on
// disk (invariant 4: a member recovers by recording first) and stop the
// member's etcd; then the deltas after the snapshot are listed and it is
// installed with them (InstallSnapshot: the old data is set aside, never
// deleted). An error from next installs nothing.
func InstallNextEpoch(ctx context.Context, root string, src Source, next func(snapshot.Meta) (Incarnation, error), why string) (Installed, error) {
	var out Installed
	if err := os.MkdirAll(root, 0o700); err != nil {
		return out, err
	}
	// The snapshot is fetched into an etcd data dir beside the member's
	// (the same filesystem: it is moved in, not copied). One left by an
	// install that died is only a copy of the stored snapshot.
	fetched := filepath.Join(root, ".install-"+src.Name)
	if err := os.RemoveAll(fetched); err != nil {
		return out, err
	}
	defer os.RemoveAll(fetched) // nothing once it is moved in
	meta, err := snapshot.FetchInto(ctx, src.Store, src.Name, fetched, src.Encryption, src.Progress)
	if err != nil {
		return out, fmt.Errorf("fetch snapshot %s: %w", src.Name, err)
	}
	out.Snapshot = meta
	in, err := next(meta)
	if err != nil {
		return out, err
	}
	deltas := Deltas{Store: src.Store, Encryption: src.Encryption}
	if !src.NoDeltas {
		list, err := src.Store.List(ctx)
		if err != nil {
			return out, fmt.Errorf("list the deltas after snapshot %s: %w", src.Name, err)
		}
		deltas.Chain, out.Gap = snapshot.Chain(list, meta)
		out.Chain = deltas.Chain
	}
	out.Aside, out.Replay, err = InstallSnapshot(ctx, root, fetched, in, deltas, why)
	return out, err
}
