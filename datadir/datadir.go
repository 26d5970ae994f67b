package datadir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/coreos/go-semver/semver"
	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/version"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// MetaFile is the metadata etcd-nomad keeps beside etcd's own data.
const MetaFile = "etcd-nomad.json"

// Meta identifies the cluster incarnation a data dir belongs to.
type Meta struct {
	Cluster   string `json:"cluster"`
	Name      string `json:"name"`
	Token     string `json:"token"`
	Epoch     uint64 `json:"epoch"`
	MemberID  uint64 `json:"member_id,omitempty"`
	ClusterID uint64 `json:"cluster_id,omitempty"`
	// ForceNew asks the next start to use ForceNewCluster (a recovery from
	// this member's data); cleared once the server is ready.
	ForceNew bool `json:"force_new,omitempty"`
	// Stopped is set once etcd stopped cleanly and cleared before it
	// starts: a copy of a directory without it was taken while etcd ran
	// (Nomad migrating a lost allocation's disk from a client that came
	// back with it still running) or after a crash, and may lag behind a
	// member that still runs with the same identity; it is never adopted.
	Stopped bool `json:"stopped,omitempty"`
	// Host is the address of the host whose member last started etcd on
	// this data: data found on that same host was moved there by Nomad
	// (a rename of a terminated allocation's disk), never copied.
	Host string `json:"host,omitempty"`
	// StartedToken is the token etcd was last started with on this data,
	// written (synced) by MarkStarted before etcd starts: data whose
	// Token differs never started as the incarnation its metadata names
	// (Unstarted). The cluster id alone cannot tell: it is written only
	// once the server is ready, and a start that became ready and took
	// writes may die before (invariant 10).
	StartedToken string `json:"started_token,omitempty"`
	// SourceToken, SourceEpoch and SourceClusterID name the incarnation
	// the data held before a recovery from it rewrote the metadata for
	// its ForceNewCluster start (ForceNewFrom): if that start never
	// happens, the data is still the source's, and DropForceNew names it
	// again (invariant 9).
	SourceToken     string `json:"source_token,omitempty"`
	SourceEpoch     uint64 `json:"source_epoch,omitempty"`
	SourceClusterID uint64 `json:"source_cluster_id,omitempty"`
}

// ForceNewFrom rewrites the metadata for a recovery from this data that
// starts epoch (token) with ForceNewCluster. The incarnation the data
// holds is kept as its source (once: a rewrite of a pending one keeps
// the first).
func (m *Meta) ForceNewFrom(token string, epoch uint64) {
	if !m.ForceNewPending() || m.SourceToken == "" {
		m.SourceToken, m.SourceEpoch, m.SourceClusterID = m.Token, m.Epoch, m.ClusterID
	}
	m.Token, m.Epoch, m.ForceNew, m.ClusterID = token, epoch, true, 0
}

// DropForceNew clears the ForceNew flag for a start without
// ForceNewCluster. If no start of it ever began (Unstarted), the metadata
// names the data's source incarnation again: kept, the rewritten epoch
// (never confirmed) would be re-recorded once the data runs in its old
// cluster, and that cluster's other members would set their data aside
// for it (invariant 9). A start that began keeps the recovery's token
// and epoch, even one that failed (invariant 10): etcd's ForceNewCluster bootstrap commits the removal of every
// other member to the WAL before the server is ready, so the data may
// already be a one-member cluster with the source's cluster id; named
// as the source again, it would run as a second cluster of the source's
// token, epoch and cluster id beside the source's members (invariant
// 9). Under another epoch, its peers tell it apart.
func (m *Meta) DropForceNew() {
	if m.ForceNewPending() && m.Unstarted() && m.SourceToken != "" {
		m.Token, m.Epoch, m.ClusterID = m.SourceToken, m.SourceEpoch, m.SourceClusterID
	}
	m.ForceNew = false
	m.SourceToken, m.SourceEpoch, m.SourceClusterID = "", 0, 0
}

// Unstarted reports whether no etcd start has run on this data as the
// incarnation the metadata names, nor did one complete the metadata: a
// recovery's rewrite for its ForceNewCluster start, or an installed
// restore, before their start. It decides only what 'recover
// -keep-running' sets aside at no loss; the fence of an incomplete start
// is ForceNewPending (invariant 10).
func (m Meta) Unstarted() bool {
	return m.Token != "" && m.Token != m.StartedToken && m.ClusterID == 0
}

// ForceNewPending reports whether the metadata asks for a ForceNewCluster
// start that never completed (planner.Local.ForceNewPending), whatever
// StartedToken says: a start that failed after MarkStarted, or died
// before completeMeta, is still fenced (invariant 10).
func (m Meta) ForceNewPending() bool { return m.ForceNew && m.ClusterID == 0 }

// Dir is one member's directory (Root): current/ holds the data in use,
// aside/ the data that was set aside, tls/ the member's certificates.
type Dir struct {
	Root string
}

// Current holds the data in use: etcd's and its metadata.
func (d Dir) Current() string { return filepath.Join(d.Root, "current") }

// EtcdDir is etcd's data dir.
func (d Dir) EtcdDir() string { return filepath.Join(d.Current(), "etcd") }

// TLSDir holds the member's certificates.
func (d Dir) TLSDir() string { return filepath.Join(d.Root, "tls") }

// CAFile keeps the cluster CA (certificate and key) the member's
// certificates were issued from, next to them.
func (d Dir) CAFile() string { return filepath.Join(d.TLSDir(), "ca.bundle") }

// AsideDir holds the data set aside.
func (d Dir) AsideDir() string {
	return filepath.Join(d.Root, "aside")
}

// ReadMeta reads the metadata of the data in use.
func (d Dir) ReadMeta() (Meta, error) {
	var m Meta
	b, err := os.ReadFile(filepath.Join(d.Current(), MetaFile))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode %s: %w", MetaFile, err)
	}
	return m, nil
}

// WriteMeta replaces the metadata of the data in use, atomically and
// durably (synced before it returns: what it says about a start must
// hold after a host crash).
func (d Dir) WriteMeta(m Meta) error {
	if err := os.MkdirAll(d.Current(), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(d.Current(), MetaFile)
	if err := writeSynced(p+".tmp", b); err != nil {
		return err
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		return err
	}
	return syncDir(d.Current())
}

// writeSynced writes b to the file p and syncs it.
func writeSynced(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", p, err)
	}
	return f.Close()
}

// syncDir syncs the directory dir, so that a rename in it is durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// MarkStopped sets Meta.Stopped, once etcd stopped cleanly.
func (d Dir) MarkStopped() error {
	return d.mark(func(m *Meta) { m.Stopped = true })
}

// MarkStarted clears Meta.Stopped, records host as the data's host and
// the token etcd starts with (StartedToken), before etcd starts: from
// then on the data may have run as that incarnation (a ForceNewCluster
// start rewrites the WAL at once, and may take writes before the
// metadata is completed), so it is never again reported unstarted.
func (d Dir) MarkStarted(host string) error {
	return d.mark(func(m *Meta) { m.Stopped, m.Host, m.StartedToken = false, host, m.Token })
}

// mark changes the metadata of the data in use, if it has any (nothing to
// mark otherwise), and writes it only when change changed it.
func (d Dir) mark(change func(*Meta)) error {
	m, err := d.ReadMeta()
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	before := m
	change(&m)
	if m == before {
		return nil
	}
	return d.WriteMeta(m)
}

// DropMetaWithoutData removes metadata that no etcd data goes with: what a
// seed wrote before it failed. It names no incarnation this member holds
// and is written again by the next start; metadata beside etcd data is
// never touched.
func (d Dir) DropMetaWithoutData() {
	if has, err := d.EtcdData(); err == nil && !has {
		_ = os.Remove(filepath.Join(d.Current(), MetaFile))
	}
}

// HasEtcdData reports whether etcd data (a WAL) exists; false also when
// the WAL directory cannot be read (EtcdData tells the two apart).
func (d Dir) HasEtcdData() bool {
	has, _ := d.EtcdData()
	return has
}

// EtcdData reports whether etcd data (a WAL) exists. A WAL directory that
// is missing means no data; one that cannot be read (EIO, EMFILE, a
// permission) is an error, never "no data": a holder answering "empty"
// for a moment was forgotten by its peers, which could then seed beside
// it (review rev19f 4).
func (d Dir) EtcdData() (bool, error) {
	ents, err := os.ReadDir(filepath.Join(d.EtcdDir(), "member", "wal"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read etcd data in %s: %w", d.EtcdDir(), err)
	}
	return len(ents) > 0, nil
}

// Observe describes the data dir for the planner. Revision is read from
// the backend only when etcd is not running (bbolt is single-writer).
func (d Dir) Observe(running bool) planner.Local {
	meta, merr := d.ReadMeta()
	data, derr := d.EtcdData()
	if derr != nil && running {
		data = true // a running etcd holds data
	}
	if !data {
		if merr == nil && running {
			return planner.Local{Cluster: meta.Cluster, Name: meta.Name, Token: meta.Token, Epoch: meta.Epoch, MemberID: meta.MemberID, ClusterID: meta.ClusterID}
		}
		if merr == nil {
			// A join or start wrote it from a record and created no
			// data: that record's epoch existed (planner: aboveOwnMeta),
			// if the metadata is of this cluster (its name, which the
			// planner compares: ownMetaEpoch).
			return planner.Local{Empty: true, Cluster: meta.Cluster, MetaEpoch: meta.Epoch}
		}
		return planner.Local{Empty: true}
	}
	if merr != nil {
		if errors.Is(merr, os.ErrNotExist) {
			return planner.Local{} // data without metadata: foreign
		}
		return planner.Local{Unreadable: merr.Error()}
	}
	l := planner.Local{Cluster: meta.Cluster, Name: meta.Name, Token: meta.Token, Epoch: meta.Epoch, MemberID: meta.MemberID, ClusterID: meta.ClusterID}
	if !running {
		l.Revision = d.Revision()
		l.Learner = d.Learner(meta.MemberID)
		l.NewerEtcd = newerEtcd(d.StorageVersion(), version.Version, d.EtcdDir())
		// The ForceNewCluster start of a recovery from this data never
		// began (MarkStarted; completeMeta clears the flag and writes the
		// cluster id together).
		l.ForceNewPending, l.Unstarted = meta.ForceNewPending(), meta.Unstarted()
	}
	return l
}

// StorageVersion reads the storage version etcd 3.6 and later record in
// the backend's meta bucket ("storageVersion", e.g. "3.6.0"); "" when
// absent (etcd 3.5 wrote none) or unreadable.
func (d Dir) StorageVersion() string {
	var v string
	_ = viewBackend(d.EtcdDir(), func(tx *bolt.Tx) {
		if b := tx.Bucket([]byte("meta")); b != nil {
			v = string(b.Get([]byte("storageVersion")))
		}
	})
	return v
}

// newerEtcd returns why data of storage version stored cannot be started by
// the embedded etcd version, and how to downgrade it; "" when it can.
// Versions compare by major.minor: etcd records the storage version as
// MAJOR.MINOR.0, and patch releases share one schema.
func newerEtcd(stored, embedded, dir string) string {
	sv, err1 := semver.NewVersion(stored)
	ev, err2 := semver.NewVersion(embedded)
	if err1 != nil || err2 != nil {
		return ""
	}
	if sv.Major < ev.Major || sv.Major == ev.Major && sv.Minor <= ev.Minor {
		return ""
	}
	want := fmt.Sprintf("%d.%d", ev.Major, ev.Minor)
	return fmt.Sprintf("data dir %s was written by etcd %d.%d (storage version %s), newer than the etcd %s this etcd-nomad embeds: not starting it (etcd cannot read a newer schema) and not setting it aside. "+
		"Run the etcd-nomad release that embeds etcd %d.%d, or downgrade the data first: on the running newer cluster 'etcdctl downgrade validate %s' then 'etcdctl downgrade enable %s', and roll the members back one at a time; "+
		"for a stopped data dir, 'etcdutl migrate --data-dir %s --target-version %s'",
		dir, sv.Major, sv.Minor, stored, embedded, sv.Major, sv.Minor, want, want, dir, want)
}

// Learner reads from the stopped backend's membership whether member id
// was a learner when the data was last written. Unknown reads as a
// Learner when the metadata says the member joined and was never seen
// as a voter; a member id etcd does not list reads as not a learner (the
// planner's other rules handle removed members).
func (d Dir) Learner(id uint64) bool {
	if id == 0 {
		return false
	}
	var learner bool
	_ = viewBackend(d.EtcdDir(), func(tx *bolt.Tx) {
		b := tx.Bucket([]byte("members"))
		if b == nil {
			return
		}
		v := b.Get([]byte(strconv.FormatUint(id, 16)))
		if v == nil {
			return
		}
		var m struct {
			IsLearner bool `json:"isLearner"`
		}
		if json.Unmarshal(v, &m) == nil {
			learner = m.IsLearner
		}
	})
	return learner
}

// Revision reads the newest revision in the backend, 0 if unknown.
func (d Dir) Revision() int64 { return BackendRevision(d.EtcdDir()) }

// BackendRevision reads the newest revision in the backend of the etcd
// data dir etcdDir, 0 if unknown.
func BackendRevision(etcdDir string) int64 {
	rev, _ := ReadBackendRevision(etcdDir)
	return rev
}

// ReadBackendRevision is BackendRevision with the reason a backend that
// exists could not be read (0 and an error: the revision is unknown).
func ReadBackendRevision(etcdDir string) (int64, error) {
	var rev int64
	err := viewBackend(etcdDir, func(tx *bolt.Tx) {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return
		}
		k, _ := b.Cursor().Last()
		if len(k) >= 8 {
			for _, c := range k[:8] {
				rev = rev<<8 | int64(c)
			}
		}
	})
	if err != nil {
		return 0, err
	}
	return rev, nil
}

// viewBackend reads the stopped backend of the etcd data dir etcdDir
// (read-only, giving up after 200 ms if another process holds it); a
// missing backend is not read (nil), one that does not open or read is
// not read either (the error says why). bbolt panics on a page that fails
// its checks (torn writes, a corrupt copy set aside): the panic is
// recovered here, so a bad backend never takes down /status or the
// process reading it.
func viewBackend(etcdDir string, read func(*bolt.Tx)) (err error) {
	p := filepath.Join(etcdDir, "member", "snap", "db")
	if _, err := os.Stat(p); err != nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("read backend %s: corrupt: %v", p, r)
		}
	}()
	db, err := bolt.Open(p, 0o600, &bolt.Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("open backend %s: %w", p, err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		read(tx)
		return nil
	})
	return nil
}

// SetAside renames current/ to aside/TIMESTAMP-WHY. Nothing is deleted.
func (d Dir) SetAside(now time.Time, why string) (string, error) {
	if _, err := os.Stat(d.Current()); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err := os.MkdirAll(d.AsideDir(), 0o700); err != nil {
		return "", err
	}
	dst := filepath.Join(d.AsideDir(), now.UTC().Format("20060102T150405.000000000Z")+"-"+why)
	if err := os.Rename(d.Current(), dst); err != nil {
		return "", fmt.Errorf("set aside %s: %w", d.Current(), err)
	}
	return dst, nil
}

// Incarnation describes the cluster a restored data dir starts.
type Incarnation struct {
	Cluster, Name, PeerURL, Token string
	Epoch                         uint64
	// RevisionBump is added to every revision (and marked compacted).
	RevisionBump uint64
}

// InstallSnapshot seeds a member's data dir (root) from an etcd data dir
// holding a snapshot verified by snapshot.FetchInto (fetched, on root's
// filesystem; with its deltas applied already, InstallNextEpoch) as a new
// incarnation: the current data is set aside (renamed, never deleted,
// tagged why), the fetched dir is moved in and completed as etcd's
// restore does (snapshot.Restore), and only then the metadata names the
// incarnation, so a failure leaves a dir a retry sets aside again. It
// returns where the old data went ("" if there was none). The member must
// be stopped.
func InstallSnapshot(ctx context.Context, root, fetched string, in Incarnation, why string) (string, error) {
	d := Dir{Root: root}
	aside, err := d.SetAside(time.Now(), why)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(d.Current(), 0o700); err != nil {
		return aside, err
	}
	if err := os.Rename(fetched, d.EtcdDir()); err != nil {
		return aside, fmt.Errorf("move the fetched snapshot in: %w", err)
	}
	err = snapshot.Restore(snapshot.RestoreOptions{DataDir: d.EtcdDir(), Name: in.Name, PeerURL: in.PeerURL, Token: in.Token, RevisionBump: in.RevisionBump})
	if err != nil {
		return aside, err
	}
	return aside, d.WriteMeta(Meta{Cluster: in.Cluster, Name: in.Name, Token: in.Token, Epoch: in.Epoch})
}
