package task

import (
	"github.com/etcd-nomad/etcd-nomad/datadir"

	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
)

// adoptPrevious moves the data of a previous member of this cluster into
// root when root does not exist yet (safety issue, defect 8). Nomad moves a
// replaced allocation's whole alloc/data into its replacement (sticky +
// migrate ephemeral disk: destructive job updates, rescheduled failures),
// and a host volume keeps it on the host; the directory is named after the
// old allocation's member, so the new member would start empty and the old
// directory would be carried along forever.
//
// A candidate holds metadata of this cluster; its owner is no live
// instance (the provider's running slots by name; a stopping allocation the
// server still lists does not count, its local stop is what let Nomad move
// the disk); no etcd holds its WAL locked (etcd locks its WAL files while
// it runs: on a shared host volume, a running sibling); and its etcd left
// it cleanly stopped (Meta.Stopped), or it was last started on this host
// (Meta.Host) by an owner the provider no longer lists (a crash, then a
// reschedule here: Nomad renames the terminated allocation's disk). Nomad
// can hand over a copy taken while the owner still ran on another host,
// when a lost allocation's client comes back: that copy lags a member that
// runs on with the same identity, and starting it would give one raft
// identity two logs and two votes. Exactly one candidate is adopted, never
// two (which one would
// be a guess). Identity stays the name persisted in the data (invariant 6).
// Nothing is deleted: the directory is renamed. It returns the adopted
// directory, or "" when nothing was adopted.
func adoptPrevious(root, cluster, host string, owner func(name string) (listed, live bool)) (string, error) {
	if _, err := os.Stat(root); err == nil || !errors.Is(err, os.ErrNotExist) {
		return "", nil // this allocation has started before: its own data rules
	}
	parent := filepath.Dir(root)
	ents, err := os.ReadDir(parent)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("look for a previous member's data in %s: %w", parent, err)
	}
	var cands, skipped []string
	for _, e := range ents {
		if !e.IsDir() || e.Name() == filepath.Base(root) {
			continue
		}
		listed, live := owner(e.Name())
		if live {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, "current", datadir.MetaFile))
		if err != nil {
			continue
		}
		var meta datadir.Meta
		if json.Unmarshal(b, &meta) != nil || meta.Cluster != cluster || walInUse(filepath.Join(dir, "current", "etcd", "member", "wal")) {
			continue
		}
		// Moved on this host after its owner ended (a crash, then
		// Nomad's reschedule here) is the owner's final state too.
		movedHere := meta.Host != "" && meta.Host == host && !listed
		if !meta.Stopped && !movedHere {
			skipped = append(skipped, dir)
			continue
		}
		cands = append(cands, dir)
	}
	sort.Strings(cands)
	switch len(cands) {
	case 0:
		if len(skipped) > 0 {
			return "", fmt.Errorf("previous member data in %v was not stopped cleanly (a copy taken while its etcd ran, or after a crash: the member it came from may still run with that identity and newer data): not adopting it; starting empty (it is kept)", skipped)
		}
		return "", nil
	case 1:
		if err := os.Rename(cands[0], root); err != nil {
			return "", fmt.Errorf("adopt %s: %w", cands[0], err)
		}
		return cands[0], nil
	default:
		return "", fmt.Errorf("%d previous members' data dirs of cluster %q in %s (%v): adopting none of them; starting empty (they are kept)", len(cands), cluster, parent, cands)
	}
}

// walInUse reports whether an etcd process holds a lock on a WAL file in
// dir, tried with etcd's own locking (a lock taken here is released at once).
func walInUse(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if filepath.Ext(e.Name()) != ".wal" {
			continue
		}
		l, err := fileutil.TryLockFile(filepath.Join(dir, e.Name()), os.O_RDWR, fileutil.PrivateFileMode)
		if errors.Is(err, fileutil.ErrLocked) {
			return true
		}
		if err == nil {
			l.Close()
		}
	}
	return false
}
