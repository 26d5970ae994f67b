package snapshot

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Expired returns the snapshots retention removes: beyond the newest
// keepCount (by epoch and revision: Later), or older than maxAge (if
// positive, by their creation time). The newest snapshot is
// never returned, whatever the settings. Pure: now is passed in.
func Expired(list []Meta, keepCount int, maxAge time.Duration, now time.Time) []Meta {
	if len(list) == 0 {
		return nil
	}
	sorted := append([]Meta(nil), list...)
	sort.SliceStable(sorted, func(i, j int) bool { return Later(sorted[i], sorted[j]) })
	keepCount = max(keepCount, 1)
	var out []Meta
	for i, m := range sorted {
		if i == 0 {
			continue // the newest stays
		}
		if i >= keepCount || (maxAge > 0 && now.Sub(m.Created) > maxAge) {
			out = append(out, m)
		}
	}
	return out
}

// orphanDeltas returns the deltas retention removes with their full
// snapshot: those of a snapshot Expired returns, and those whose snapshot
// is not listed at all and that are older than OrphanAge (a listing skips
// an unreadable metadata file, which must not cost the deltas at once).
// The newest snapshot's deltas are never returned.
func orphanDeltas(list []Meta, keepCount int, maxAge time.Duration, now time.Time) []Meta {
	return orphanDeltasBeside(list, nil, keepCount, maxAge, now)
}

// orphanDeltasBeside is orphanDeltas with the names of listed snapshots
// retention leaves alone (refused ones): their deltas are not orphans.
func orphanDeltasBeside(list []Meta, present map[string]bool, keepCount int, maxAge time.Duration, now time.Time) []Meta {
	listed, expired := map[string]bool{}, map[string]bool{}
	for name := range present {
		listed[name] = true
	}
	fulls := Full(list)
	for _, m := range fulls {
		listed[m.Name] = true
	}
	for _, m := range Expired(fulls, keepCount, maxAge, now) {
		expired[m.Name] = true
	}
	var out []Meta
	for _, m := range list {
		if m.Kind == KindDelta && (expired[m.Base] || (!listed[m.Base] && now.Sub(m.Created) > OrphanAge)) {
			out = append(out, m)
		}
	}
	return out
}

// Sweeper is a store that can remove what failed saves left behind and
// no listing shows: objects without metadata, incomplete uploads.
type Sweeper interface {
	// Sweep removes such leftovers last modified before cutoff and
	// returns what it removed.
	Sweep(ctx context.Context, cutoff time.Time) ([]string, error)
}

// Prune applies retention to store (Expired over its full snapshots, with
// the deltas of those it removes: orphanDeltas) and, when
// the store is a Sweeper, removes leftovers older than OrphanAge. It
// returns what it removed and keeps going past single failures.
//
// Retention ranks, keeps and removes only the objects that authenticate
// under e (Encryption.Authentic, never accepting unauthenticated ones)
// and are of lineage (Lineage.Of, the confirmed record's): what members
// restore. An object members refuse (no MAC, the previous KEK's, a store
// writer's plant) or a genuine snapshot of another incarnation put back
// (a higher epoch, which Later would rank first) never takes a retained
// place or the newest's, so it never pushes the lineage's newest
// snapshot out; and it is never deleted here either (it may be the data
// an operator recovers from, by name): it is left to the operator.
func Prune(ctx context.Context, store Store, e Encryption, lineage Lineage, keepCount int, maxAge time.Duration, now time.Time) ([]string, error) {
	all, err := store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	e.AcceptUnauthenticated = false
	list, refused := e.Authentic(all)
	list, foreign := lineage.Split(list)
	refusedFull := map[string]bool{}
	for _, m := range Full(all) {
		if _, ok := refused[m.Name]; ok {
			refusedFull[m.Name] = true
		}
	}
	for _, m := range Full(foreign) {
		refusedFull[m.Name] = true
	}
	var removed []string
	var errs []error
	for _, old := range append(Expired(Full(list), keepCount, maxAge, now), orphanDeltasBeside(list, refusedFull, keepCount, maxAge, now)...) {
		if err := store.Delete(ctx, old.Name); err != nil {
			errs = append(errs, fmt.Errorf("retention: delete %s: %w", old.Name, err))
			continue
		}
		removed = append(removed, old.Name)
	}
	if sw, ok := store.(Sweeper); ok {
		swept, err := sw.Sweep(ctx, now.Add(-OrphanAge))
		removed = append(removed, swept...)
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep: %w", err))
		}
	}
	return removed, errors.Join(errs...)
}
