package task

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

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// metaFile is the metadata etcd-nomad keeps beside etcd's own data.
const metaFile = "etcd-nomad.json"

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
}

// dataDir is one member's directory: current/ holds the data in use,
// aside/ the data that was set aside, tls/ the member's certificates.
type dataDir struct {
	root string
}

func (d dataDir) current() string { return filepath.Join(d.root, "current") }
func (d dataDir) etcdDir() string { return filepath.Join(d.current(), "etcd") }
func (d dataDir) tlsDir() string  { return filepath.Join(d.root, "tls") }
func (d dataDir) asideDir() string {
	return filepath.Join(d.root, "aside")
}

func (d dataDir) readMeta() (Meta, error) {
	var m Meta
	b, err := os.ReadFile(filepath.Join(d.current(), metaFile))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode %s: %w", metaFile, err)
	}
	return m, nil
}

func (d dataDir) writeMeta(m Meta) error {
	if err := os.MkdirAll(d.current(), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(d.current(), metaFile)
	if err := os.WriteFile(p+".tmp", b, 0o600); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

// dropMetaWithoutData removes metadata that no etcd data goes with: what a
// seed wrote before it failed. It names no incarnation this member holds
// and is written again by the next start; metadata beside etcd data is
// never touched.
func (d dataDir) dropMetaWithoutData() {
	if !d.hasEtcdData() {
		_ = os.Remove(filepath.Join(d.current(), metaFile))
	}
}

// caFile keeps the cluster CA (certificate and key) the member's
// certificates were issued from, next to them.
func (d dataDir) caFile() string { return filepath.Join(d.tlsDir(), "ca.bundle") }

// readCA returns the saved cluster CA, or nil if none is saved.
func (d dataDir) readCA() (*certs.Pair, error) {
	b, err := os.ReadFile(d.caFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p, err := certs.ParseBundle(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.caFile(), err)
	}
	return &p, nil
}

func (d dataDir) writeCA(ca certs.Pair) error {
	if err := os.MkdirAll(d.tlsDir(), 0o700); err != nil {
		return err
	}
	p := d.caFile()
	if err := os.WriteFile(p+".tmp", ca.Bundle(), 0o600); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

// hasEtcdData reports whether etcd data (a WAL) exists.
func (d dataDir) hasEtcdData() bool {
	ents, err := os.ReadDir(filepath.Join(d.etcdDir(), "member", "wal"))
	return err == nil && len(ents) > 0
}

// observe describes the data dir for the planner. Revision is read from
// the backend only when etcd is not running (bbolt is single-writer).
func (d dataDir) observe(running bool) planner.Local {
	meta, merr := d.readMeta()
	data := d.hasEtcdData()
	if !data {
		if merr == nil && running {
			return planner.Local{Cluster: meta.Cluster, Name: meta.Name, Token: meta.Token, Epoch: meta.Epoch, MemberID: meta.MemberID, ClusterID: meta.ClusterID}
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
		l.Revision = d.revision()
		l.Learner = d.learner(meta.MemberID)
		l.NewerEtcd = newerEtcd(d.storageVersion(), version.Version, d.etcdDir())
	}
	return l
}

// storageVersion reads the storage version etcd 3.6 and later record in
// the backend's meta bucket ("storageVersion", e.g. "3.6.0"); "" when
// absent (etcd 3.5 wrote none) or unreadable.
func (d dataDir) storageVersion() string {
	p := filepath.Join(d.etcdDir(), "member", "snap", "db")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	db, err := bolt.Open(p, 0o600, &bolt.Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
	if err != nil {
		return ""
	}
	defer db.Close()
	var v string
	_ = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("meta")); b != nil {
			v = string(b.Get([]byte("storageVersion")))
		}
		return nil
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

// learner reads from the stopped backend's membership whether member id
// was a learner when the data was last written. Unknown reads as a
// learner when the metadata says the member joined and was never seen
// as a voter; a member id etcd does not list reads as not a learner (the
// planner's other rules handle removed members).
func (d dataDir) learner(id uint64) bool {
	if id == 0 {
		return false
	}
	p := filepath.Join(d.etcdDir(), "member", "snap", "db")
	if _, err := os.Stat(p); err != nil {
		return false
	}
	db, err := bolt.Open(p, 0o600, &bolt.Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
	if err != nil {
		return false
	}
	defer db.Close()
	var learner bool
	_ = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("members"))
		if b == nil {
			return nil
		}
		v := b.Get([]byte(strconv.FormatUint(id, 16)))
		if v == nil {
			return nil
		}
		var m struct {
			IsLearner bool `json:"isLearner"`
		}
		if json.Unmarshal(v, &m) == nil {
			learner = m.IsLearner
		}
		return nil
	})
	return learner
}

// revision reads the newest revision in the backend, 0 if unknown.
func (d dataDir) revision() int64 { return backendRevision(d.etcdDir()) }

// backendRevision reads the newest revision in the backend of the etcd
// data dir etcdDir, 0 if unknown.
func backendRevision(etcdDir string) int64 {
	p := filepath.Join(etcdDir, "member", "snap", "db")
	if _, err := os.Stat(p); err != nil {
		return 0
	}
	db, err := bolt.Open(p, 0o600, &bolt.Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
	if err != nil {
		return 0
	}
	defer db.Close()
	var rev int64
	_ = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return nil
		}
		k, _ := b.Cursor().Last()
		if len(k) >= 8 {
			for _, c := range k[:8] {
				rev = rev<<8 | int64(c)
			}
		}
		return nil
	})
	return rev
}

// setAside renames current/ to aside/TIMESTAMP-WHY. Nothing is deleted.
func (d dataDir) setAside(now time.Time, why string) (string, error) {
	if _, err := os.Stat(d.current()); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err := os.MkdirAll(d.asideDir(), 0o700); err != nil {
		return "", err
	}
	dst := filepath.Join(d.asideDir(), now.UTC().Format("20060102T150405.000000000Z")+"-"+why)
	if err := os.Rename(d.current(), dst); err != nil {
		return "", fmt.Errorf("set aside %s: %w", d.current(), err)
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

// Deltas are the changes recorded after a full snapshot (its chain,
// snapshot.Chain), replayed over it when it is installed.
type Deltas struct {
	Store      snapshot.Store
	Chain      []snapshot.Meta
	Encryption snapshot.Encryption
}

// InstallSnapshot seeds a member's data dir (root) from a plaintext
// snapshot file verified by snapshot.Fetch as a new incarnation: the current data is set
// aside (renamed, never deleted, tagged why), etcd's restore writes the
// new data, the deltas are replayed over it (snapshot.Replay: a damaged
// segment ends the replay there, as the result's Stopped says), and only
// then the metadata names the incarnation, so a failure leaves a dir a
// retry sets aside again. It returns where the old data went ("" if there
// was none). The member must be stopped.
func InstallSnapshot(ctx context.Context, root, plain string, in Incarnation, deltas Deltas, why string) (string, snapshot.ReplayResult, error) {
	d := dataDir{root: root}
	aside, err := d.setAside(time.Now(), why)
	if err != nil {
		return "", snapshot.ReplayResult{}, err
	}
	err = snapshot.Restore(snapshot.RestoreOptions{SnapshotFile: plain, DataDir: d.etcdDir(), Name: in.Name, PeerURL: in.PeerURL, Token: in.Token, RevisionBump: in.RevisionBump, Verified: true})
	if err != nil {
		return aside, snapshot.ReplayResult{}, err
	}
	var res snapshot.ReplayResult
	if len(deltas.Chain) > 0 {
		res, err = snapshot.Replay(ctx, deltas.Store, deltas.Chain, deltas.Encryption, d.etcdDir(), in.Name)
		if err != nil {
			return aside, res, fmt.Errorf("replay %d deltas: %w", len(deltas.Chain), err)
		}
	}
	return aside, res, d.writeMeta(Meta{Cluster: in.Cluster, Name: in.Name, Token: in.Token, Epoch: in.Epoch})
}
