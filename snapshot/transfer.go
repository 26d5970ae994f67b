package snapshot

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// Progress receives byte counts of a long transfer.
type Progress func(done int64, elapsed time.Duration)

type progressReader struct {
	r     io.Reader
	n     atomic.Int64
	start time.Time
	last  time.Time
	fn    Progress
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	total := p.n.Add(int64(n))
	if p.fn != nil && (time.Since(p.last) > time.Second || err == io.EOF) {
		p.last = time.Now()
		p.fn(total, time.Since(p.start))
	}
	return n, err
}

// Source identifies what is saved.
type Source struct {
	Cluster   string
	ClusterID string
	Epoch     uint64
}

// From is the one member a snapshot is streamed from.
type From struct {
	// Endpoint is the member's client URL. The snapshot is streamed over
	// a client on this endpoint alone: a client on several endpoints
	// balances requests over them, and the stream could come from
	// another member (a learner, an old epoch's member) than the one the
	// snapshot is said to be of.
	Endpoint string
	// TLS, optional, for an https endpoint.
	TLS *tls.Config
	// SpoolDir, optional (default os.TempDir()), holds the plaintext
	// snapshot while its revision is read from it: it needs as much free
	// space as the database's size.
	SpoolDir string
}

// Save's client takes etcd's snapshot messages (32 KiB of data and a few
// bytes of header each) in buffers of snapshotBufferPool. gRPC's default
// pool takes each from its 1 MiB tier and zeroes the whole 1 MiB before
// use: 1.2 CPU-s of a 1.2 GB save (`make bench` e.save, 10% of the
// saver's CPU), where a tier just above the message size zeroes 36 KiB.
// The transport reads frames from the pool of the dial option; the proto
// codec assembles each message from them in the default pool, hence
// snapshotCodec.
var snapshotBufferPool = mem.NewTieredBufferPool(256, 4<<10, 16<<10, 32<<10, 36<<10, 1<<20)

// snapshotCodec is gRPC's proto codec assembling messages in
// snapshotBufferPool.
type snapshotCodec struct{ encoding.CodecV2 }

func (c snapshotCodec) Unmarshal(data mem.BufferSlice, v any) error {
	buf := data.MaterializeToBuffer(snapshotBufferPool)
	defer buf.Free()
	return c.CodecV2.Unmarshal(mem.BufferSlice{buf}, v) // one buffer: not copied again
}

func snapshotDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		experimental.WithBufferPool(snapshotBufferPool),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(snapshotCodec{encoding.GetCodecV2(proto.Name)})),
	}
}

// Save streams a snapshot of one member into store in one pass: etcd's
// snapshot stream goes at the same time to a local spool file and through
// zstd → age (if enabled) → the store, never whole in memory, so that
// compression and encryption run while etcd still sends. The revision is
// read from the spooled data itself (Revision) once the stream has ended
// and goes into the metadata, which is written last, with the
// plaintext's sha256; etcd's trailing hash is checked on the way.
//
// The object's name carries the member's revision when the save started
// (its Status, taken just before the stream): the snapshot holds at least
// that revision. Meta.Revision is the exact one.
func Save(ctx context.Context, from From, store Store, src Source, enc Encryption, progress Progress) (Meta, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{from.Endpoint}, TLS: from.TLS, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: snapshotDialOptions()})
	if err != nil {
		return Meta{}, fmt.Errorf("connect to %s: %w", from.Endpoint, err)
	}
	defer cli.Close()
	st, err := cli.Status(ctx, from.Endpoint)
	if err != nil {
		return Meta{}, fmt.Errorf("status of %s: %w", from.Endpoint, err)
	}
	created := time.Now().UTC()
	spool, err := os.CreateTemp(from.SpoolDir, ".snapshot-spool-*")
	if err != nil {
		return Meta{}, fmt.Errorf("spool file: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	if err := spool.Chmod(0o600); err != nil {
		return Meta{}, err
	}
	m := Meta{
		Cluster: src.Cluster, ClusterID: src.ClusterID, Epoch: src.Epoch,
		Endpoint: from.Endpoint, MemberID: fmt.Sprintf("%x", st.Header.MemberId),
		EtcdVersion: st.Version, Created: created,
		Encrypted: enc.Enabled(), Codec: Codec,
	}
	m.Name = ObjectName(src.Cluster, src.Epoch, st.Header.Revision, created, m.Encrypted)
	sctx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	rc, err := cli.Snapshot(sctx)
	if err != nil {
		return Meta{}, fmt.Errorf("start snapshot of %s: %w", from.Endpoint, err)
	}
	defer rc.Close()
	// etcd's stream goes into the spool at disk speed, never paced by
	// the upload: etcd holds a read transaction open while it streams,
	// which keeps the database from reusing pages, so a slow store must
	// not make it last. The encoder follows the spool as it grows.
	in := &progressReader{r: rc, start: time.Now(), fn: progress}
	sp := newFollower(spool)
	spooled := make(chan struct{})
	go func() {
		defer close(spooled)
		_, err := io.Copy(sp, in)
		sp.finish(err)
	}()
	tail, stored, err := upload(ctx, store, m.Name, sp.reader(), enc)
	stopStream() // a failed upload ends the stream too
	<-spooled
	if err != nil {
		err = fmt.Errorf("snapshot of %s: %w", from.Endpoint, err)
	}
	if err == nil {
		if m.Revision, err = Revision(spool.Name()); err != nil {
			err = errors.Join(fmt.Errorf("snapshot of %s: %w", from.Endpoint, err), discard(ctx, store, m.Name))
		}
	}
	if err != nil {
		return Meta{}, fmt.Errorf("save snapshot: %w", err)
	}
	m.Size, m.SHA256, m.StoredSize = tail.n, hex.EncodeToString(tail.sum()), stored
	m = enc.sign(m)
	if err := putMeta(ctx, store, m); err != nil {
		return Meta{}, err
	}
	return m, nil
}

// upload encodes the plaintext read from r (etcd's format: the data,
// then its sha256) into store under name, encoding while the store
// writes. On any failure the object is deleted (discard) and the error
// says why; the metadata is the caller's to write (putMeta).
func upload(ctx context.Context, store Store, name string, r io.Reader, enc Encryption) (*tailHash, int64, error) {
	pr, pw := io.Pipe()
	type result struct {
		tail *tailHash
		err  error
	}
	done := make(chan result, 1)
	go func() {
		tail, err := encode(pw, r, enc, Codec)
		pw.CloseWithError(err)
		done <- result{tail, err}
	}()
	// A store that ignores ctx (a file store on a slow mount) still stops
	// when the save is cancelled: its reads fail at once.
	stopRead := context.AfterFunc(ctx, func() { pr.CloseWithError(ctx.Err()) })
	stored, perr := store.Put(ctx, name, pr)
	stopRead()
	pr.CloseWithError(perr)
	res := <-done
	if res.err == nil && !res.tail.ok() {
		res.err = fmt.Errorf("the hash at the end of the stream does not match its content: %w", ErrChecksum)
	}
	if res.err != nil || perr != nil {
		return nil, 0, errors.Join(res.err, perr, discard(ctx, store, name))
	}
	return res.tail, stored, nil
}

// putMeta writes the metadata of an uploaded object (signed: sign),
// last: without it the object is listed nowhere and no retention would
// ever remove it, so a failure deletes the object.
func putMeta(ctx context.Context, store Store, m Meta) error {
	if err := store.PutMeta(ctx, m); err != nil {
		return errors.Join(err, discard(ctx, store, m.Name))
	}
	return nil
}

// discard deletes the object of a failed save, on a fresh context: the
// failure may be ctx's end. What it cannot delete a store's sweep
// removes later (Sweeper).
func discard(ctx context.Context, store Store, name string) error {
	cctx, cancel := CleanupContext(ctx)
	defer cancel()
	if err := store.Delete(cctx, name); err != nil {
		return fmt.Errorf("delete the incomplete %s: %w", name, err)
	}
	return nil
}

// Fetch decodes snapshot name from store into the file dst and verifies
// it (sha256 recorded at save, etcd's own hash). dst appears only once
// verified; on any error nothing is left behind. To install a snapshot,
// FetchInto writes it where etcd reads it instead.
func Fetch(ctx context.Context, store Store, name, dst string, enc Encryption, progress Progress) (Meta, error) {
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".fetch-*")
	if err != nil {
		return Meta{}, err
	}
	defer os.Remove(tmp.Name())
	m, err := decodeTo(ctx, tmp, store, name, enc, progress)
	if err != nil {
		return Meta{}, err
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return Meta{}, err
	}
	return m, os.Rename(tmp.Name(), dst)
}

// decodeTo decodes and verifies snapshot name into f and closes f.
func decodeTo(ctx context.Context, f *os.File, store Store, name string, enc Encryption, progress Progress) (Meta, error) {
	rc, m, err := store.Open(ctx, name)
	if err != nil {
		f.Close()
		return Meta{}, fmt.Errorf("open snapshot %s: %w", name, err)
	}
	defer rc.Close()
	in := &progressReader{r: rc, start: time.Now(), fn: progress}
	err = Decode(f, in, m, enc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return m, err
}

// Verify reads snapshot name end to end and checks it, writing nothing.
func Verify(ctx context.Context, store Store, name string, enc Encryption, progress Progress) (Meta, error) {
	rc, m, err := store.Open(ctx, name)
	if err != nil {
		return Meta{}, fmt.Errorf("open snapshot %s: %w", name, err)
	}
	defer rc.Close()
	in := &progressReader{r: rc, start: time.Now(), fn: progress}
	return m, Decode(io.Discard, in, m, enc)
}

// follower is a spool file written by one goroutine while another reads
// it from the start, waiting at the written end until the writer
// finishes: the reader sees exactly the bytes written, then the writer's
// error or io.EOF.
type follower struct {
	f       *os.File
	mu      sync.Mutex
	grew    *sync.Cond
	written int64
	done    bool
	err     error
}

func newFollower(f *os.File) *follower {
	fl := &follower{f: f}
	fl.grew = sync.NewCond(&fl.mu)
	return fl
}

func (fl *follower) Write(p []byte) (int, error) {
	n, err := fl.f.Write(p)
	fl.mu.Lock()
	fl.written += int64(n)
	fl.mu.Unlock()
	fl.grew.Broadcast()
	return n, err
}

// finish records the end of the writing (err nil: complete).
func (fl *follower) finish(err error) {
	fl.mu.Lock()
	fl.done, fl.err = true, err
	fl.mu.Unlock()
	fl.grew.Broadcast()
}

type followReader struct {
	fl  *follower
	off int64
}

func (fl *follower) reader() io.Reader { return &followReader{fl: fl} }

func (r *followReader) Read(p []byte) (int, error) {
	fl := r.fl
	fl.mu.Lock()
	for r.off >= fl.written && !fl.done {
		fl.grew.Wait()
	}
	avail, done, werr := fl.written-r.off, fl.done, fl.err
	fl.mu.Unlock()
	if avail == 0 && done {
		if werr != nil {
			return 0, werr
		}
		return 0, io.EOF
	}
	n, err := fl.f.ReadAt(p[:min(int64(len(p)), avail)], r.off)
	r.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}
