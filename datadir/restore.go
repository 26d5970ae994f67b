package datadir

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
	// Want, when not 0, is the revision the snapshot with its chain was
	// chosen for (the planner compared it with every member's data): an
	// install whose verified chain ends below it is refused before
	// anything is recorded (ChainShortError). 0 installs what verifies
	// (an operator's restore of a snapshot named by hand).
	Want int64
	// Skip names segments to leave out of the chain (found damaged by an
	// earlier install): the chain is built from the listing without them,
	// so an overlapping segment bridges one as it does in the planner's
	// view (the same listing, the same chain end).
	Skip map[string]bool
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
	// Chain is the deltas listed after the snapshot; Gap says the chain
	// after it has a gap (changes after the gap are not replayed).
	Chain []snapshot.Meta
	Gap   bool
	// Verified is the prefix of Chain whose segments were fetched,
	// verified and replayed: all an operator's adoption may sign.
	Verified []snapshot.Meta
	// End is the last revision the snapshot and the deltas that
	// verified hold together.
	End int64
	// Replay is the replay's result.
	Replay snapshot.ReplayResult
}

// ChainShortError refuses an install whose verified chain ends below the
// revision it was chosen for (Source.Want): a segment failed its checksum
// (Damaged) and what follows it cannot be replayed. Nothing was recorded
// and no data dir changed; the caller decides again with End.
type ChainShortError struct {
	Snapshot  string
	Want, End int64
	Damaged   string
	Why       string
	// Undecryptable: Damaged did not decrypt with this member's keys
	// (snapshot.NotDecrypted): a wrong key, perhaps, not the object.
	Undecryptable bool
}

func (e *ChainShortError) Error() string {
	return fmt.Sprintf("snapshot %s with its deltas verifies up to revision %d, below the %d it was chosen for (%s): not installed, nothing recorded", e.Snapshot, e.End, e.Want, e.Why)
}

// InstallNextEpoch installs snapshot src.Name in the member directory root
// as the next incarnation, the one way both 'etcd-nomad snapshot restore'
// and a member's automatic recovery do it: all or refuse. The snapshot is
// fetched and verified (into a data dir beside root's), the deltas after
// it are listed, every one fetched and verified (read errors retried,
// snapshot.FetchChain) and applied to that copy offline
// (snapshot.ApplyDeltas, every key read back); a read error, ctx ending or
// a read-back that differs is an error, never a shorter restore, and a
// verified end below src.Want is refused (ChainShortError). Only then
// next names the incarnation from it, under the caller's lock, and may
// record it before anything changes on disk (invariant 4: a member
// recovers by recording first) and stop the member's etcd; then it is
// installed (InstallSnapshot: the old data is set aside, never deleted).
// An error before next records nothing and changes no data dir; an error
// from next installs nothing.
func InstallNextEpoch(ctx context.Context, root string, src Source, next func(snapshot.Meta) (Incarnation, error), why string) (Installed, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return Installed{}, err
	}
	// The snapshot is fetched into an etcd data dir beside the member's
	// (the same filesystem: it is moved in, not copied). One left by an
	// install that died is only a copy of the stored snapshot.
	fetched := filepath.Join(root, ".install-"+src.Name)
	if err := os.RemoveAll(fetched); err != nil {
		return Installed{}, err
	}
	defer os.RemoveAll(fetched) // nothing once it is moved in
	out, err := fetchVerified(ctx, fetched, src)
	if err != nil {
		return out, err
	}
	in, err := next(out.Snapshot)
	if err != nil {
		return out, err
	}
	// The replay folds the chain's revisions into few transactions: the
	// bump must cover the revisions the lost cluster's clients saw up to
	// the chain's end, whatever the bump the caller estimated from the
	// taker's clock (a clock ahead made it too small).
	if covered := out.End - out.Snapshot.Revision; covered > 0 {
		in.RevisionBump = max(in.RevisionBump, uint64(covered)+snapshot.MinRevisionBump)
	}
	out.Aside, err = InstallSnapshot(ctx, root, fetched, in, why)
	return out, err
}

// VerifyInstall does what InstallNextEpoch does before it names and
// records the next incarnation, in scratch (a directory it creates and
// removes; as large as the database): the snapshot is fetched and
// verified, every delta of its chain fetched, verified and applied, and a
// verified end below src.Want is refused (ChainShortError). A command
// that records a restore another process carries out later (an
// operator's recovery, which a member installs at its next loop) calls it
// first, so that nothing is recorded that cannot be installed whole.
// A segment found damaged is left out and the chain verified again around
// it, as a member's installs do across its loops (Source.Skip): an
// overlapping segment may bridge it. A ChainShortError names the first
// damaged segment, and End is the furthest any way around the damage
// verified: verifying again for that End succeeds (an operator's
// -accept-data-loss).
func VerifyInstall(ctx context.Context, scratch string, src Source) (Installed, error) {
	defer os.RemoveAll(scratch)
	skip := maps.Clone(src.Skip)
	var firstShort *ChainShortError // names the first damaged segment
	for {
		if err := os.RemoveAll(scratch); err != nil {
			return Installed{}, err
		}
		src.Skip = skip
		got, err := fetchVerified(ctx, scratch, src)
		var short *ChainShortError
		if !errors.As(err, &short) {
			return got, err
		}
		if firstShort != nil {
			firstShort.End = max(firstShort.End, short.End)
		}
		if short.Damaged == "" || skip[short.Damaged] {
			if firstShort != nil {
				return got, firstShort // no way around: the damage is why
			}
			return got, err
		}
		if firstShort == nil {
			firstShort = short
		}
		if skip == nil {
			skip = map[string]bool{}
		}
		skip[short.Damaged] = true
	}
}

// fetchVerified fetches and verifies snapshot src.Name into the etcd data
// dir fetched and applies its verified chain to it (InstallNextEpoch's
// steps before next).
func fetchVerified(ctx context.Context, fetched string, src Source) (Installed, error) {
	var out Installed
	meta, err := snapshot.FetchInto(ctx, src.Store, src.Name, fetched, src.Encryption, src.Progress)
	if err != nil {
		return out, fmt.Errorf("fetch snapshot %s: %w", src.Name, err)
	}
	out.Snapshot, out.End = meta, meta.Revision
	if src.NoDeltas {
		return out, nil
	}
	list, err := src.Store.List(ctx)
	if err != nil {
		return out, fmt.Errorf("list the deltas after snapshot %s: %w", src.Name, err)
	}
	// A segment whose metadata does not authenticate is left out as a
	// damaged one is: the chain is built around it, as the planner's
	// view of the same listing is.
	list, _ = src.Encryption.Authentic(list)
	if len(src.Skip) > 0 {
		kept := list[:0:0]
		for _, m := range list {
			if !src.Skip[m.Name] {
				kept = append(kept, m)
			}
		}
		list = kept
	}
	out.Chain, out.Gap = snapshot.Chain(list, meta)
	fc, err := snapshot.FetchChain(ctx, src.Store, out.Chain, src.Encryption)
	if err != nil {
		return out, fmt.Errorf("fetch the deltas after snapshot %s: %w", src.Name, err)
	}
	out.End = max(out.End, fc.End)
	out.Verified = fc.Chain
	if src.Want > out.End {
		why := "the chain ends there"
		if fc.Damaged != "" {
			why = fc.Stopped
		}
		return out, &ChainShortError{Snapshot: src.Name, Want: src.Want, End: out.End, Damaged: fc.Damaged, Why: why, Undecryptable: fc.Undecryptable}
	}
	out.Replay, err = snapshot.ApplyDeltas(ctx, fetched, fc.Segments, meta.Revision)
	out.Replay.Stopped = fc.Stopped
	if err != nil {
		return out, fmt.Errorf("replay %d deltas over snapshot %s: %w", len(fc.Segments), src.Name, err)
	}
	return out, nil
}
