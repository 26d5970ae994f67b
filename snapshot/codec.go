package snapshot

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"runtime"

	"filippo.io/age"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Codecs name the compression of a stored object in its metadata
// (Meta.Codec, which the MAC covers). Decode takes the one named and
// refuses a name it does not know; it never guesses from the bytes.
const (
	// CodecZstd is the first stored format: zstd frames (frames.go).
	// Objects written so are restored as they always were.
	CodecZstd = "zstd"
	// CodecS2 is an S2 stream (klauspost/compress/s2) of 4 MiB blocks,
	// each with its CRC-32C. Compressing 1.2 GB of `make bench` JSON took
	// 1.7 CPU-s instead of zstd's 5.0 (on 2 cores, beside etcd and the
	// gRPC stream, that was the difference between e.save 0.46 and over
	// 1), to 65% of the plaintext where zstd reached 48%; blocks decode
	// on every core on restore.
	CodecS2 = "s2"
)

// Codec is the format Encode, Save and the delta recorder write. This
// release reads CodecS2 and still writes CodecZstd: a member of the
// release before reads zstd only and would take an S2 object for a
// damaged one (a refused snapshot, a chain ending early) during a rolling
// upgrade. The next release, once every member reads S2, writes it
// (e.save 0.66-0.80 of etcdctl with S2 against 0.39-0.51 with zstd on
// this 2-core machine; stored 65% of the plaintext against 48%).
const Codec = CodecZstd

// s2BlockSize is the plaintext of one S2 block: S2's largest, so that
// matches reach as far as the format allows.
const s2BlockSize = 4 << 20

// MaxWindow bounds the zstd window Decode accepts. A frame header names
// its window, and the decoder allocates it before reading any data: with
// zstd's default bound (512 MiB), a 10-byte object in the store made Decode
// allocate 512 MiB, which kills a member whose job grants 512 MB. Encode
// writes 8 MiB windows (the library's default at SpeedFastest); 64 MiB
// leaves room for objects compressed elsewhere at higher levels.
const MaxWindow = 64 << 20

// Encryption holds what the codec needs to encrypt (recipients) and to
// decrypt (identities). A passphrase works both ways (age scrypt).
type Encryption struct {
	Recipients []age.Recipient
	Identities []age.Identity
	// MACKey, when set (DeriveMACKey), authenticates snapshots: every
	// object written carries a MAC of its metadata (auth.go), and Decode
	// refuses one whose MAC does not verify, or that has none. Without it
	// objects are written without a MAC and anyone who can write the
	// store can forge one.
	MACKey []byte
	// AcceptUnauthenticated lets Decode take an object without a MAC
	// (written before snapshots were authenticated): an operator's
	// explicit choice (-accept-unauthenticated), never a member's. An
	// object whose MAC is wrong is refused all the same.
	AcceptUnauthenticated bool
	// AcceptNames lets Decode take the objects so named without a MAC:
	// the ones an operator named (recover -from snapshot:NAME
	// -accept-unauthenticated, -accept-unauthenticated-deltas), and no
	// other a store writer may have added beside them.
	AcceptNames map[string]bool
}

// Enabled reports whether snapshots are encrypted.
func (e Encryption) Enabled() bool { return len(e.Recipients) > 0 }

// Passphrase returns encryption with an age scrypt passphrase.
func Passphrase(p string) (Encryption, error) {
	r, err := age.NewScryptRecipient(p)
	if err != nil {
		return Encryption{}, err
	}
	i, err := age.NewScryptIdentity(p)
	if err != nil {
		return Encryption{}, err
	}
	return Encryption{Recipients: []age.Recipient{r}, Identities: []age.Identity{i}}, nil
}

// X25519 returns encryption to the given age recipients ("age1...") and,
// for restore, the identities in identityFile (may be empty to encrypt
// only).
func X25519(recipients []string, identityFile string) (Encryption, error) {
	var e Encryption
	for _, s := range recipients {
		r, err := age.ParseX25519Recipient(s)
		if err != nil {
			return Encryption{}, fmt.Errorf("recipient %q: %w", s, err)
		}
		e.Recipients = append(e.Recipients, r)
	}
	if identityFile != "" {
		f, err := os.Open(identityFile)
		if err != nil {
			return Encryption{}, fmt.Errorf("identity file: %w", err)
		}
		defer f.Close()
		ids, err := age.ParseIdentities(f)
		if err != nil {
			return Encryption{}, fmt.Errorf("identity file %s: %w", identityFile, err)
		}
		e.Identities = ids
	}
	return e, nil
}

// Encode streams the plaintext snapshot from r through the compression
// of Codec and, when enabled, age into w. It returns the plaintext size
// and sha256.
func Encode(w io.Writer, r io.Reader, enc Encryption) (size int64, sum string, err error) {
	return EncodeWith(w, r, enc, Codec)
}

// EncodeWith is Encode in the named codec (CodecZstd writes objects that
// versions before CodecS2 also read).
func EncodeWith(w io.Writer, r io.Reader, enc Encryption, codec string) (size int64, sum string, err error) {
	tail, err := encode(w, r, enc, codec)
	if err != nil {
		return 0, "", err
	}
	return tail.n, hex.EncodeToString(tail.sum()), nil
}

// encode is Encode returning the hash state, which also tells whether
// etcd's trailing hash is right (tail.ok), from the same single pass.
func encode(w io.Writer, r io.Reader, enc Encryption, codec string) (*tailHash, error) {
	if err := knownCodec(codec); err != nil {
		return nil, err
	}
	var sink io.WriteCloser = nopCloser{w}
	var ageW io.WriteCloser
	if enc.Enabled() {
		var err error
		ageW, err = age.Encrypt(w, enc.Recipients...)
		if err != nil {
			return nil, fmt.Errorf("start encryption: %w", err)
		}
		sink = ageW
	}
	// Independent frames (blocks) compressed on every core (up to 4),
	// written in order from their own goroutine: frames.go for zstd, the
	// S2 writer's own for S2.
	workers := min(4, max(1, runtime.GOMAXPROCS(0)))
	var zw io.WriteCloser
	if codec == CodecZstd {
		fw, err := newFrameWriter(sink, workers)
		if err != nil {
			return nil, err
		}
		zw = fw
	} else {
		zw = s2.NewWriter(sink, s2.WriterConcurrency(workers), s2.WriterBlockSize(s2BlockSize))
	}
	tail := &tailHash{h: sha256.New()}
	hash := newBehind(tail, 4)
	_, err := io.Copy(io.MultiWriter(zw, hash), r)
	hash.Close()
	if err != nil {
		zw.Close()
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	if ageW != nil {
		if err := ageW.Close(); err != nil {
			return nil, fmt.Errorf("encrypt: %w", err)
		}
	}
	return tail, nil
}

type nopCloser struct{ io.Writer }

// keyError is Decode's failure to open an encrypted object with the keys
// it was given (none, or none that matches): a wrong key looks like this
// as much as a damaged object does (NotDecrypted).
type keyError struct{ error }

func (e keyError) Unwrap() error { return e.error }

// NotDecrypted reports whether err is Decode's failure to open an
// encrypted object with the keys given (no key, or none of them opens
// its header): the reader's keys may be what is wrong, not the object. A
// checksum mismatch (ErrChecksum) or a payload that fails age's own
// authentication once opened is the object's.
func NotDecrypted(err error) bool {
	var k keyError
	return errors.As(err, &k)
}

func (nopCloser) Close() error { return nil }

// ErrUnknownCodec reports metadata naming a codec this version does not
// read: written by a newer version, or edited. Nothing is decoded.
var ErrUnknownCodec = errors.New("unknown snapshot codec")

func knownCodec(codec string) error {
	if codec != CodecZstd && codec != CodecS2 {
		return fmt.Errorf("%w %q (this version reads %q and %q)", ErrUnknownCodec, codec, CodecZstd, CodecS2)
	}
	return nil
}

// s2ConcurrentFrom is the plaintext size from which an S2 object is
// decoded on every core: below it (deltas, small keyspaces) the buffers
// of a concurrent decode (2 blocks per core) cost more than it saves.
const s2ConcurrentFrom = 32 << 20

// errPastSize is what pastSize returns once more than the recorded
// plaintext has been written.
var errPastSize = errors.New("past the recorded size")

// pastSize passes at most max bytes to w, then fails: a decompressor
// writing into it stops at the MAC'd size and a byte (Decode).
type pastSize struct {
	w   io.Writer
	max int64
}

func (p *pastSize) Write(b []byte) (int, error) {
	if int64(len(b)) <= p.max {
		p.max -= int64(len(b))
		return p.w.Write(b)
	}
	n, err := p.w.Write(b[:p.max])
	p.max -= int64(n)
	if err != nil {
		return n, err
	}
	return n, errPastSize
}

// smallWriteSize bounds one write of decoded plaintext. The S2 decoder
// hands over 4 MiB blocks, and writing them to a file as they come cost
// 3.6-4.8 s of system time per 1.2 GB on the bench machine where writes
// of 32-128 KiB cost 0.6-1.1 s (the same bytes, page cache then fsync).
const smallWriteSize = 128 << 10

// smallWrites passes each write on in pieces of at most smallWriteSize.
type smallWrites struct{ w io.Writer }

func (s smallWrites) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k, err := s.w.Write(p[:min(len(p), smallWriteSize)])
		n += k
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// Decode streams the stored object from r back to plaintext into w and
// checks it against meta: the metadata's MAC first (Authenticated), then
// the codec it names (ErrUnknownCodec), then the sha256 and size recorded
// at save time, and etcd's own trailing hash. Nothing is trusted before
// Decode returns nil.
func Decode(w io.Writer, r io.Reader, meta Meta, enc Encryption) error {
	if err := enc.Authenticated(meta); err != nil {
		return err
	}
	if err := knownCodec(meta.Codec); err != nil {
		return fmt.Errorf("%s: %w", meta.Name, err)
	}
	if meta.StoredSize > 0 {
		// Never read far past the stored size (MAC'd with the rest): an
		// object that does not end (skippable frames or chunks without
		// end produce no plaintext, so the plaintext bound never trips)
		// is cut one byte past it and fails, as a delta segment's read
		// is.
		r = io.LimitReader(r, meta.StoredSize+1)
	}
	src := bufio.NewReaderSize(r, 1<<20)
	var in io.Reader = src
	if meta.Encrypted {
		if len(enc.Identities) == 0 {
			return keyError{errors.New("snapshot is encrypted: give the passphrase or an identity file")}
		}
		dr, err := age.Decrypt(src, enc.Identities...)
		if err != nil {
			return keyError{fmt.Errorf("decrypt %s (wrong key or passphrase?): %w", meta.Name, err)}
		}
		in = dr
	}
	tail := &tailHash{h: sha256.New()}
	hash := newBehind(tail, 4)
	// No more than the MAC'd size and one byte: a store writer's zstd
	// bomb in a genuine object's place (same stored size) inflated to
	// whatever it held before the size was compared, 271 MiB in memory
	// from a 64 KiB delta, 64 MiB to disk for a snapshot of 1000 bytes.
	out := &pastSize{w: smallWrites{io.MultiWriter(w, hash)}, max: max(meta.Size, 0) + 1}
	err := decompress(out, in, meta)
	hash.Close()
	if err != nil && !errors.Is(err, errPastSize) {
		return fmt.Errorf("read %s (truncated or corrupt?): %w", meta.Name, err)
	}
	if tail.n > meta.Size {
		return fmt.Errorf("%s: inflates past its recorded %d bytes: %w", meta.Name, meta.Size, ErrChecksum)
	}
	if got := hex.EncodeToString(tail.sum()); got != meta.SHA256 || tail.n != meta.Size {
		return fmt.Errorf("%s: %d bytes with sha256 %s, recorded %d bytes with %s: %w", meta.Name, tail.n, got, meta.Size, meta.SHA256, ErrChecksum)
	}
	if !tail.ok() {
		return fmt.Errorf("%s: etcd's own hash at the end of the snapshot does not match its content: %w", meta.Name, ErrChecksum)
	}
	return nil
}

// decompress writes the plaintext of in, compressed with meta.Codec (a
// known one), to w. A large S2 object's blocks are decoded on every core
// (up to 4) while this goroutine reads and decrypts the next ones and w
// takes the decoded ones in order: decryption, decompression, writing and
// hashing (behind) overlap.
func decompress(w io.Writer, in io.Reader, meta Meta) error {
	if meta.Codec == CodecZstd {
		zr, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(2), zstd.WithDecoderMaxWindow(MaxWindow))
		if err != nil {
			return err
		}
		defer zr.Close()
		_, err = io.Copy(w, zr)
		return err
	}
	// Each block's CRC-32C is left unchecked: the sha256 of the whole
	// plaintext, MAC'd, is checked after it, and a damaged block fails it
	// as surely (0.24 CPU-s of a 1.2 GB restore; a damaged block's
	// structure still fails the decoder at once).
	sr := s2.NewReader(in, s2.ReaderMaxBlockSize(s2BlockSize), s2.ReaderIgnoreCRC())
	if meta.Size < s2ConcurrentFrom {
		_, err := io.Copy(w, sr)
		return err
	}
	_, err := sr.DecodeConcurrent(w, min(4, max(2, runtime.GOMAXPROCS(0))))
	return err
}

// tailHash checks etcd's snapshot format: the database followed by the
// sha256 of the database. It hashes all but the last 32 bytes, streaming,
// and gives the sha256 of the whole stream from the same pass (sha256 is
// a running state: the sum of the prefix, then the last 32 bytes on top),
// so a snapshot is hashed once, not twice.
type tailHash struct {
	h    hash.Hash
	n    int64
	last []byte
}

func (t *tailHash) Write(p []byte) (int, error) {
	n := len(p)
	t.n += int64(n)
	if len(p) >= sha256.Size {
		t.h.Write(t.last)
		t.h.Write(p[:len(p)-sha256.Size])
		t.last = append(t.last[:0], p[len(p)-sha256.Size:]...)
		return n, nil
	}
	buf := append(append([]byte{}, t.last...), p...)
	if over := len(buf) - sha256.Size; over > 0 {
		t.h.Write(buf[:over])
		buf = buf[over:]
	}
	t.last = buf
	return n, nil
}

// ok reports whether the last 32 bytes are the sha256 of what precedes.
func (t *tailHash) ok() bool {
	return len(t.last) == sha256.Size && bytes.Equal(t.h.Sum(nil), t.last)
}

// sum returns the sha256 of everything written. Sum does not change the
// state, so the prefix's sum (ok) stays available.
func (t *tailHash) sum() []byte {
	h, err := t.h.(hash.Cloner).Clone()
	if err != nil {
		panic(fmt.Sprintf("sha256 clone: %v", err)) // crypto/sha256 always clones
	}
	h.Write(t.last)
	return h.Sum(nil)
}
