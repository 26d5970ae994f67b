package task

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// knownState is what the loop knows of the members beyond the provider's
// listing: who wrote the newest snapshot and who answered the probes
// before a recovery (observeKnownHealthy).
type knownState struct {
	// latestWriters are the members that wrote latestSnapshot and the
	// newest segment of its delta chain: a member probes them before a
	// recovery (observeKnownHealthy).
	latestWriters []knownMember
	// seen: the members that answered observeKnownHealthy's probes
	// as voters, by name, for RecoveryGrace after their last answer;
	// summaryRead and summarySeen: the summary the last probe read (a
	// rewrite since names its leader). listed: the provider's instances
	// of the last observation, by name and client URL. Loop only.
	seen map[string]knownSeen
	// found (under mu) is seen's copy that /status shares
	// (shareFound).
	found       []knownSeen
	summaryRead bool
	summarySeen []byte
	// summarySince: when the last probe first read summarySeen's value.
	summarySince time.Time
	listed       map[string]bool
	// membersFrom (under mu): the endpoints whose member list the last
	// observation holds (nil when it holds none).
	membersFrom []string
	// listedVoters: the listed peers whose /status answered as healthy
	// voters in the last observation (peerStatuses), for
	// rememberListedVoters; summaryID: the cluster id of the summary the
	// last probe read. Loop only.
	listedVoters []listedVoter
	summaryID    uint64
	// listedHolders: the listed peers whose /status named data of a
	// cluster in the last observation, listedEmpty those whose /status
	// named none (peerStatuses); holders: the first by name, until the
	// recovery grace has passed since the provider last listed them
	// (rememberListedHolders). Loop only.
	listedHolders []listedHolder
	listedEmpty   []string
	holders       map[string]knownHolder
	// peersHolders: the holders peers' /status named in the last
	// observation (takeSharedHolders); held (under mu): holders' copy
	// that /status shares (shareHolders).
	peersHolders []status.Holder
	held         []knownHolder
	// holdersSaved: what the holders file holds (saveHolders), once
	// holdersWritten; holdersErr: the last write's error, logged once,
	// failing since holdersErrSince. Loop only. holdersUnsaved (under
	// mu): holdersErr with the file's path, for /status.
	holdersSaved    []datadir.Holder
	holdersWritten  bool
	holdersErr      string
	holdersErrSince time.Time
	holdersUnsaved  string
	// refusedWord: the voters peers named for clusters this member does
	// not know (narrowPeersWord), logged once each (at most 64 remembered). Loop only.
	refusedWord map[string]bool
}

// dataClusterID is the cluster id the membership in this member's data
// belongs to: its own, or, for a recovery from this data whose
// ForceNewCluster start is pending (its metadata says cluster 0), the
// source incarnation's, whose members that membership still lists
// (review rev18b F1: they were never probed, and after Consul restored an
// older summary nothing named a majority of the source line Nomad
// collected while it served: the wait asked the operator for a 'recover
// -from' beside it). 0 without data.
func (m *Member) dataClusterID(l planner.Local) uint64 {
	switch {
	case l.Empty:
		return 0
	case l.ClusterID != 0:
		return l.ClusterID
	case !l.ForceNewPending:
		return 0
	}
	meta, err := m.dir.ReadMeta()
	if err != nil {
		m.log.Warn("metadata unreadable: the source line of this member's pending recovery is not probed", "error", err)
		return 0
	}
	return meta.SourceClusterID
}

// lastKnownMembers returns the membership this member's data knows: its
// running server's, or, stopped, what its database holds.
func (m *Member) lastKnownMembers() ([]knownMember, error) {
	m.mu.Lock()
	e := m.proc.Server()
	m.mu.Unlock()
	if e != nil {
		var out []knownMember
		for _, mem := range e.Server.Cluster().Members() {
			out = append(out, knownMember{id: uint64(mem.ID), name: mem.Name, clientURLs: mem.ClientURLs})
		}
		return out, nil
	}
	db := filepath.Join(m.dir.EtcdDir(), "member", "snap", "db")
	if _, err := os.Stat(db); err != nil {
		return nil, nil // no data: no membership to probe
	}
	b, err := bolt.Open(db, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", db, err)
	}
	defer b.Close()
	var out []knownMember
	err = b.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte("members"))
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(_, v []byte) error {
			var sm storedMember
			if err := json.Unmarshal(v, &sm); err != nil {
				return fmt.Errorf("member %s: %w", v, err)
			}
			out = append(out, knownMember{id: sm.ID, name: sm.Name, clientURLs: sm.ClientURLs})
			return nil
		})
	})
	return out, err
}

// observeKnownHealthy fills o.KnownHealthy and o.UnlistedVoters during a
// quorum loss: every member of this member's last known membership (other
// than itself) is asked on its client URLs, whatever the provider lists;
// one that answers for this member's cluster with a leader proves a
// quorum serves writes there (a majority Nomad forgot: its allocations
// garbage-collected while a partition hid them), and the planner recovers
// nothing beside it.
// The members of the leader's last summary in the coordinator are asked
// too, for the record's cluster or the summary's (Consul lost the record:
// observeQuorumLoss asks without one): a member without data (a
// replacement) has no membership of its own (sim seed 5 with CollectRunning: two
// voters collected while they served, the third replaced, and an empty
// replacement recovered from the store beside them). A stale or planted
// summary only adds probes: only an answer for the record's cluster id
// with a leader, over the peer TLS, blocks.
// So are the store's writers, with or without a record: the member the
// newest snapshot was streamed from and the one whose recorder wrote its
// chain's newest segment, the leader of a few seconds ago (sim seeds 71
// and 172 with CollectRunning: a seeder or a recovering member Nomad
// collected right after its start served alone, and a takeover under its
// record, or an older one Consul restored, started a second cluster).
//
// What one probe sees is a moment (sim seeds 17, 143, 423, 1051): a
// partition may hide a collected majority, or split it so that it has no
// leader until the partition heals. So an unlisted voter that answers
// without a leader is named too (UnlistedVoters: its peers may be just as
// alive), every member that answered is asked again at later probes, and
// it stays named for RecoveryGrace after its last answer; and a summary
// the coordinator holds rewritten since the last probe (a leader writes
// it every summaryBeat, even when the provider does not answer it) names
// that leader for as long.
func (m *Member) observeKnownHealthy(ctx context.Context, o *planner.Observation, now time.Time) {
	if o.MembersKnown {
		return
	}
	var probes []knownProbe
	if id := m.dataClusterID(o.Local); id != 0 {
		known, err := m.lastKnownMembers()
		if err != nil {
			m.log.Warn("last known membership unreadable: its members are not probed before a recovery", "error", err)
		}
		for _, k := range known {
			probes = append(probes, knownProbe{k: k, clusterIDs: []uint64{id}})
		}
	}
	summary, members, leader, raw, read, beat := m.summaryMembers(ctx)
	if read {
		m.known.summaryID = summary
	}
	var ids []uint64
	if o.Record != nil && o.Record.ClusterID != 0 {
		ids = append(ids, o.Record.ClusterID)
	}
	if summary != 0 {
		ids = append(ids, summary)
	}
	if len(ids) > 0 {
		for _, k := range members {
			probes = append(probes, knownProbe{k: k, clusterIDs: ids})
		}
	}
	known := slices.Clone(ids) // what this member knows of its cluster's ids
	for _, w := range m.known.latestWriters {
		if id, err := strconv.ParseUint(w.clusterID, 16, 64); err == nil && id != 0 && len(w.clientURLs) > 0 {
			probes = append(probes, knownProbe{k: w, clusterIDs: []uint64{id}})
			known = append(known, id)
		}
	}
	known = m.narrowPeersWord(o, known)
	for _, name := range slices.Sorted(maps.Keys(m.known.seen)) {
		if e := m.known.seen[name]; len(e.probe.k.clientURLs) > 0 {
			probes = append(probes, e.probe)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(m.known.holders)) {
		// The data holders the provider listed within the grace and no
		// longer does (rememberListedHolders).
		// Its own listing's address is probed as this member's own
		// find; every address a peer's word gave, as a word
		// (knownProbe.peers): for a cluster id this member does not
		// know, its answers do not extend it (narrowPeersWord), so a
		// forged /status naming another cluster's serving voter as a
		// holder no longer holds recoveries back after the forger
		// stops (review rev19b A).
		e := m.known.holders[name]
		if m.known.listed[name] || now.Sub(e.at) >= o.RecoveryGrace {
			continue
		}
		if len(e.k.clientURLs) > 0 {
			probes = append(probes, knownProbe{k: e.k, clusterIDs: []uint64{e.clusterID}})
		}
		for _, w := range e.words {
			unknown := len(known) > 0 && !slices.Contains(known, w.clusterID)
			probes = append(probes, knownProbe{k: knownMember{name: name, clientURLs: []string{w.url}}, clusterIDs: []uint64{w.clusterID}, peers: true, unknown: unknown})
		}
	}
	answered := m.probeKnown(ctx, o, probes)
	if m.known.seen == nil {
		m.known.seen = map[string]knownSeen{}
	}
	for name, a := range answered {
		at := now
		if prev, ok := m.known.seen[name]; ok && a.probe.unknown {
			// A peer's word for a cluster this member does not know:
			// its answer does not extend the word (narrowPeersWord).
			at = prev.at
			if now.Sub(at) >= o.RecoveryGrace {
				delete(m.known.seen, name)
				continue
			}
		}
		m.known.seen[name] = knownSeen{probe: a.probe, at: at, healthy: a.leader}
		if a.leader {
			o.KnownHealthy = append(o.KnownHealthy, fmt.Sprintf("%s (%s)", name, a.url))
		} else {
			o.UnlistedVoters = append(o.UnlistedVoters, fmt.Sprintf("%s (%s)", name, a.url))
		}
	}
	if read {
		changed := !m.known.summaryRead || !bytes.Equal(raw, m.known.summarySeen)
		if changed {
			m.known.summarySince = now
		}
		other := raw != nil && leader != "" && leader != m.opts.Name
		switch {
		case m.known.summaryRead && changed && other:
			name := fmt.Sprintf("%s (leader of cluster %x: its summary in the coordinator was rewritten)", leader, summary)
			answered[name] = knownAnswer{leader: true}
			m.known.seen[name] = knownSeen{at: now, healthy: true, hold: heldFor(o.RecoveryGrace, beat)}
			o.KnownHealthy = append(o.KnownHealthy, name)
		case other && notOverdue(o.RecoveryGrace, beat, now.Sub(m.known.summarySince)):
			// A writer beating slower than this member would (another
			// recovery_grace while a job update rolls) may not have
			// rewritten it yet: its leader counts as serving until the
			// rewrite is overdue (review rev18a F1). Not remembered: a
			// rewrite names it for longer, none lets it lapse.
			o.KnownHealthy = append(o.KnownHealthy, fmt.Sprintf("%s (leader of cluster %x: its summary, rewritten every %s, read %s ago, is not overdue)", leader, summary, beat, now.Sub(m.known.summarySince).Round(time.Second)))
		}
		m.known.summaryRead, m.known.summarySeen = true, raw
	}
	for _, name := range slices.Sorted(maps.Keys(m.known.seen)) {
		e := m.known.seen[name]
		_, named := answered[name]
		hold := o.RecoveryGrace
		if e.hold > 0 {
			hold = e.hold
		}
		switch ago := now.Sub(e.at); {
		case ago >= hold:
			delete(m.known.seen, name)
		case named:
		case e.healthy:
			o.KnownHealthy = append(o.KnownHealthy, fmt.Sprintf("%s (answered %s ago)", name, ago.Round(time.Second)))
		default:
			o.UnlistedVoters = append(o.UnlistedVoters, fmt.Sprintf("%s (answered %s ago)", name, ago.Round(time.Second)))
		}
	}
	if o.Record == nil {
		// Without a record, a holder that does not answer either is
		// named until the grace has passed since the provider last
		// listed it: "no data anywhere" is not so while it may run
		// behind a partition (its peers with it).
		for _, name := range slices.Sorted(maps.Keys(m.known.holders)) {
			e := m.known.holders[name]
			_, named := m.known.seen[name]
			ago := now.Sub(e.at)
			if e.note != "" && ago < o.RecoveryGrace {
				o.UnlistedVoters = append(o.UnlistedVoters, fmt.Sprintf("%s (%s; named until the recovery grace has passed, %s from now)", name, e.note, (o.RecoveryGrace-ago).Round(time.Second)))
				continue
			}
			if !m.known.listed[name] && !named && ago < o.RecoveryGrace {
				o.UnlistedVoters = append(o.UnlistedVoters, fmt.Sprintf("%s (held data of epoch %d, cluster %x, when the provider last listed it %s ago; silent now)", name, e.epoch, e.clusterID, ago.Round(time.Second)))
			}
		}
	}
	sort.Strings(o.KnownHealthy)
	sort.Strings(o.UnlistedVoters)
	m.shareFound()
}

// listedVoter is a listed peer whose /status answered as a healthy voter:
// where to probe it (its client URL from the provider) and the cluster
// id and token its /status named.
type listedVoter struct {
	name      string
	clientURL string
	clusterID uint64
	token     string
}

// rememberListedVoters remembers, as if a probe had found them, the
// listed peers whose /status answered as healthy voters (running, not a
// learner, with a leader and a quorum) of a cluster this member knows:
// the record's (or, while the record is not confirmed, the one started
// under its token), the summary's as last read, its own data's; or of
// any cluster while there is no record. observeKnownHealthy asks them
// again and names them for the recovery grace after their last answer,
// after the provider stops listing them too, and /status shares them
// (found voters). Before, only the last known membership, the summary
// and the store's writers named such a voter: Consul lost its state
// right after a member seeded a one-member cluster, Nomad collected that
// member while it served, and its peers, which had just waited for its
// data, saw "no record, no data anywhere" a moment later and seeded a
// second epoch 1 beside it (sim seed 8920 with CollectRunning; seed
// 10469: the same beside an unconfirmed record's seeder). A voter taken
// only because there was no record is a word like a peer's
// (narrowPeersWord): once this member knows cluster ids and not its
// one, its answers no longer extend it.
func (m *Member) rememberListedVoters(o *planner.Observation, now time.Time) {
	for _, v := range m.known.listedVoters {
		if v.name == m.opts.Name {
			continue
		}
		rec := o.Record
		known := rec != nil && (rec.ClusterID == v.clusterID || rec.ClusterID == 0 && v.token != "" && v.token == rec.Token) ||
			m.known.summaryID == v.clusterID || v.clusterID != 0 && m.dataClusterID(o.Local) == v.clusterID
		if !known && rec != nil {
			continue
		}
		if m.known.seen == nil {
			m.known.seen = map[string]knownSeen{}
		}
		// A voter this member found for a cluster it knew (the record
		// named it) stays its own find when Consul has lost the record
		// since: a word would lapse once Consul restores an older one,
		// and a recovery started beside the voter (sim seed 1004733).
		prev, had := m.known.seen[v.name]
		firstHand := had && !prev.probe.peers && slices.Contains(prev.probe.clusterIDs, v.clusterID)
		m.known.seen[v.name] = knownSeen{probe: knownProbe{k: knownMember{name: v.name, clientURLs: []string{v.clientURL}}, clusterIDs: []uint64{v.clusterID}, peers: !known && !firstHand}, at: now, healthy: true}
	}
	// Lapsed names go as observeKnownHealthy's do while the member list
	// answers: a healthy cluster never runs that, and every allocation a
	// rolling deploy replaced would stay here, crowding the found voters
	// /status shares (maxFoundShared) until a voter found a moment ago is
	// no longer among them (invariant 10). Otherwise
	// observeKnownHealthy asks each again first and prunes after
	// (emptyprobe_test's member, which lost the summary, still names the
	// majority that answered it).
	if o.MembersKnown {
		for name, e := range m.known.seen {
			if now.Sub(e.at) >= m.opts.Cluster.RecoveryGrace {
				delete(m.known.seen, name)
			}
		}
	}
	m.shareFound()
}

// listedHolder is a listed peer whose /status named data: where to
// probe it (its client URL from the provider) and the incarnation its
// /status named.
type listedHolder struct {
	name      string
	clientURL string
	clusterID uint64
	token     string
	epoch     uint64
}

// knownHolder is a data holder rememberListedHolders keeps: where to
// probe it, for which cluster id, and when the provider last listed it.
type knownHolder struct {
	k         knownMember
	clusterID uint64
	epoch     uint64
	at        time.Time
	// note, when set, stands for holders an unreadable holders file may
	// have named (loadHolders): named, never probed.
	note string
	// word: the listing time a peer's word first claimed for it, or
	// zero while this member's own listing is the last it took
	// (takeSharedHolders bounds words by it).
	word time.Time
	// words: the addresses (and cluster ids) peers' words gave for it,
	// the most recently named last, at most maxHolderWords: each is
	// probed as a word (observeKnownHealthy). k.clientURLs holds only
	// this member's own listing's address.
	words []holderWord
}

// holderWord is an address a peer's word gave for a data holder, and
// the cluster id it named there.
type holderWord struct {
	url       string
	clusterID uint64
}

// addressed reports whether e has an address to probe or share.
func (e knownHolder) addressed() bool { return len(e.k.clientURLs)+len(e.words) > 0 }

// maxHolderWords bounds the addresses words give one holder
// (knownHolder.words) and the entries one peer's /status gives one
// holder (peerHolders); maxPeerHolders the holders one peer's /status
// gives.
const (
	maxHolderWords = 8
	maxPeerWords   = 4
	maxPeerHolders = 8
)

// rememberListedHolders remembers the listed peers whose /status named
// data of a cluster this member knows (as rememberListedVoters: the
// record's, the summary's as last read, its own data's; any cluster
// while there is no record), whether or not they run, until the
// recovery grace has passed since the provider last listed them (listed
// and silent, the planner counts them unreachable meanwhile). One whose
// /status names no data, or under a record another cluster's, is
// forgotten. Once the provider stops listing such a holder,
// observeKnownHealthy probes it for its cluster: a voter that answers,
// with a leader or not, is named and remembered as any probe's find
// (for the grace after its last answer); without a record, a silent one
// is named too until the grace has passed.
// Before, a peer that held data and had never answered as a healthy
// voter (its cluster had no quorum) was named by nothing once Nomad
// collected it while it ran: an empty replacement that had waited for
// its data ("peer m1-0 holds data of epoch 1") saw "no record and no
// data anywhere" a moment after the provider dropped it and seeded a
// second epoch 1 beside it; the partition that had split its cluster
// healed and the first served again (sim seed 36353, the member's first
// snapshot save failing).
func (m *Member) rememberListedHolders(o *planner.Observation, now time.Time) {
	for _, name := range m.known.listedEmpty {
		delete(m.known.holders, name)
	}
	for _, h := range m.known.listedHolders {
		if h.name == m.opts.Name {
			continue
		}
		rec := o.Record
		known := rec != nil && (rec.ClusterID == h.clusterID || rec.ClusterID == 0 && h.token != "" && h.token == rec.Token) ||
			m.known.summaryID == h.clusterID || !o.Local.Empty && o.Local.ClusterID == h.clusterID
		if !known && rec != nil {
			delete(m.known.holders, h.name)
			continue
		}
		if m.known.holders == nil {
			m.known.holders = map[string]knownHolder{}
		}
		m.known.holders[h.name] = knownHolder{k: knownMember{name: h.name, clientURLs: []string{h.clientURL}}, clusterID: h.clusterID, epoch: h.epoch, at: now}
	}
	for name, e := range m.known.holders {
		switch {
		case m.known.listed[name]:
			e.at, e.word = now, time.Time{} // still listed: still possibly the holder it was
			m.known.holders[name] = e
		case m.lapsed(e, now, m.wordNames(name)):
			delete(m.known.holders, name)
		}
	}
	m.takeSharedHolders(o, now)
	m.shareHolders(now)
	m.saveHolders(now)
	if m.known.holdersErr != "" {
		o.HoldersUnsaved = fmt.Sprintf("the data holders this member remembers were not written to %s (%s)", m.dir.HoldersPath(), m.known.holdersErr)
		o.HoldersUnsavedFor = max(now.Sub(m.known.holdersErrSince), 0)
	}
}

// takeSharedHolders adds the data holders peers remember (their
// /status's Holders, peersHolders) to this member's own, with the time a
// provider last listed them: this member probes them and, without a
// record, names a silent one until the recovery grace has passed since
// that original listing. The age (a duration, not the peer's clock) only
// grows as it is passed on, so no two members keep each other's word
// alive, and a peer's word never outlasts the grace. One this member's
// provider lists is seen through its own /status; under a record only a
// holder of a cluster this member knows is taken (as
// rememberListedHolders). Before, the memory lived in one process: m0-1
// had seen m0-0 and m1-0 hold epoch 1 data before Nomad collected them
// while they ran; it crashed behind the partition that cut them off,
// restarted knowing nothing of them, and seeded a second epoch 1 beside
// them (review rev18f F3, sim seed 36353 driven to step 296). A fresh
// replacement placed after the holder was dropped had the same blind
// spot. A peer's word only adds probes and waits.
func (m *Member) takeSharedHolders(o *planner.Observation, now time.Time) {
	grace := m.opts.Cluster.RecoveryGrace
	for _, h := range m.known.peersHolders {
		ago := time.Duration(max(h.AgoMillis, 0)) * time.Millisecond
		if h.Name == "" || h.Name == m.opts.Name || h.ClientURL == "" || h.ClusterID == 0 || ago >= grace ||
			m.known.listed[h.Name] || m.known.listed[h.ClientURL] {
			continue
		}
		rec := o.Record
		known := rec != nil && rec.ClusterID == h.ClusterID || m.known.summaryID == h.ClusterID || !o.Local.Empty && o.Local.ClusterID == h.ClusterID
		if !known && rec != nil {
			continue
		}
		// A word moves the time of a holder this member knows, never its
		// own listing's address, cluster or epoch (a planted answer would
		// otherwise redirect the probe of a holder it listed: it adds a
		// probe, as a word, instead), and never to more
		// than the grace after the first listing a word claimed for it
		// (word; for a holder it listed, that last listing): a peer that
		// names a holder as listed a moment ago at every observation (a
		// planted /status, a provider that never drops it while this
		// member's does) no longer keeps this member waiting beside it
		// forever: it is named no longer than twice the grace.
		at := now.Add(-ago)
		e, ok := m.known.holders[h.Name]
		if !ok {
			e = knownHolder{k: knownMember{name: h.Name}, clusterID: h.ClusterID, epoch: h.Epoch, word: at}
		}
		// Every address a word gives is probed (as a word), not only
		// the first: a forged first word with a dead address hid the
		// real one an honest peer gave later (review rev19b E).
		e.words = addWord(e.words, holderWord{url: h.ClientURL, clusterID: h.ClusterID}, e.k.clientURLs)
		if m.known.holders == nil {
			m.known.holders = map[string]knownHolder{}
		}
		m.known.holders[h.Name] = e
		if ok {
			if e.word.IsZero() {
				e.word = e.at
			}
			if limit := e.word.Add(grace); at.After(limit) {
				at = limit
			}
			if !e.at.Before(at) {
				continue
			}
		}
		e.at = at
		m.known.holders[h.Name] = e
	}
}

// addWord adds w to words (moved last when already there) unless it is
// one of own (this member's listing's address), dropping the least
// recently named beyond maxHolderWords.
func addWord(words []holderWord, w holderWord, own []string) []holderWord {
	if slices.Contains(own, w.url) {
		return words
	}
	words = slices.DeleteFunc(slices.Clone(words), func(x holderWord) bool { return x == w })
	words = append(words, w)
	return words[max(len(words)-maxHolderWords, 0):]
}

// peerHolders is what this member takes of one peer's /status Holders:
// at most maxPeerWords entries per holder and maxPeerHolders holders
// (the first it names), so one planted /status cannot fill a holder's
// words nor, through this member's /status, crowd out the holders it
// shares (review rev19b B, E).
func peerHolders(hs []status.Holder) []status.Holder {
	var out []status.Holder
	per := map[string]int{}
	for _, h := range hs {
		n, ok := per[h.Name]
		if !ok && len(per) >= maxPeerHolders || n >= maxPeerWords {
			continue
		}
		per[h.Name] = n + 1
		out = append(out, h)
	}
	return out
}

// lapsed reports whether holder e may be forgotten at now: the recovery
// grace has passed since its last listing and, for one a peer's word
// named (word), no peer names it any more (named): until then it is
// kept, neither named nor probed nor shared, so that a word repeated
// past its bound (takeSharedHolders) does not take it again as new.
func (m *Member) lapsed(e knownHolder, now time.Time, named bool) bool {
	return now.Sub(e.at) >= m.opts.Cluster.RecoveryGrace && (e.word.IsZero() || !named)
}

// wordNames reports whether a peer's /status named holder name in the
// last observation (peersHolders), within the grace.
func (m *Member) wordNames(name string) bool {
	return slices.ContainsFunc(m.known.peersHolders, func(h status.Holder) bool {
		return h.Name == name && time.Duration(max(h.AgoMillis, 0))*time.Millisecond < m.opts.Cluster.RecoveryGrace
	})
}

// shareHolders keeps a copy of known.holders for /status (health), which
// reads it from another goroutine: those within the recovery grace of
// their last listing at now, the ones this member listed itself first,
// then the most recently listed, so that entries a peer's word planted
// (any names, listed a moment ago) do not push out a holder this member
// listed, nor (peerHolders bounding each peer) one an honest word gave
// (review rev19b B: the list was cut by name before the age was looked
// at). sharedHolders cuts at maxFoundShared entries.
func (m *Member) shareHolders(now time.Time) {
	held := make([]knownHolder, 0, len(m.known.holders))
	for _, name := range slices.Sorted(maps.Keys(m.known.holders)) {
		if e := m.known.holders[name]; e.addressed() && now.Sub(e.at) < m.opts.Cluster.RecoveryGrace {
			held = append(held, e)
		}
	}
	slices.SortStableFunc(held, func(a, b knownHolder) int {
		if ao, bo := a.word.IsZero(), b.word.IsZero(); ao != bo {
			if ao {
				return -1
			}
			return 1
		}
		return b.at.Compare(a.at)
	})
	m.mu.Lock()
	m.known.held = held
	m.mu.Unlock()
}

// sharedHolders is /status's Holders: held (shareHolders' copy) within
// the recovery grace of their last listing at now.
func (m *Member) sharedHolders(held []knownHolder, now time.Time) []status.Holder {
	var out []status.Holder
	for _, e := range held {
		ago := max(now.Sub(e.at), 0)
		if ago >= m.opts.Cluster.RecoveryGrace {
			continue
		}
		// Its own listing's address, then the words' (the most recently
		// named first), at most maxPeerWords: what a peer takes of it.
		var addrs []holderWord
		if len(e.k.clientURLs) > 0 {
			addrs = append(addrs, holderWord{url: e.k.clientURLs[0], clusterID: e.clusterID})
		}
		for i := len(e.words) - 1; i >= 0; i-- {
			addrs = append(addrs, e.words[i])
		}
		for _, a := range addrs[:min(len(addrs), maxPeerWords)] {
			if len(out) >= maxFoundShared {
				return out
			}
			out = append(out, status.Holder{Name: e.k.name, ClientURL: a.url, ClusterID: a.clusterID, Epoch: e.epoch, AgoMillis: ago.Milliseconds()})
		}
	}
	return out
}

// maxFoundShared bounds the found voters a member names in its /status,
// and takes from each peer's; maxFoundClusterIDs the cluster ids of one.
const (
	maxFoundShared     = 16
	maxFoundClusterIDs = 4
)

// shareFound keeps a copy of known.seen's entries with client URLs for
// /status (health), which reads them from another goroutine.
func (m *Member) shareFound() {
	found := make([]knownSeen, 0, len(m.known.seen))
	for _, name := range slices.Sorted(maps.Keys(m.known.seen)) {
		if e := m.known.seen[name]; len(e.probe.k.clientURLs) > 0 && len(found) < maxFoundShared {
			found = append(found, e)
		}
	}
	m.mu.Lock()
	m.known.found = found
	m.mu.Unlock()
}

// foundVoters is /status's FoundVoters: found (shareFound's copy) within
// the recovery grace of their last answer at now.
func (m *Member) foundVoters(found []knownSeen, now time.Time) []status.FoundVoter {
	var out []status.FoundVoter
	for _, e := range found {
		ago := max(now.Sub(e.at), 0)
		if ago >= m.opts.Cluster.RecoveryGrace {
			continue
		}
		out = append(out, status.FoundVoter{Name: e.probe.k.name, ClientURLs: e.probe.k.clientURLs, ClusterIDs: e.probe.clusterIDs,
			Leader: e.healthy, AgoMillis: ago.Milliseconds()})
	}
	return out
}

// takeFoundVoters adds the voters peers found answering their probes
// (their /status) to knownSeen, with the time of their last answer: this
// member probes them too and names them (KnownHealthy, UnlistedVoters)
// until the recovery grace has passed since that answer, whoever heard
// it. A member that never read the summary, the record or the store's
// writers (a fresh replacement after Consul lost its state) knows of a
// collected voter only this way: before, one seeded a second epoch 1
// while its peers waited for such a voter, the only copy of the
// cluster's acknowledged writes (sim seed 180 with CollectRunning). The
// age (a duration, not the peer's clock) only grows as it is passed on,
// so no two members keep each other's word alive. An unlisted voter
// without a leader that this member's provider lists is an ordinary
// survivor whose data its /status shows (probeKnown skips it too). A
// peer's word only adds probes and waits.
func (m *Member) takeFoundVoters(found []status.FoundVoter, now time.Time) {
	grace := m.opts.Cluster.RecoveryGrace
	for _, f := range found {
		ago := time.Duration(max(f.AgoMillis, 0)) * time.Millisecond
		if f.Name == "" || f.Name == m.opts.Name || len(f.ClientURLs) == 0 || len(f.ClusterIDs) == 0 || ago >= grace {
			continue
		}
		urls := f.ClientURLs[:min(len(f.ClientURLs), maxSummaryURLs)]
		if !f.Leader && (m.known.listed[f.Name] || slices.ContainsFunc(urls, func(u string) bool { return m.known.listed[u] })) {
			continue
		}
		at := now.Add(-ago)
		e, ok := m.known.seen[f.Name]
		if ok && !e.at.Before(at) {
			continue
		}
		if m.known.seen == nil {
			m.known.seen = map[string]knownSeen{}
		}
		ids := f.ClusterIDs[:min(len(f.ClusterIDs), maxFoundClusterIDs)]
		if ok && !e.probe.peers && slices.ContainsFunc(ids, func(id uint64) bool { return slices.Contains(e.probe.clusterIDs, id) }) {
			// This member's own find of that voter, for a cluster it
			// knew, stays its own (not a word narrowPeersWord lets
			// lapse): the peer's later answer only refreshes its time
			// (sim seed 1004733).
			e.at, e.healthy = at, f.Leader
			m.known.seen[f.Name] = e
			continue
		}
		m.known.seen[f.Name] = knownSeen{probe: knownProbe{k: knownMember{name: f.Name, clientURLs: slices.Clone(urls)}, clusterIDs: slices.Clone(ids), peers: true}, at: at, healthy: f.Leader}
	}
	m.shareFound()
}

// knownProbe is a member to ask and the cluster ids it must answer for.
// peers: the member and its ids are a peer's word (its /status's found
// voters); unknown: none of those ids is one this member knows, so an
// answer does not refresh the entry's time (narrowPeersWord).
type knownProbe struct {
	k          knownMember
	clusterIDs []uint64
	peers      bool
	unknown    bool
}

// narrowPeersWord keeps of the voters peers named (takeFoundVoters) only
// the cluster ids this member knows of its own cluster, when it knows one
// of them: known (the record's, the summary's, the store's writers'), its
// data's and its peers' data's (their /status, like the found voters
// themselves). An entry left with none keeps its ids and is asked for
// them, but marked unknown: an answer does not refresh its time, so it
// lapses one recovery grace after a peer last named it (takeFoundVoters
// keeps the age the peer passed on). With TLS off, or one CA shared by
// several clusters, a forged /status could name another cluster's serving
// voter with that cluster's id: this member found it answering, probed it
// again at every loop and held its own recovery back for as long as that
// other cluster served, long after the forged answer
// (TestAPeersFoundVoterOfAnotherClusterIsNotTaken).
// Now a forged word holds recoveries back only while the forger keeps
// naming it, as claiming to be a healthy voter itself always could. The
// word is never dropped at once: after a restore the new cluster has a
// new id, and a fresh replacement may know only the old incarnation's
// (the store's writers', an older record Consul restored); dropping the
// peer's word for the restored cluster's serving voter restored the old
// snapshot beside it as a second cluster
// (TestAPeersWordForARestoredClusterIsTakenBesideAnOlderStoreWriter). A real voter
// a peer keeps finding is named for as long as it keeps finding it.
//
// It returns known with those ids added: the ids a holder's word is
// asked for without being extended (observeKnownHealthy).
func (m *Member) narrowPeersWord(o *planner.Observation, known []uint64) []uint64 {
	if !o.Local.Empty && o.Local.ClusterID != 0 {
		known = append(known, o.Local.ClusterID)
	}
	for _, p := range o.Peers {
		if p.Token != "" && p.ClusterID != 0 {
			known = append(known, p.ClusterID)
		}
	}
	for name, e := range m.known.seen {
		if !e.probe.peers {
			continue
		}
		var keep []uint64
		for _, id := range e.probe.clusterIDs {
			if slices.Contains(known, id) {
				keep = append(keep, id)
			}
		}
		// A member that knows no id at all (a fresh replacement after
		// Consul lost its state, with no snapshot in the store: sim seed
		// 180) takes the word as given: it only waits on it.
		e.probe.unknown = len(known) > 0 && len(keep) == 0
		if e.probe.unknown {
			if key := fmt.Sprintf("%s %x", name, e.probe.clusterIDs); !m.known.refusedWord[key] {
				if len(m.known.refusedWord) >= 64 || m.known.refusedWord == nil {
					m.known.refusedWord = map[string]bool{}
				}
				m.known.refusedWord[key] = true
				m.log.Warn("a peer named a voter of a cluster id this member does not know (a restored cluster, or a forged /status): asking it, but its answers do not extend the peer's word", "voter", name, "urls", e.probe.k.clientURLs, "cluster_ids", fmt.Sprintf("%x", e.probe.clusterIDs))
			}
		} else if len(keep) > 0 {
			e.probe.clusterIDs = keep
		}
		m.known.seen[name] = e
	}
	return known
}

// knownAnswer is a probe's answer: a voter, with a leader or not.
type knownAnswer struct {
	probe  knownProbe
	url    string
	leader bool
}

// probeKnown asks every probe's member (not this one) at once and returns
// those that answered, by name: a voter with a leader, or one without
// that the provider does not list (listed by name or client URL: a listed
// one without a leader is an ordinary survivor, whose data the planner
// sees through its /status).
func (m *Member) probeKnown(ctx context.Context, o *planner.Observation, probes []knownProbe) map[string]knownAnswer {
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		out = map[string]knownAnswer{}
	)
	asked := map[string]bool{}
	for _, p := range probes {
		k := p.k
		key := fmt.Sprintf("%s %x %v %v", k.name, p.clusterIDs, k.clientURLs, p.peers)
		if k.id != 0 && k.id == o.SelfID || k.name == m.opts.Name || len(k.clientURLs) == 0 || asked[key] {
			continue
		}
		asked[key] = true
		wg.Add(1)
		go func(p knownProbe) {
			defer wg.Done()
			url, leader, ok := m.answersAsVoter(ctx, p.k.clientURLs, p.clusterIDs...)
			if !ok || !leader && (m.known.listed[p.k.name] || m.known.listed[url]) {
				return
			}
			mu.Lock()
			// A first-hand probe's answer wins over a word's of the
			// same kind: it extends what the word's would not.
			if prev, seen := out[p.k.name]; !seen || leader && !prev.leader || leader == prev.leader && prev.probe.peers && !p.peers {
				out[p.k.name] = knownAnswer{probe: p, url: url, leader: leader}
			}
			mu.Unlock()
		}(p)
	}
	wg.Wait()
	return out
}

// maxSummaryProbes and maxSummaryURLs bound what a summary makes a member
// probe: a Consul writer may plant one (docs/security.md, Threat model).
const (
	maxSummaryProbes = 16
	maxSummaryURLs   = 4
)

// summaryMembers returns the cluster id of the leader's last summary in
// the coordinator, its members with their client URLs, its leader and
// the summary as stored (nil when none is); read is false when the
// coordinator did not answer.
func (m *Member) summaryMembers(ctx context.Context) (clusterID uint64, members []knownMember, leader string, raw []byte, read bool, beat time.Duration) {
	sr, ok := m.opts.Coordinator.(summaryReader)
	if !ok {
		return 0, nil, "", nil, false, 0
	}
	b, err := sr.Get(ctx, "summary")
	if err != nil {
		if !errors.Is(err, coord.ErrNotStored) {
			m.log.Warn("cluster summary unreadable: its members are not probed before a recovery", "error", err)
			return 0, nil, "", nil, false, 0
		}
		return 0, nil, "", nil, true, 0
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		m.log.Warn("cluster summary undecodable: its members are not probed before a recovery", "error", err)
		return 0, nil, "", b, true, 0
	}
	if len(s.Members) > maxSummaryProbes {
		m.log.Warn("cluster summary lists too many members: only the first are probed before a recovery", "members", len(s.Members), "probed", maxSummaryProbes)
		s.Members = s.Members[:maxSummaryProbes]
	}
	for _, sm := range s.Members {
		if len(sm.ClientURLs) > maxSummaryURLs {
			sm.ClientURLs = sm.ClientURLs[:maxSummaryURLs]
		}
		id, _ := strconv.ParseUint(sm.ID, 16, 64)
		members = append(members, knownMember{id: id, name: sm.Name, clientURLs: sm.ClientURLs})
	}
	clusterID, _ = strconv.ParseUint(s.ClusterID, 16, 64)
	return clusterID, members, s.Leader, b, true, time.Duration(min(max(s.BeatMS, 0), summaryBeatMax.Milliseconds())) * time.Millisecond
}

// answersWithLeader reports whether any of urls answers etcd's Status for
// one of clusterIDs as a voter with a leader, and which one.
func (m *Member) answersWithLeader(ctx context.Context, urls []string, clusterIDs ...uint64) (string, bool) {
	u, leader, ok := m.answersAsVoter(ctx, urls, clusterIDs...)
	return u, ok && leader
}

// answersAsVoter reports whether any of urls answers etcd's Status for one
// of clusterIDs as a member, which one, and whether it names a leader as
// a voter (the first that does wins). A learner's leader never counts: it
// never campaigns, so after its voters are gone it names its last leader
// forever, and a summary listing one wedged every recovery as a serving
// quorum (invariant 10). But it answers, as a voter without a
// leader does: running, unlisted (Nomad collected it while it runs), it
// may be the only copy of its incarnation and hold acknowledged writes no
// snapshot does, and a seed or restore beside it started its epoch a
// second time (sim seeds 2022 and 1000131: a learner the summary named,
// ignored, at revision 160 beside the newest snapshot, verified to
// 128). probeKnown names it in UnlistedVoters until it stops
// (its Nomad client stops it when it reconnects; else an operator stops
// it, or runs 'etcd-nomad recover -from snapshot:NAME'); a listed one is
// an ordinary survivor whose data the planner sees through its /status.
// Alarms do not count against a voter: a quorum under NOSPACE still
// serves deletes, and puts again once disarmed.
func (m *Member) answersAsVoter(ctx context.Context, urls []string, clusterIDs ...uint64) (url string, leader, ok bool) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: rpcTimeout, TLS: m.trust.PeerTLS(), Logger: zap.NewNop()})
	if err != nil {
		return "", false, false
	}
	defer cli.Close()
	for _, u := range urls {
		sctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		st, err := cli.Status(sctx, u)
		cancel()
		if err != nil || st.Header == nil || !slices.Contains(clusterIDs, st.Header.ClusterId) {
			continue
		}
		if st.Leader != 0 && !st.IsLearner {
			return u, true, true
		}
		if !ok {
			url, ok = u, true
		}
	}
	return url, false, ok
}
