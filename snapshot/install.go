package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/etcdserver/cindex"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/etcd/server/v3/verify"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// An installed snapshot is written once, where etcd reads it: FetchInto
// decodes the stored object straight into a new data dir's database
// (verifying it on the way), and Restore turns that data dir into a
// one-member cluster's, as etcd's restore does. etcd's own restore
// (etcdutl) takes a plaintext file and copies it into the data dir, so
// fetching into a file first wrote every byte twice (the install step was
// twice etcdutl's time on the same data: make bench e.restore).

// dbPath is where etcd keeps a data dir's database.
func dbPath(dataDir string) string { return filepath.Join(dataDir, "member", "snap", "db") }

// FetchInto decodes snapshot name from store into a new etcd data dir
// (dataDir, which must not exist): the database at member/snap/db,
// verified as Fetch verifies (sha256 recorded at save, etcd's own hash),
// with etcd's trailing hash cut off. On any error dataDir is removed
// again. Restore completes the data dir.
func FetchInto(ctx context.Context, store Store, name, dataDir string, enc Encryption, progress Progress) (Meta, error) {
	if _, err := os.Lstat(dataDir); err == nil {
		return Meta{}, fmt.Errorf("fetch %s into %s: the directory exists; it is never overwritten", name, dataDir)
	}
	db := dbPath(dataDir)
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		return Meta{}, err
	}
	m, err := fetchDB(ctx, store, name, db, enc, progress)
	if err != nil {
		_ = os.RemoveAll(dataDir) // only what this fetch created
		return Meta{}, err
	}
	return m, nil
}

func fetchDB(ctx context.Context, store Store, name, db string, enc Encryption, progress Progress) (Meta, error) {
	f, err := os.OpenFile(db, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return Meta{}, err
	}
	m, err := decodeTo(ctx, f, store, name, enc, progress)
	if err != nil {
		return Meta{}, err
	}
	// Decode checked the last 32 bytes as etcd's hash of the database
	// (a stream shorter than that fails it); etcd's database ends before
	// them.
	if err := os.Truncate(db, m.Size-sha256.Size); err != nil {
		return Meta{}, fmt.Errorf("cut etcd's hash off %s: %w", db, err)
	}
	return m, nil
}

// RestoreOptions describe the one-member cluster a snapshot seeds.
type RestoreOptions struct {
	// DataDir holds a database fetched by FetchInto and nothing else.
	DataDir string
	Name    string
	PeerURL string
	Token   string
	// RevisionBump is added to the revision so that watchers never see
	// revisions go backwards; revisions up to it are marked compacted.
	RevisionBump uint64
}

// Restore completes a data dir FetchInto wrote into one etcd starts as a
// new one-member cluster (name, peer URL, token), in the steps of etcd's
// own restore: the snapshot's membership is dropped from the database,
// the revision is bumped and marked compacted, the member is recorded in
// the database, a WAL and a raft snapshot hold the new cluster, and the
// consistent index points at the WAL's last entry. etcd's own check of a
// data dir (the WAL against the database) runs last. A dir with a WAL is
// refused untouched; on a later error the data dir is removed (it held
// only the fetched copy).
func Restore(o RestoreOptions) error {
	if _, err := os.Lstat(filepath.Join(o.DataDir, "member", "wal")); err == nil {
		return fmt.Errorf("restore into %s: it holds a WAL: a data dir is never restored over", o.DataDir)
	}
	if _, err := os.Stat(dbPath(o.DataDir)); err != nil {
		return fmt.Errorf("restore into %s: no fetched database: %w", o.DataDir, err)
	}
	if err := restore(o); err != nil {
		_ = os.RemoveAll(o.DataDir)
		return fmt.Errorf("restore into %s: %w", o.DataDir, err)
	}
	return nil
}

func restore(o RestoreOptions) error {
	lg := zap.NewNop()
	walDir, db := filepath.Join(o.DataDir, "member", "wal"), dbPath(o.DataDir)
	peers, err := types.NewURLsMap(o.Name + "=" + o.PeerURL)
	if err != nil {
		return fmt.Errorf("member %s at %s: %w", o.Name, o.PeerURL, err)
	}
	cl, err := membership.NewClusterFromURLsMap(lg, o.Token, peers)
	if err != nil {
		return err
	}
	var latest mvcc.Revision
	if o.RevisionBump > 0 {
		if latest, err = latestRevision(db); err != nil {
			return err
		}
	}
	be := backend.NewDefaultBackend(lg, db)
	closed := false
	defer func() {
		if !closed {
			be.Close()
		}
	}()
	mb := schema.NewMembershipBackend(lg, be)
	if err := mb.TrimMembershipFromBackend(); err != nil {
		return fmt.Errorf("drop the snapshot's membership: %w", err)
	}
	if o.RevisionBump > 0 {
		bumpRevision(be, latest, int64(o.RevisionBump))
	}
	cl.SetBackend(mb)
	for _, m := range cl.Members() {
		cl.AddMember(m, membership.ApplyBoth)
	}
	commit, term, err := writeWAL(lg, cl, o.Name, walDir, filepath.Dir(db))
	if err != nil {
		return err
	}
	cindex.UpdateConsistentIndexForce(be.BatchTx(), commit, term)
	closed = true
	if err := be.Close(); err != nil { // commits and syncs the database
		return fmt.Errorf("close the database: %w", err)
	}
	if err := verify.Verify(verify.Config{DataDir: o.DataDir, ExactIndex: true, Logger: lg}); err != nil {
		return fmt.Errorf("etcd's check of the restored data dir: %w", err)
	}
	return nil
}

// latestRevision is the highest revision in the database's key bucket:
// its last key (a revision's bytes sort as the revision). etcd's restore
// walks every key for it.
func latestRevision(db string) (mvcc.Revision, error) {
	bdb, err := bolt.Open(db, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return mvcc.Revision{}, fmt.Errorf("open %s: %w", db, err)
	}
	defer bdb.Close()
	var latest mvcc.Revision
	err = bdb.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(schema.Key.Name())
		if b == nil {
			return errors.New("the database has no key bucket: not an etcd snapshot")
		}
		if k, _ := b.Cursor().Last(); k != nil {
			latest = mvcc.BytesToRev(k)
		}
		return nil
	})
	return latest, err
}

// bumpRevision adds amount to the latest revision (an empty entry at the
// new revision, as etcd's restore writes) and marks it compacted, so that
// no watcher ever sees a revision it saw before, with other data.
func bumpRevision(be backend.Backend, latest mvcc.Revision, amount int64) {
	tx := be.BatchTx()
	tx.LockOutsideApply()
	defer tx.Unlock()
	bumped := mvcc.Revision{Main: latest.Main + amount}
	tx.UnsafePut(schema.Key, mvcc.RevToBytes(bumped, mvcc.NewRevBytes()), []byte{})
	mvcc.UnsafeSetScheduledCompact(tx, bumped.Main)
}

// writeWAL creates the WAL of a new cluster of cl's members (each added
// by one entry of term 1, all committed) and the raft snapshot at its
// end, and returns the last index and term.
func writeWAL(lg *zap.Logger, cl *membership.RaftCluster, name, walDir, snapDir string) (uint64, uint64, error) {
	self := cl.MemberByName(name)
	if self == nil {
		return 0, 0, fmt.Errorf("member %s is not in the new cluster", name)
	}
	md, err := (&etcdserverpb.Metadata{NodeID: uint64(self.ID), ClusterID: uint64(cl.ID())}).Marshal()
	if err != nil {
		return 0, 0, err
	}
	w, err := wal.Create(lg, walDir, md)
	if err != nil {
		return 0, 0, fmt.Errorf("create the WAL: %w", err)
	}
	defer w.Close()
	ids := cl.MemberIDs()
	ents := make([]raftpb.Entry, 0, len(ids))
	voters := make([]uint64, 0, len(ids))
	for i, id := range ids {
		ctx, err := json.Marshal(cl.Member(id))
		if err != nil {
			return 0, 0, err
		}
		cc, err := (&raftpb.ConfChange{Type: raftpb.ConfChangeAddNode, NodeID: uint64(id), Context: ctx}).Marshal()
		if err != nil {
			return 0, 0, err
		}
		ents = append(ents, raftpb.Entry{Type: raftpb.EntryConfChange, Term: 1, Index: uint64(i + 1), Data: cc})
		voters = append(voters, uint64(id))
	}
	commit, term := uint64(len(ents)), uint64(1)
	if err := w.Save(raftpb.HardState{Term: term, Vote: voters[0], Commit: commit}, ents); err != nil {
		return 0, 0, fmt.Errorf("write the WAL: %w", err)
	}
	conf := raftpb.ConfState{Voters: voters}
	rs := raftpb.Snapshot{
		Data:     etcdserver.GetMembershipInfoInV2Format(lg, cl),
		Metadata: raftpb.SnapshotMetadata{Index: commit, Term: term, ConfState: conf},
	}
	if err := snap.New(lg, snapDir).SaveSnap(rs); err != nil {
		return 0, 0, fmt.Errorf("write the raft snapshot: %w", err)
	}
	if err := w.SaveSnapshot(walpb.Snapshot{Index: commit, Term: term, ConfState: &conf}); err != nil {
		return 0, 0, fmt.Errorf("record the raft snapshot in the WAL: %w", err)
	}
	return commit, term, nil
}
