package task

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/etcd-nomad/etcd-nomad/datadir"
)

// unreadableHolders names the stand-in for the holders an unreadable
// holders file may have named (loadHolders).
const unreadableHolders = "(remembered data holders)"

// holdersRefresh is how far a listed holder's time in the holders file
// may lag behind its last listing: while the provider lists a holder
// its time moves on every observation, and the file is rewritten for it
// only once that time is this old (saveHolders); a restart counts it as
// listed that much later (loadHolders).
func (m *Member) holdersRefresh() time.Duration {
	return max(m.opts.Cluster.RecoveryGrace/4, time.Millisecond)
}

// loadHolders reads the data holders this member remembered before it
// restarted (datadir.HoldersFile, saveHolders) into known.holders: each
// for the recovery grace after its last listing, as if the process had
// never stopped, so a crash of the member about to seed, or of every
// member on its side of a partition at once, no longer forgets a holder
// Nomad collected while it ran behind that partition (review rev18f F3;
// before, the restarted member saw "no record and no data anywhere" and
// seeded a second epoch beside it). The times are the member's wall
// clock: one that went back since is taken as now (the memory lasts no
// longer than the grace after the restart); one that jumped forward
// across the restart shortens it (a risk the file cannot close). A file
// that cannot be read is never taken as "no holders": its error is
// logged, a copy kept (HoldersFile + ".unreadable"), and a stand-in
// holder without an address is named, without a record, until the
// grace has passed since the file was last written (its modification
// time, or the restart where even that is unknown): whatever it named
// lapses by then. A missing file is no memory (a first start, or a
// directory lost with the data: the member knows then only what its
// peers' /status share, as a fresh replacement).
//
// siblings are the directories beside this member's of instances that
// do not run (siblingDirs): the holders files there of this cluster are
// read too, merged (each entry keeps its time; the latest listing of a
// name wins). Nomad's replacement of an allocation on the same host has
// a new member name: adoptPrevious takes the predecessor's directory
// only when it holds data, and an empty predecessor's file, written by
// exactly the member about to seed that it protects, was left unread
// (review rev19b C).
func (m *Member) loadHolders(now time.Time, siblings []string) {
	defer m.shareHolders(now)
	for _, dir := range siblings {
		d := datadir.Dir{Root: dir}
		h, err := d.ReadHolders()
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			m.log.Warn("a previous member's remembered data holders beside this member's are unreadable: not taken", "path", d.HoldersPath(), "error", err)
			continue
		case h.Cluster != m.opts.Cluster.Name:
			continue
		}
		m.takeFileHolders(h, now)
		m.log.Info("remembered data holders of a previous member on this host read", "path", d.HoldersPath(), "holders", len(h.Holders))
	}
	m.loadOwnHolders(now)
}

// loadOwnHolders reads this member's own holders file (loadHolders).
func (m *Member) loadOwnHolders(now time.Time) {
	grace, refresh := m.opts.Cluster.RecoveryGrace, m.holdersRefresh()
	p := m.dir.HoldersPath()
	h, err := m.dir.ReadHolders()
	switch {
	case errors.Is(err, os.ErrNotExist):
		return
	case err != nil:
		at := now
		if fi, serr := os.Stat(p); serr == nil && fi.ModTime().Add(refresh).Before(now) {
			at = fi.ModTime().Add(refresh)
		}
		if b, rerr := os.ReadFile(p); rerr == nil {
			if werr := os.WriteFile(p+".unreadable", b, 0o600); werr != nil {
				m.log.Warn("unreadable holders file not copied", "path", p+".unreadable", "error", werr)
			}
		}
		if now.Sub(at) >= grace {
			m.log.Error("remembered data holders unreadable; the recovery grace has passed since the file was written, so whatever it named has lapsed", "path", p, "error", err)
			return
		}
		m.log.Error("remembered data holders unreadable: without a cluster record this member seeds nothing until the recovery grace has passed since the file was written", "path", p, "error", err, "until", at.Add(grace).UTC())
		if m.known.holders == nil {
			m.known.holders = map[string]knownHolder{}
		}
		m.known.holders[unreadableHolders] = knownHolder{k: knownMember{name: unreadableHolders}, at: at, note: "unreadable holders file " + p + ": " + err.Error()}
		return
	}
	m.takeFileHolders(h, now)
	if len(m.known.holders) > 0 {
		m.log.Info("remembered data holders read back", "path", p, "holders", slices.Sorted(maps.Keys(m.known.holders)))
	}
}

// takeFileHolders adds a holders file's entries to known.holders, each
// with its time; of two for one name, the later listing wins.
func (m *Member) takeFileHolders(h datadir.Holders, now time.Time) {
	refresh := m.holdersRefresh()
	for _, e := range h.Holders {
		if e.Name == m.opts.Name {
			continue
		}
		at := e.ListedAt
		if e.Listed {
			at = at.Add(refresh) // listed when written: possibly until the next rewrite
		}
		if e.ListedAt.After(now) {
			m.log.Warn("a remembered data holder was listed after now: the clock went back; it is kept for the recovery grace from now", "holder", e.Name, "listed_at", e.ListedAt.UTC())
		}
		if at.After(now) {
			at = now
		}
		word := e.WordAt
		if word.After(now) {
			word = now
		}
		h := knownHolder{clusterID: e.ClusterID, epoch: e.Epoch, at: at, note: e.Note, word: word}
		if m.lapsed(h, now, true) { // a word's: kept until an observation shows no peer names it
			continue
		}
		if m.known.holders == nil {
			m.known.holders = map[string]knownHolder{}
		}
		var urls []string
		if e.ClientURL != "" {
			urls = []string{e.ClientURL}
		}
		h.k = knownMember{name: e.Name, clientURLs: urls}
		for _, w := range e.Words {
			if w.ClientURL != "" && w.ClusterID != 0 {
				h.words = addWord(h.words, holderWord{url: w.ClientURL, clusterID: w.ClusterID}, urls)
			}
		}
		if prev, ok := m.known.holders[e.Name]; ok && !prev.at.Before(h.at) {
			continue
		}
		m.known.holders[e.Name] = h
	}
}

// siblingDirs returns the directories beside root (this member's) of no
// running instance (owner: listed, and whether it runs), for
// loadHolders.
func siblingDirs(root string, owner func(name string) (listed, live bool)) []string {
	parent := filepath.Dir(root)
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() || e.Name() == filepath.Base(root) || !mayBeMember(e.Name()) {
			continue
		}
		if _, live := owner(e.Name()); live {
			continue
		}
		out = append(out, filepath.Join(parent, e.Name()))
	}
	return out
}

// saveHolders writes known.holders to the holders file (loadHolders
// reads it at the next start) when it changed: a holder added, dropped
// (ForgetListedHolder's rules: its /status named no data, or under a
// record another cluster's, or the grace passed since its last listing),
// its address, cluster, epoch or time changed, it was listed or no
// longer; a listed holder's time only once it lags holdersRefresh
// behind. Atomic and durable (datadir.WriteHolders). A failed write is
// logged and retried at the next observation; meanwhile a restart reads
// the last written file, which may lack a holder: so the planner is told
// (Observation.HoldersUnsaved, rememberListedHolders) and, without a
// record, seeds nothing while the writes fail, and /status says so
// (review rev19b D: before, it was only logged, and a restart seeded
// beside the collected holder).
func (m *Member) saveHolders(now time.Time) {
	view := make([]datadir.Holder, 0, len(m.known.holders))
	for _, name := range slices.Sorted(maps.Keys(m.known.holders)) {
		e := m.known.holders[name]
		h := datadir.Holder{Name: name, ClusterID: e.clusterID, Epoch: e.epoch, ListedAt: e.at.UTC().Round(0), Listed: m.known.listed[name], Note: e.note}
		if !e.word.IsZero() {
			h.WordAt = e.word.UTC().Round(0)
		}
		if len(e.k.clientURLs) > 0 {
			h.ClientURL = e.k.clientURLs[0]
		}
		for _, w := range e.words {
			h.Words = append(h.Words, datadir.HolderWord{ClientURL: w.url, ClusterID: w.clusterID})
		}
		view = append(view, h)
	}
	// While the last write failed, retry even when nothing changed:
	// the list may be back to what the file holds (a holder lapsed
	// meanwhile), and only a write that succeeds clears the wait it
	// holds the seed with (review rev19f 1).
	if m.known.holdersWritten && m.known.holdersErr == "" && !m.holdersChanged(view, now) {
		return
	}
	if err := m.dir.WriteHolders(datadir.Holders{Cluster: m.opts.Cluster.Name, Written: now.UTC().Round(0), Holders: view}); err != nil {
		if m.known.holdersErr == "" {
			m.known.holdersErrSince = now
		}
		if msg := err.Error(); msg != m.known.holdersErr {
			m.known.holdersErr = msg
			m.mu.Lock()
			m.known.holdersUnsaved = m.dir.HoldersPath() + ": " + msg
			m.mu.Unlock()
			m.log.Error("remembered data holders not written: a restart reads the last written file", "path", m.dir.HoldersPath(), "error", err)
		}
		return
	}
	m.known.holdersWritten, m.known.holdersSaved, m.known.holdersErr = true, view, ""
	m.mu.Lock()
	m.known.holdersUnsaved = ""
	m.mu.Unlock()
}

// holdersChanged reports whether view differs from what the holders file
// holds in a way saveHolders writes.
func (m *Member) holdersChanged(view []datadir.Holder, now time.Time) bool {
	saved := m.known.holdersSaved
	if len(view) != len(saved) {
		return true
	}
	for i, v := range view {
		s := saved[i]
		if v.Name != s.Name || v.ClientURL != s.ClientURL || v.ClusterID != s.ClusterID || v.Epoch != s.Epoch || v.Listed != s.Listed || v.Note != s.Note || !v.WordAt.Equal(s.WordAt) || !slices.Equal(v.Words, s.Words) {
			return true
		}
		if v.Listed && v.ListedAt.Sub(s.ListedAt) >= m.holdersRefresh() || !v.Listed && !v.ListedAt.Equal(s.ListedAt) {
			return true
		}
	}
	return false
}
