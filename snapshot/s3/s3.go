// Package s3 is a snapshot store in an S3 bucket (AWS or any S3-compatible
// server): OBJECT and OBJECT.meta.json under a prefix. Objects are uploaded
// as streams (multipart, never whole in memory); the metadata object is
// written last, so a listing never shows a partial snapshot. Credentials
// come from the SDK's standard chain.
//
// A failed upload is aborted and the object of a failed save deleted on a
// fresh context, and Sweep removes what is left anyway (a crash between
// the two writes); still, give the bucket a lifecycle rule that aborts
// incomplete multipart uploads after a day
// (AbortIncompleteMultipartUpload, DaysAfterInitiation 1): parts of an
// upload whose process was killed are billed and invisible otherwise.
package s3

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/internal/awsconf"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

const metaSuffix = ".meta.json"

// Options configure a Store.
type Options struct {
	Bucket string
	// Prefix, optional, is prepended to every key (e.g. "etcd/main/").
	Prefix string
	// Endpoint, optional, for S3-compatible servers.
	Endpoint string
	// Region, optional, defaults to the SDK's chain, then us-east-1.
	Region string
	// PathStyle addresses buckets as endpoint/bucket (most S3-compatible
	// servers need it).
	PathStyle bool
	// HTTPClient, optional (custom CA for the endpoint's TLS).
	HTTPClient *http.Client
	// Log, optional, receives what List skips (a corrupt or orphaned
	// metadata object). Defaults to nowhere.
	Log hclog.Logger
}

// Store keeps snapshots in a bucket.
type Store struct {
	o   Options
	cli *s3.Client
	up  *manager.Uploader

	// metas caches the metadata List read, by name, with the ETag it was
	// read at: a listing reads again only what is new or rewritten (a
	// member lists every loop, and a delta chain adds an object a second).
	// Corrupt metadata is cached too (corrupt set): it is neither read
	// again nor reported again until it is rewritten.
	mu    sync.Mutex
	metas map[string]cachedMeta
}

type cachedMeta struct {
	etag    string
	m       snapshot.Meta
	corrupt error
}

var (
	_ snapshot.Store   = (*Store)(nil)
	_ snapshot.Sweeper = (*Store)(nil)
)

// New builds the S3 client.
func New(ctx context.Context, o Options) (*Store, error) {
	if o.Bucket == "" {
		return nil, errors.New("s3 store: bucket is required")
	}
	cfg, err := awsconf.Load(ctx, o.Region, o.HTTPClient)
	if err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = hclog.NewNullLogger()
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	cli := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.PathStyle
		// Checksums only when the API requires them: S3-compatible
		// servers differ in what they accept. Integrity is ours (sha256).
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &Store{o: o, cli: cli, up: manager.NewUploader(cli, func(u *manager.Uploader) {
		u.PartSize = 16 << 20
		u.Concurrency = 2
		// The uploader would abort on the upload's own context, which is
		// the one that ended when a save is cancelled; Put aborts instead.
		u.LeavePartsOnError = true
	})}, nil
}

func (s *Store) key(name string) string { return s.o.Prefix + name }

// Put uploads the object as a stream.
func (s *Store) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	if err := snapshot.ValidName(name); err != nil {
		return 0, err
	}
	c := &countReader{r: r}
	_, err := s.up.Upload(ctx, &s3.PutObjectInput{Bucket: aws.String(s.o.Bucket), Key: aws.String(s.key(name)), Body: c})
	if err != nil {
		var mf manager.MultiUploadFailure
		if errors.As(err, &mf) && mf.UploadID() != "" {
			err = errors.Join(err, s.abort(ctx, s.key(name), mf.UploadID()))
		}
		return c.n, fmt.Errorf("upload s3://%s/%s: %w", s.o.Bucket, s.key(name), err)
	}
	return c.n, nil
}

// abort aborts a failed multipart upload on a fresh context (ctx may be
// what failed it), so that its parts are not kept and billed.
func (s *Store) abort(ctx context.Context, key, id string) error {
	cctx, cancel := snapshot.CleanupContext(ctx)
	defer cancel()
	if _, err := s.cli.AbortMultipartUpload(cctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.o.Bucket), Key: aws.String(key), UploadId: aws.String(id)}); err != nil {
		return fmt.Errorf("abort the multipart upload %s of %s (Sweep, or a lifecycle rule, removes it later): %w", id, key, err)
	}
	return nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// PutMeta writes the metadata object.
func (s *Store) PutMeta(ctx context.Context, m snapshot.Meta) error {
	if err := snapshot.ValidName(m.Name); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	_, err = s.cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.o.Bucket), Key: aws.String(s.key(m.Name + metaSuffix)), Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b)))})
	if err != nil {
		return fmt.Errorf("write metadata of %s: %w", m.Name, err)
	}
	return nil
}

func notFound(err error) bool {
	var nsk *s3types.NoSuchKey
	var nf *s3types.NotFound
	return errors.As(err, &nsk) || errors.As(err, &nf)
}

func (s *Store) meta(ctx context.Context, name string) (snapshot.Meta, error) {
	m, _, err := s.metaTagged(ctx, name)
	return m, err
}

// metaTagged reads an object's metadata and the ETag it was read at.
func (s *Store) metaTagged(ctx context.Context, name string) (snapshot.Meta, string, error) {
	var m snapshot.Meta
	out, err := s.cli.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.o.Bucket), Key: aws.String(s.key(name + metaSuffix))})
	if err != nil {
		if notFound(err) {
			return m, "", fmt.Errorf("snapshot %s: %w", name, os.ErrNotExist)
		}
		return m, "", fmt.Errorf("read metadata of %s: %w", name, err)
	}
	defer out.Body.Close()
	etag := aws.ToString(out.ETag)
	m, err = snapshot.DecodeMeta(out.Body)
	if errors.Is(err, snapshot.ErrCorruptMeta) {
		return m, etag, fmt.Errorf("metadata of %s: %w", name, err)
	}
	if err != nil {
		return m, "", fmt.Errorf("read metadata of %s: %w", name, err)
	}
	if m.Name != name {
		return m, etag, fmt.Errorf("metadata of %s names %q: %w", name, m.Name, snapshot.ErrCorruptMeta)
	}
	return m, etag, nil
}

// listMetaAttempts and listMetaBackoff bound List's reads of one metadata
// object beyond the SDK's own three attempts: one read that failed them
// all failed the whole listing, and with it the member's observation or
// recovery attempt (seen with a store resetting 1 connection in 5: each
// failure cost a recovery try, about 11 s).
const (
	listMetaAttempts = 4
	listMetaBackoff  = 250 * time.Millisecond
)

// listedMeta is a metadata object as List needs it: from the cache when
// the listing shows the ETag it was read at, else read (with retries) and
// cached.
func (s *Store) listedMeta(ctx context.Context, name, etag string) (snapshot.Meta, error) {
	s.mu.Lock()
	c, ok := s.metas[name]
	s.mu.Unlock()
	if ok && etag != "" && c.etag == etag {
		if c.corrupt != nil {
			return snapshot.Meta{}, errReported{c.corrupt}
		}
		return c.m, nil
	}
	var err error
	for i := 0; i < listMetaAttempts; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return snapshot.Meta{}, fmt.Errorf("read metadata of %s: %w (after: %w)", name, ctx.Err(), err)
			case <-time.After(listMetaBackoff << (i - 1)):
			}
		}
		var m snapshot.Meta
		var read string
		m, read, err = s.metaTagged(ctx, name)
		corrupt := errors.Is(err, snapshot.ErrCorruptMeta)
		if (err == nil || corrupt) && read != "" {
			s.mu.Lock()
			if s.metas == nil {
				s.metas = map[string]cachedMeta{}
			}
			if corrupt {
				s.metas[name] = cachedMeta{etag: read, corrupt: err}
			} else {
				s.metas[name] = cachedMeta{etag: read, m: m}
			}
			s.mu.Unlock()
		}
		switch {
		case err == nil:
			return m, nil
		case errors.Is(err, os.ErrNotExist), corrupt, ctx.Err() != nil:
			return m, err
		}
	}
	return snapshot.Meta{}, fmt.Errorf("%w (%d attempts)", err, listMetaAttempts)
}

// errReported is corrupt metadata List found in the cache: listed by
// name as before, and not reported again.
type errReported struct{ err error }

func (e errReported) Error() string { return e.err.Error() }
func (e errReported) Unwrap() error { return e.err }

// Open streams an object.
func (s *Store) Open(ctx context.Context, name string) (io.ReadCloser, snapshot.Meta, error) {
	if err := snapshot.ValidName(name); err != nil {
		return nil, snapshot.Meta{}, err
	}
	m, err := s.meta(ctx, name)
	if err != nil {
		return nil, m, err
	}
	out, err := s.cli.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.o.Bucket), Key: aws.String(s.key(name))})
	if err != nil {
		if notFound(err) {
			return nil, m, fmt.Errorf("snapshot %s: %w", name, os.ErrNotExist)
		}
		return nil, m, fmt.Errorf("read %s: %w", name, err)
	}
	return out.Body, m, nil
}

// objects lists the keys under the prefix (not below a further "/"):
// snapshot names to their last modification, metadata names apart.
func (s *Store) objects(ctx context.Context) (data map[string]time.Time, metas map[string]string, err error) {
	data = map[string]time.Time{}
	metas = map[string]string{}
	pg := s3.NewListObjectsV2Paginator(s.cli, &s3.ListObjectsV2Input{Bucket: aws.String(s.o.Bucket), Prefix: aws.String(s.o.Prefix)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("list s3://%s/%s: %w", s.o.Bucket, s.o.Prefix, err)
		}
		for _, obj := range page.Contents {
			k := strings.TrimPrefix(aws.ToString(obj.Key), s.o.Prefix)
			if strings.Contains(k, "/") {
				continue
			}
			if name, ok := strings.CutSuffix(k, metaSuffix); ok {
				metas[name] = aws.ToString(obj.ETag)
			} else {
				data[k] = aws.ToTime(obj.LastModified)
			}
		}
	}
	return data, metas, nil
}

// List returns every object with metadata, oldest first. One bad entry
// does not hide the others (a failing List would stop scheduled snapshots
// and retention for good): metadata deleted meanwhile is skipped, and
// metadata whose object is missing is reported to the log and skipped;
// metadata that is corrupt (undecodable, oversize, naming another object)
// is reported and its object listed by what its name encodes
// (snapshot.NameMeta), which authentication refuses, rather than hidden.
// Only the store failing fails List.
func (s *Store) List(ctx context.Context) ([]snapshot.Meta, error) {
	data, metas, err := s.objects(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	for name := range s.metas {
		if _, ok := metas[name]; !ok {
			delete(s.metas, name) // deleted: forget it
		}
	}
	s.mu.Unlock()
	var out []snapshot.Meta
	for name, etag := range metas {
		m, err := s.listedMeta(ctx, name, etag)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue // deleted since the listing
		case errors.Is(err, snapshot.ErrCorruptMeta):
			// Listed by its name, refused, not hidden: a writer who
			// overwrote the newest segment's metadata with garbage made
			// members recover from older data.
			nm, ok := snapshot.NameMeta(name, "", err)
			reported := errors.As(err, new(errReported))
			if _, have := data[name]; !have {
				// Reported once per version as the cached corruption
				// is, not at every listing as the uncached check below.
				if !reported {
					s.o.Log.Warn("snapshot listing: skipping corrupt metadata whose object is missing", "key", s.key(name+metaSuffix), "error", err)
				}
				continue
			}
			if !reported {
				if ok {
					s.o.Log.Warn("snapshot listing: corrupt metadata, its object listed by name and refused", "key", s.key(name+metaSuffix), "error", err)
				} else {
					s.o.Log.Warn("snapshot listing: skipping corrupt metadata of a name no cluster writes", "key", s.key(name+metaSuffix), "error", err)
				}
			}
			if !ok {
				continue
			}
			m = nm
		case err != nil:
			return nil, err
		}
		if _, ok := data[name]; !ok {
			s.o.Log.Warn("snapshot listing: skipping metadata whose object is missing", "key", s.key(name+metaSuffix))
			continue
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Sweep removes what failed saves left and no listing shows, last
// modified before cutoff: snapshot objects without metadata and
// incomplete multipart uploads under the prefix.
func (s *Store) Sweep(ctx context.Context, cutoff time.Time) ([]string, error) {
	data, metas, err := s.objects(ctx)
	if err != nil {
		return nil, err
	}
	for name := range metas {
		delete(data, name)
	}
	var removed []string
	var errs []error
	for name, modified := range data {
		if !strings.Contains(name, ".snap.zst") || !modified.Before(cutoff) {
			continue
		}
		if _, err := s.cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.o.Bucket), Key: aws.String(s.key(name))}); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("delete %s: %w", s.key(name), err))
			continue
		}
		removed = append(removed, s.key(name))
	}
	pg := s3.NewListMultipartUploadsPaginator(s.cli, &s3.ListMultipartUploadsInput{Bucket: aws.String(s.o.Bucket), Prefix: aws.String(s.o.Prefix)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("list incomplete uploads under s3://%s/%s: %w", s.o.Bucket, s.o.Prefix, err))
			break
		}
		for _, u := range page.Uploads {
			if !aws.ToTime(u.Initiated).Before(cutoff) {
				continue
			}
			if err := s.abort(ctx, aws.ToString(u.Key), aws.ToString(u.UploadId)); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, "incomplete upload of "+aws.ToString(u.Key))
		}
	}
	sort.Strings(removed)
	return removed, errors.Join(errs...)
}

// Delete removes the metadata (hiding the object), then the object.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := snapshot.ValidName(name); err != nil {
		return err
	}
	for _, k := range []string{s.key(name + metaSuffix), s.key(name)} {
		if _, err := s.cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.o.Bucket), Key: aws.String(k)}); err != nil && !notFound(err) {
			return fmt.Errorf("delete %s: %w", k, err)
		}
	}
	return nil
}

// TrustCAFile returns an HTTP client for the store that trusts the PEM CA
// certificates in path besides the system's (an S3-compatible server with
// its own CA). TLS 1.2 at least; proxies from the environment.
func TrustCAFile(path string) (*http.Client, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}
