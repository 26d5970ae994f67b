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
	"github.com/klauspost/compress/zstd"
)

// Codec names the stored format.
const Codec = "zstd"

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

// Encode streams the plaintext snapshot from r through zstd and, when
// enabled, age into w. It returns the plaintext size and sha256.
func Encode(w io.Writer, r io.Reader, enc Encryption) (size int64, sum string, err error) {
	tail, err := encode(w, r, enc)
	if err != nil {
		return 0, "", err
	}
	return tail.n, hex.EncodeToString(tail.sum()), nil
}

// encode is Encode returning the hash state, which also tells whether
// etcd's trailing hash is right (tail.ok), from the same single pass.
func encode(w io.Writer, r io.Reader, enc Encryption) (*tailHash, error) {
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
	// SpeedFastest with entropy coding of literals even in blocks without
	// matches (`make bench`, 2 shared cores, 1.1 GiB snapshots): on values
	// of random hex text, as small as SpeedDefault, and a save took 7-8 s
	// instead of 15.5 s on a busy machine; on JSON-like objects, 7% larger
	// and 12% faster. Without the literal coding SpeedFastest leaves
	// hex-like values uncompressed.
	// Independent frames compressed on every core (up to 4): frames.go.
	zw, err := newFrameWriter(sink, min(4, max(1, runtime.GOMAXPROCS(0))))
	if err != nil {
		return nil, err
	}
	tail := &tailHash{h: sha256.New()}
	hash := newBehind(tail, 4)
	_, err = io.Copy(io.MultiWriter(zw, hash), r)
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

// Decode streams the stored object from r back to plaintext into w and
// checks it against meta: the metadata's MAC first (Authenticated), then
// the sha256 and size recorded at save time, and etcd's own trailing
// hash. Nothing is trusted before Decode returns nil.
func Decode(w io.Writer, r io.Reader, meta Meta, enc Encryption) error {
	if err := enc.Authenticated(meta); err != nil {
		return err
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
	zr, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(2), zstd.WithDecoderMaxWindow(MaxWindow))
	if err != nil {
		return fmt.Errorf("decompress %s: %w", meta.Name, err)
	}
	defer zr.Close()
	tail := &tailHash{h: sha256.New()}
	hash := newBehind(tail, 4)
	// No more than the MAC'd size and one byte: a store writer's zstd
	// bomb in a genuine object's place (same stored size) inflated to
	// whatever it held before the size was compared, 271 MiB in memory
	// from a 64 KiB delta, 64 MiB to disk for a snapshot of 1000 bytes.
	_, err = io.Copy(io.MultiWriter(w, hash), io.LimitReader(zr, max(meta.Size, 0)+1))
	hash.Close()
	if err != nil {
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
