package snapshot

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Revision reads the revision of a plaintext etcd snapshot (the bbolt
// database, etcd's trailing hash after it does not matter) the way etcd
// restores it: the main revision of the last key of the "key" bucket
// (8 bytes big-endian, '_', 8 bytes of sub revision), raised to the
// finished and scheduled compaction revisions of the "meta" bucket (a
// compaction can remove every key), and 1 for an empty store.
func Revision(path string) (int64, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		return 0, fmt.Errorf("open snapshot %s as etcd's database: %w", path, err)
	}
	defer db.Close()
	rev := int64(1)
	err = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("key")); b != nil {
			if k, _ := b.Cursor().Last(); k != nil {
				r, err := mainRevision(k)
				if err != nil {
					return fmt.Errorf("last key: %w", err)
				}
				rev = max(rev, r)
			}
		}
		if b := tx.Bucket([]byte("meta")); b != nil {
			for _, name := range []string{"finishedCompactRev", "scheduledCompactRev"} {
				if v := b.Get([]byte(name)); v != nil {
					r, err := mainRevision(v)
					if err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
					rev = max(rev, r)
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read the revision of snapshot %s: %w", path, err)
	}
	return rev, nil
}

// mainRevision decodes etcd's revision bytes: main, '_', sub (and a 't'
// for a tombstone).
func mainRevision(b []byte) (int64, error) {
	if len(b) < 17 || b[8] != '_' {
		return 0, fmt.Errorf("%x is not an etcd revision", b)
	}
	return int64(binary.BigEndian.Uint64(b[:8])), nil
}
