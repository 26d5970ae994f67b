package task

import (
	"github.com/etcd-nomad/etcd-nomad/datadir"

	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
)

// adoptPrevious moves the data of a previous member of this cluster into
// root when root does not exist yet (invariant 6). Nomad moves a
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
//
// Data this process may not read (a cluster moved from raw_exec, whose
// members ran as root with 0700 directories, to the docker image's uid
// 65532) is an *UnreadableDataError, never skipped: a member that started
// empty beside it would leave every member's data behind, one replacement
// at a time (invariant 6). Only names no
// provider gives a member are skipped, logged (mayBeMember: a host volume's
// lost+found, root's 0700 on a filesystem of its own, which stopped every
// docker member for good). A name
// says nothing else: a predecessor may be named after a group renamed in
// the same update, or be a static member of another length (TestUnreadablePredecessorOfAnyNameStopsTheMember); an operator's own directory there stops the member, naming it,
// and costs a move.
func adoptPrevious(root, cluster, host string, owner func(name string) (listed, live bool)) (string, error) {
	return adoptPreviousLogged(root, cluster, host, owner, hclog.NewNullLogger())
}

// adoptPreviousLogged is adoptPrevious, logging the unreadable siblings it
// skips to log.
func adoptPreviousLogged(root, cluster, host string, owner func(name string) (listed, live bool), log hclog.Logger) (string, error) {
	if _, err := os.Stat(root); errors.Is(err, fs.ErrPermission) {
		return "", unreadable(root, err)
	} else if err == nil || !errors.Is(err, os.ErrNotExist) {
		return "", nil // this allocation has started before: its own data rules
	}
	parent := filepath.Dir(root)
	ents, err := os.ReadDir(parent)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if errors.Is(err, fs.ErrPermission) {
		return "", unreadable(parent, err)
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
		if errors.Is(err, fs.ErrPermission) {
			u := unreadable(filepath.Join(dir, "current", datadir.MetaFile), err)
			if listed || mayBeMember(e.Name()) {
				return "", u
			}
			log.Warn("skipping a directory beside the members' that this member may not read: no member is named so", "dir", dir, "why", u.Error())
			continue
		}
		if err != nil {
			continue
		}
		var meta datadir.Meta
		if json.Unmarshal(b, &meta) != nil || meta.Cluster != cluster || datadir.WALInUse(filepath.Join(dir, "current", "etcd", "member", "wal")) {
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

// mayBeMember reports whether a directory called name beside the member's
// own may be a previous member's: any name but lost+found (a filesystem's
// own, root's, 0700) and hidden ones, which no provider gives a member.
func mayBeMember(name string) bool {
	return name != "lost+found" && !strings.HasPrefix(name, ".")
}

// UnreadableDataError is data in the member's data directory that its
// process may not read: its path, the owner and mode of the first part of
// that path it is refused (Blocked), and the member's own uid and gid. The
// member stops on it (New returns it) instead of starting empty beside it.
type UnreadableDataError struct {
	Path, Blocked        string
	UID, GID             int // Blocked's owner; -1 when unknown
	Mode                 fs.FileMode
	MemberUID, MemberGID int
	Err                  error
}

func (e *UnreadableDataError) Error() string {
	owner := "owner unknown"
	if e.UID >= 0 {
		owner = fmt.Sprintf("owned by uid %d, gid %d, mode %04o", e.UID, e.GID, e.Mode.Perm())
	}
	return fmt.Sprintf("%s is not readable by this member (uid %d, gid %d): %s is %s. A previous member's data may be there, written under another driver or user (raw_exec runs members as root; the docker image as uid 65532), and a member that started empty beside it would leave it behind; not starting. Give the data to the member's user on the client (chown -R %d:%d on the data directory: docs/install.md, With Docker, switching drivers), or run the job as the data's owner; if it holds no member's data, move it out of the data directory: %v",
		e.Path, e.MemberUID, e.MemberGID, e.Blocked, owner, e.MemberUID, e.MemberGID, e.Err)
}

func (e *UnreadableDataError) Unwrap() error { return e.Err }

// unreadable describes path, refused with err: the deepest part of it this
// process may stat is what refuses it.
func unreadable(path string, err error) *UnreadableDataError {
	e := &UnreadableDataError{Path: path, Blocked: path, UID: -1, GID: -1, MemberUID: os.Geteuid(), MemberGID: os.Getegid(), Err: err}
	for p := path; ; p = filepath.Dir(p) {
		if st, serr := os.Lstat(p); serr == nil {
			e.Blocked, e.Mode = p, st.Mode()
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				e.UID, e.GID = int(sys.Uid), int(sys.Gid)
			}
			break
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	return e
}
