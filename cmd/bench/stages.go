package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"filippo.io/age"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// stageTimes are the seconds each stage of the snapshot paths takes
// alone, on the same data, in memory (but for write): CPU seconds (user +
// system, all threads: what the stage costs whatever else runs on the
// machine) for the CPU stages, wall seconds for write; the least of 3
// runs each. What the arithmetic of docs/benchmarks.md starts from.
type stageTimes struct {
	PlainBytes  int64   `json:"plain_bytes"`
	StoredBytes int64   `json:"stored_bytes"`
	Compress    float64 `json:"compress"`   // zstd as Encode sets it up, plaintext in
	Encrypt     float64 `json:"encrypt"`    // age X25519 of the compressed bytes
	Hash        float64 `json:"sha256"`     // sha256 of the plaintext
	Decrypt     float64 `json:"decrypt"`    // age of the stored object
	Decompress  float64 `json:"decompress"` // zstd as Decode sets it up
	Write       float64 `json:"write"`      // the plaintext to a new file, fsynced
	// S2Compress and S2Bytes: the same plaintext through S2 (klauspost's
	// Snappy successor, same module as zstd) instead, for comparison: a
	// codec this repository does not store with.
	S2Compress float64 `json:"s2_compress"`
	S2Bytes    int64   `json:"s2_bytes"`
}

// runSnapshotStages is the "snapshot-stages" helper: it times each stage
// of a save and of a restore alone, on etcdctl's plaintext snapshot and
// on the stored object of the same keyspace, and prints stageTimes.
func runSnapshotStages(args []string) error {
	fs := flag.NewFlagSet("snapshot-stages", flag.ContinueOnError)
	plainPath := fs.String("plain", "", "")
	storeDir := fs.String("store", "", "")
	name := fs.String("name", "", "")
	identity := fs.String("identity", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *plainPath == "" || *storeDir == "" || *name == "" || *identity == "" {
		return errors.New("-plain, -store, -name and -identity are required")
	}
	enc, err := snapshot.X25519(nil, *identity)
	if err != nil {
		return err
	}
	plain, err := os.ReadFile(*plainPath)
	if err != nil {
		return err
	}
	store, err := file.New(*storeDir, "bench")
	if err != nil {
		return err
	}
	rc, _, err := store.Open(context.Background(), *name)
	if err != nil {
		return err
	}
	stored, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return err
	}
	st := stageTimes{PlainBytes: int64(len(plain)), StoredBytes: int64(len(stored))}
	timeIt := func(dst *float64, f func() error) error {
		for range 3 {
			start, cpu0 := time.Now(), cpuSelf()
			if err := f(); err != nil {
				return err
			}
			took := cpuSelf() - cpu0
			if dst == &st.Write {
				took = time.Since(start).Seconds()
			}
			if *dst == 0 || took < *dst {
				*dst = took
			}
		}
		return nil
	}
	var compressed bytes.Buffer
	if err := timeIt(&st.Compress, func() error {
		compressed.Reset()
		zw, err := zstd.NewWriter(&compressed, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithAllLitEntropyCompression(true), zstd.WithEncoderConcurrency(2))
		if err != nil {
			return err
		}
		if _, err := zw.Write(plain); err != nil {
			return err
		}
		return zw.Close()
	}); err != nil {
		return err
	}
	var s2out countWriter
	if err := timeIt(&st.S2Compress, func() error {
		s2out = 0
		w := s2.NewWriter(&s2out, s2.WriterConcurrency(2))
		if _, err := w.Write(plain); err != nil {
			return err
		}
		return w.Close()
	}); err != nil {
		return err
	}
	st.S2Bytes = int64(s2out)
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return err
	}
	if err := timeIt(&st.Encrypt, func() error {
		w, err := age.Encrypt(io.Discard, id.Recipient())
		if err != nil {
			return err
		}
		if _, err := w.Write(compressed.Bytes()); err != nil {
			return err
		}
		return w.Close()
	}); err != nil {
		return err
	}
	_ = timeIt(&st.Hash, func() error { sha256.Sum256(plain); return nil })
	var decrypted bytes.Buffer
	if err := timeIt(&st.Decrypt, func() error {
		decrypted.Reset()
		r, err := age.Decrypt(bytes.NewReader(stored), enc.Identities...)
		if err != nil {
			return err
		}
		_, err = io.Copy(&decrypted, r)
		return err
	}); err != nil {
		return err
	}
	if err := timeIt(&st.Decompress, func() error {
		zr, err := zstd.NewReader(bytes.NewReader(decrypted.Bytes()), zstd.WithDecoderConcurrency(2), zstd.WithDecoderMaxWindow(snapshot.MaxWindow))
		if err != nil {
			return err
		}
		defer zr.Close()
		_, err = io.Copy(io.Discard, zr)
		return err
	}); err != nil {
		return err
	}
	out := filepath.Join(filepath.Dir(*plainPath), "stages-write.db")
	defer os.Remove(out)
	if err := timeIt(&st.Write, func() error {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		if _, err := f.Write(plain); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(st)
}

// cpuSelf is this process's CPU time so far (user + system), seconds.
func cpuSelf() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// countWriter counts what is written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
