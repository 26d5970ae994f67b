// Package snapshot moves etcd snapshots between a cluster and a store,
// verified end to end: the plaintext's sha256 is recorded beside every
// object and checked on the way back, etcd's own trailing hash is checked
// before anything is restored, and encryption (age) and compression (S2;
// zstd for objects written before, Meta.Codec names which) wrap the
// stream outside the stores, which only move opaque bytes. It
// never holds a whole snapshot in memory and never deletes the newest
// snapshot.
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Meta describes one stored snapshot.
type Meta struct {
	// Name is the object's name in the store.
	Name      string `json:"name"`
	Cluster   string `json:"cluster"`
	ClusterID string `json:"cluster_id"`
	Epoch     uint64 `json:"epoch"`
	// Revision is read from the snapshot's own data (Revision), never
	// from a status call that could have reached another member.
	Revision int64 `json:"revision"`
	// Endpoint and MemberID name the one member the snapshot was
	// streamed from; for a delta, the member whose recorder wrote it.
	Endpoint    string    `json:"endpoint,omitempty"`
	MemberID    string    `json:"member_id,omitempty"`
	EtcdVersion string    `json:"etcd_version"`
	Created     time.Time `json:"created"`
	// Size and SHA256 are those of the plaintext etcd snapshot.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// StoredSize is the size of the object (compressed, maybe encrypted).
	StoredSize int64  `json:"stored_size"`
	Encrypted  bool   `json:"encrypted"`
	Codec      string `json:"codec"`
	// Kind is KindFull ("") or KindDelta. For a delta, FirstRevision
	// and Revision bound the revisions it covers, Base names the full
	// snapshot its chain starts from and Events counts its events.
	Kind          string `json:"kind,omitempty"`
	FirstRevision int64  `json:"first_revision,omitempty"`
	Base          string `json:"base,omitempty"`
	Events        int    `json:"events,omitempty"`
	// MAC authenticates every field above (auth.go), and through SHA256
	// the content: hex HMAC-SHA256, "" when written without a key.
	MAC string `json:"mac,omitempty"`
	// Corrupt is set by a store's listing only, never read from or
	// written to a store: the object's metadata could not be read (why),
	// and the fields above are only what its name encodes (NameMeta).
	// Authenticated refuses it, key or no key.
	Corrupt string `json:"-"`
}

// Store keeps snapshot objects. Backends live in sub-packages (file, s3)
// and move opaque streams.
type Store interface {
	// Put stores the object read from r under name and returns its size.
	// The object is invisible to List until PutMeta.
	Put(ctx context.Context, name string, r io.Reader) (int64, error)
	// PutMeta stores the metadata of an object already Put.
	PutMeta(ctx context.Context, m Meta) error
	// Open returns the object and its metadata; os.ErrNotExist if absent.
	Open(ctx context.Context, name string) (io.ReadCloser, Meta, error)
	// List returns the metadata of every complete object.
	List(ctx context.Context) ([]Meta, error)
	// Delete removes an object and its metadata.
	Delete(ctx context.Context, name string) error
}

// ObjectName names a snapshot by cluster, epoch, revision and time, so
// that names sort by age within a cluster. The ".zst" in the name is the
// first format's and stays for every codec (stores, listings and sweeps
// match names by it); Meta.Codec says how an object is compressed.
func ObjectName(cluster string, epoch uint64, revision int64, created time.Time, encrypted bool) string {
	ext := ".snap.zst"
	if encrypted {
		ext += ".age"
	}
	return fmt.Sprintf("%s-e%d-r%020d-%s%s", cluster, epoch, revision, created.UTC().Format("20060102T150405Z"), ext)
}

// objectNameRest is what ObjectName writes after "<cluster>-". Cluster
// names hold letters, digits and dashes, so a prefix test alone would
// take cluster "a"'s snapshots for cluster "a-e1"'s; the rest must match
// exactly.
var objectNameRest = regexp.MustCompile(`^e[0-9]+-r[0-9]{20}-[0-9]{8}T[0-9]{6}Z\.(snap|delta)\.zst(\.age)?$`)

// objectNameParts is an ObjectName or DeltaName in parts: cluster,
// epoch, revision, time, kind, encrypted. The parts after the cluster
// are fixed in form, so the cluster is what comes before them.
var objectNameParts = regexp.MustCompile(`^(.+)-e([0-9]+)-r([0-9]{20})-([0-9]{8}T[0-9]{6}Z)\.(snap|delta)\.zst(\.age)?$`)

// OfCluster reports whether name is an ObjectName (or a DeltaName) of cluster. Stores that
// several clusters share (one directory, one bucket prefix) use it to see
// only their own cluster's objects, with or without metadata.
func OfCluster(name, cluster string) bool {
	rest, ok := strings.CutPrefix(name, cluster+"-")
	return ok && cluster != "" && objectNameRest.MatchString(rest)
}

// NameMeta is the metadata a listing gives an object of cluster whose
// metadata object is there but cannot be read as its own (undecodable,
// oversize, unreadable, naming another object or cluster): only what the
// name encodes (cluster, epoch, revision, time, full or delta,
// encrypted), no MAC, and Corrupt set to why, so that Authenticated
// refuses it and members weigh it as any refused object (Reach, the
// planner's refused snapshot) rather than recover past it. Skipping it
// instead hid it: a store writer who overwrote the newest genuine
// segment's metadata with garbage made members recover from older data
// than the store holds, where a forged MAC makes them wait. ok is false
// for a name that is not one of cluster's (ObjectName, DeltaName): it
// cannot be ours. With cluster "" (a store that knows no cluster: S3's
// prefix) the cluster is the one the name encodes.
func NameMeta(name, cluster string, why error) (m Meta, ok bool) {
	p := objectNameParts.FindStringSubmatch(name)
	if p == nil || cluster != "" && p[1] != cluster {
		return Meta{}, false
	}
	epoch, err := strconv.ParseUint(p[2], 10, 64)
	if err != nil {
		return Meta{}, false
	}
	rev, err := strconv.ParseInt(p[3], 10, 64)
	if err != nil {
		return Meta{}, false
	}
	created, err := time.Parse("20060102T150405Z", p[4])
	if err != nil {
		return Meta{}, false
	}
	m = Meta{Name: name, Cluster: p[1], Epoch: epoch, Revision: rev, Created: created, Encrypted: p[6] != "", Codec: Codec, Corrupt: "corrupt metadata"}
	if p[5] == "delta" {
		m.Kind = KindDelta
	}
	if why != nil {
		m.Corrupt = why.Error()
	}
	return m, true
}

// cleanupTimeout bounds a cleanup after a failure (abort an upload,
// delete an object without metadata). The cleanup runs on a fresh
// context: the failure is often the caller's context ending (SIGTERM, a
// timeout), which would fail the cleanup too.
const cleanupTimeout = 30 * time.Second

// CleanupContext returns a context for cleaning up after ctx failed: it
// keeps ctx's values, not its cancellation, and ends after 30 seconds.
func CleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

// OrphanAge is how old an object without metadata (or an incomplete
// upload) must be before a sweep removes it: far longer than any save, so
// that a save in progress is never swept.
const OrphanAge = 24 * time.Hour

// ErrChecksum reports a snapshot whose content does not match its record.
var ErrChecksum = errors.New("snapshot checksum mismatch")

// validName refuses names that could escape a store's prefix.
func validName(name string) error {
	if name == "" || strings.Contains(name, "/") || strings.Contains(name, "\\") || strings.HasPrefix(name, ".") {
		return fmt.Errorf("invalid snapshot name %q", name)
	}
	return nil
}

// ValidName is validName for stores.
func ValidName(name string) error { return validName(name) }
